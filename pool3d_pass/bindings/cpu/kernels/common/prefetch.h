// Software prefetches for the channels-last searches, which read several
// input rows at once or compute long enough between reads that the hardware
// prefetcher leaves them waiting on memory (docs/benchmarks.md has the
// figures). Addresses are formed as integers: they may lie past the input,
// where a prefetch does nothing and no pointer is formed out of bounds.
#ifndef POOL3D_KERNELS_COMMON_PREFETCH_H_
#define POOL3D_KERNELS_COMMON_PREFETCH_H_

#include <cstdint>

namespace pool3d {

constexpr int64_t kCacheLine = 64;

// Every cache line that [p + offset, p + offset + bytes) touches.
inline void PrefetchRange(const void* p, int64_t offset, int64_t bytes) {
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p) + uintptr_t(offset);
  const uintptr_t end = begin + uintptr_t(bytes);
  for (uintptr_t a = begin & ~uintptr_t(kCacheLine - 1); a < end;
       a += kCacheLine)
    __builtin_prefetch(reinterpret_cast<const void*>(a));
}

// The lines the taps `off` of a pixel of C lanes at base + ahead read that
// the same taps of the pixel `step` input pixels before did not: of each run
// of taps at consecutive pixels (one (td, th) row of the window), the last
// `step` (ahead, off and step in elements and pixels as named).
template <class M>
inline void PrefetchNewTaps(const M* base, int64_t ahead, const int64_t* off,
                            int64_t ntaps, int64_t C, int64_t step) {
  constexpr int64_t kSize = int64_t(sizeof(M));
  for (int64_t i = 0; i < ntaps;) {
    int64_t j = i + 1;
    while (j < ntaps && off[j] == off[j - 1] + C) ++j;
    const int64_t first = j - i > step ? j - step : i;
    PrefetchRange(base, (ahead + off[first]) * kSize, (j - first) * C * kSize);
    i = j;
  }
}

// Lanes [0, nc) of each of the W pixels of C lanes of the row at base +
// offset (elements).
template <class M>
inline void PrefetchRowLanes(const M* base, int64_t offset, int64_t W,
                             int64_t C, int64_t nc) {
  constexpr int64_t kSize = int64_t(sizeof(M));
  if (nc == C) return PrefetchRange(base, offset * kSize, W * C * kSize);
  for (int64_t w = 0; w < W; ++w)
    PrefetchRange(base, (offset + w * C) * kSize, nc * kSize);
}

}  // namespace pool3d

#endif  // POOL3D_KERNELS_COMMON_PREFETCH_H_
