// ThreadCount and ChannelBlock (see threading.h).
#include "threading.h"

#include <algorithm>
#include <cstdlib>

namespace pool3d {

int ThreadCount(int64_t n_items, int64_t total_elements) {
  int64_t want = 0;
  if (const char* env = std::getenv("POOL3D_CPU_THREADS")) {
    want = std::atoll(env);  // explicit override, also for tiny problems
  }
  if (want <= 0) {
    if (total_elements < (int64_t{1} << 16)) return 1;  // not worth a thread
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

}  // namespace pool3d
