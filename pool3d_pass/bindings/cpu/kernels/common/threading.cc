// ThreadCount, ChannelBlock and RunOnThreads with its thread pool (see
// threading.h).
#include "threading.h"

#include <pthread.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <new>
#include <system_error>
#include <thread>
#include <vector>

namespace pool3d {

// Elements below which a call runs on one thread. Measured interleaved from
// cold caches on 2 cores, one thread against two, with the pool, five
// shapes of 131K-221K elements and three calls each: one thread 1.1x-1.5x
// faster on 11 of 15 (every from_indices), level on 4. At 262K elements
// (NCDHW k3 s1 p1) two threads were 1.1x-1.2x faster on from_input and
// from_indices; from 400K to 1.6M mixed: two threads faster where the work
// per element is high (C = 3 from_input 1.35x, NCDHW k3 s2 p1 forward
// 1.2x), slower where a call streams (from_indices 0.7x-0.95x).
constexpr int64_t kOneThreadBelow = int64_t{1} << 18;

int ThreadCount(int64_t n_items, int64_t total_elements) {
  int64_t want = 0;
  if (const char* env = std::getenv("POOL3D_CPU_THREADS")) {
    want = std::atoll(env);  // explicit override, also for tiny problems
  }
  if (want <= 0) {
    if (total_elements < kOneThreadBelow) return 1;
    unsigned hw = std::thread::hardware_concurrency();
    want = std::min<int64_t>(hw == 0 ? 1 : hw, 8);
  }
  want = std::min<int64_t>(want, 64);
  return int(std::max<int64_t>(1, std::min<int64_t>(want, n_items)));
}

int64_t ChannelBlock(int64_t C, int64_t other_items, int threads_hint) {
  int64_t nc = std::max<int64_t>(C, 1);
  while (other_items * ((C + nc - 1) / nc) < threads_hint && nc > 16) {
    nc = (nc / 2 + 7) / 8 * 8;
  }
  return nc;
}

namespace {

inline void Pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Pauses the caller spins for its helpers, once its own share is done,
// before it sleeps (a millisecond or so): waking a sleeping caller costs
// tens of microseconds here.
constexpr int kDoneSpins = 1 << 16;

// Whether this thread is running a pool job: a call from inside one (which
// would wait on the pool it holds) takes threads of its own.
thread_local bool t_in_pool_job = false;

void RunAsPoolJob(void (*job)(void*), void* ctx) {
  t_in_pool_job = true;
  job(ctx);
  t_in_pool_job = false;
}

// Threads that wait for a job, run it once each and wait again. One caller at
// a time (call_mu_); a job's generation number tells the waiting threads a
// new one is posted, its helper count which of them take part.
class HelperPool {
 public:
  // Runs job on the caller and `helpers` pool threads (fewer if no more can
  // be started); false, having run nothing, if another call holds the pool.
  bool TryRun(int helpers, void (*job)(void*), void* ctx) {
    std::unique_lock<std::mutex> call(call_mu_, std::try_to_lock);
    if (!call.owns_lock()) return false;
    for (; started_ < helpers; ++started_) {
      try {
        std::thread(&HelperPool::Serve, this, started_, generation_).detach();
      } catch (const std::system_error&) {
        break;  // no more threads to be had: run with those there are
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      job_ = job, ctx_ = ctx;
      helpers_ = std::min(helpers, started_);
      pending_.store(helpers_, std::memory_order_relaxed);
      ++generation_;
    }
    work_cv_.notify_all();
    RunAsPoolJob(job, ctx);
    for (int spin = 0; spin < kDoneSpins; ++spin) {
      if (pending_.load(std::memory_order_acquire) == 0) return true;
      Pause();
    }
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [&] {
      return pending_.load(std::memory_order_relaxed) == 0;
    });
    return true;
  }

 private:
  void Serve(int index, uint64_t seen) {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      work_cv_.wait(lock, [&] { return generation_ != seen; });
      seen = generation_;
      if (index >= helpers_) continue;
      void (*job)(void*) = job_;
      void* ctx = ctx_;
      lock.unlock();
      RunAsPoolJob(job, ctx);
      lock.lock();
      // Under mu_, so that a caller about to sleep cannot miss the notify.
      if (pending_.fetch_sub(1, std::memory_order_release) == 1)
        done_cv_.notify_one();
    }
  }

  std::mutex call_mu_, mu_;
  std::condition_variable work_cv_, done_cv_;
  uint64_t generation_ = 0;
  int started_ = 0, helpers_ = 0;
  std::atomic<int> pending_{0};  // helpers still running the job
  void (*job_)(void*) = nullptr;
  void* ctx_ = nullptr;
};

// The process's pool, made on first use and never destroyed (its threads are
// detached and may still wait at exit). A forked child has none of the
// parent's threads: it starts a pool of its own.
std::atomic<HelperPool*> g_pool{nullptr};
std::mutex g_pool_mu;

void ForgetPoolInChild() {
  g_pool.store(nullptr, std::memory_order_relaxed);  // the parent's: leaked
  new (&g_pool_mu) std::mutex;  // it may have been held at the fork
}

HelperPool* Pool() {
  HelperPool* pool = g_pool.load(std::memory_order_acquire);
  if (pool != nullptr) return pool;
  std::lock_guard<std::mutex> lock(g_pool_mu);
  pool = g_pool.load(std::memory_order_relaxed);
  if (pool == nullptr) {
    static const int registered =
        pthread_atfork(nullptr, nullptr, &ForgetPoolInChild);
    (void)registered;
    pool = new HelperPool;
    g_pool.store(pool, std::memory_order_release);
  }
  return pool;
}

// The fallback: threads started for this call and joined before it returns.
void RunOnOwnThreads(int helpers, void (*job)(void*), void* ctx) {
  std::vector<std::thread> threads;
  try {
    threads.reserve(helpers);
    for (int t = 0; t < helpers; ++t) threads.emplace_back(job, ctx);
  } catch (const std::exception&) {
    // No more threads to be had: the ones started and this one do the work.
  }
  job(ctx);
  for (auto& th : threads) th.join();
}

}  // namespace

void RunOnThreads(int helpers, void (*job)(void*), void* ctx) {
  helpers = std::min(helpers, 63);
  if (helpers <= 0) return job(ctx);
  HelperPool* pool = nullptr;
  try {
    pool = Pool();
  } catch (const std::bad_alloc&) {
  }
  if (pool == nullptr || t_in_pool_job || !pool->TryRun(helpers, job, ctx))
    RunOnOwnThreads(helpers, job, ctx);
}

}  // namespace pool3d
