// Threading shared by the kernels: how many threads a call uses, and a
// parallel loop over independent work items.
//
// Every kernel splits its work so that no two items write the same output
// element; ParallelFor only hands items out. An exception thrown by an item
// (std::bad_alloc from a scratch vector) stops the loop and is rethrown on the
// calling thread, where the FFI handler turns it into an error: it never
// reaches std::terminate.
#ifndef POOL3D_KERNELS_COMMON_THREADING_H_
#define POOL3D_KERNELS_COMMON_THREADING_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>

namespace pool3d {

// Threads for n_items items over total_elements elements: the environment
// variable POOL3D_CPU_THREADS if set (> 0), else hardware threads (at most 8),
// one thread under 256K elements; never more than n_items or 64.
int ThreadCount(int64_t n_items, int64_t total_elements);

// Channels per block for channels-last kernels: enough blocks to feed the
// threads, each a multiple of 8 where possible.
int64_t ChannelBlock(int64_t C, int64_t other_items, int threads_hint);

// Chunks per thread ParallelFor aims at: enough to even out threads slowed by
// other tenants, few enough that each chunk is a run of neighbouring items.
inline constexpr int64_t kChunksPerThread = 16;

// Runs job(ctx) on the calling thread and on `helpers` other threads at once,
// and returns when every run has returned; job must not throw. The other
// threads come from a pool kept for the life of the process (started as
// needed, never more than 63): starting and joining a thread per call was
// measured at 20-60 us here, as long as a whole small pooling call. A call
// that finds the pool busy (another kernel running on another thread, or a
// kernel called from inside a job) starts threads of its own instead.
void RunOnThreads(int helpers, void (*job)(void*), void* ctx);

// Runs fn(item, scratch) for item in [0, n_items) on `threads` threads; items
// are handed out dynamically in chunks of consecutive items (about
// kChunksPerThread per thread). Handing out single items was measured up to
// 1.5x slower on 2 cores with rows as items: the shared counter's cache line
// moves between cores on every item, and each thread's reads and writes
// stride over every other row instead of streaming. Each thread owns one
// Scratch object.
template <class Scratch, class Fn>
void ParallelFor(int64_t n_items, int threads, Fn fn) {
  if (n_items <= 0) return;
  if (threads <= 1) {
    Scratch scratch;
    for (int64_t i = 0; i < n_items; ++i) fn(i, scratch);
    return;
  }
  const int64_t chunk =
      std::max<int64_t>(1, n_items / (int64_t(threads) * kChunksPerThread));
  std::atomic<int64_t> next{0};
  std::exception_ptr error;
  std::mutex error_mu;
  auto worker = [&]() {
    try {
      Scratch scratch;
      for (int64_t i; (i = next.fetch_add(chunk, std::memory_order_relaxed)) <
                      n_items;) {
        for (const int64_t end = std::min(n_items, i + chunk); i < end; ++i)
          fn(i, scratch);
      }
    } catch (...) {
      next.store(n_items, std::memory_order_relaxed);
      std::lock_guard<std::mutex> lock(error_mu);
      if (!error) error = std::current_exception();
    }
  };
  RunOnThreads(
      threads - 1, [](void* w) { (*static_cast<decltype(worker)*>(w))(); },
      &worker);
  if (error) std::rethrow_exception(error);
}

}  // namespace pool3d

#endif  // POOL3D_KERNELS_COMMON_THREADING_H_
