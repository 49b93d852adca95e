// The gather formulation of backward_from_indices, with lanes across
// contiguous elements (channels of one channels-last input pixel, or a
// stride-1 row flattened to (w, c) lanes).
//
// Each input element reads the windows that cover it, in ascending
// (od, oh, ow) order (the order the scatter kernels add in, so the sums are
// the same bits), and takes a window's grad_output where that window's index
// names the element's own tap. A window whose index is -1, out of range or a
// padding tap matches no real element: it selects nothing, and no write can
// go out of bounds. Every input element is written exactly once: no zeroing
// pass, no accumulator plane.
//   - one covering window (windows do not overlap): the element is that
//     window's grad_output (+0 for -0, as 0 + g) or +0, in the element type;
//   - several: the contributions add in f32 (the adds of non-matching
//     windows are + 0.0, which leaves an f32 sum unchanged: it is never -0),
//     rounded once.
// A run's windows: lane j of window i reads idx/go at off[i] + j and
// matches tap number tap[i].
#ifndef POOL3D_KERNELS_COMMON_LANE_GATHER_H_
#define POOL3D_KERNELS_COMMON_LANE_GATHER_H_

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "element_types.h"
#include "first_max.h"
#include "lane_search.h"

namespace pool3d {

// One window: dx[j] = idx[j] == t ? 0 + go[j] : +0.
template <class T>
POOL3D_HOT void GatherOne(const int16_t* __restrict idx,
                          const typename T::M* __restrict go, int16_t t,
                          int64_t n, typename T::M* __restrict dx) {
  using M = typename T::M;
  for (int64_t j = 0; j < n; ++j) {
    const M v = go[j];
    const M keep = M(-M(idx[j] == t)) & M(-M((v & T::kAbs) != 0));
    dx[j] = M(v & keep);
  }
}

// Several windows, f32 sums of n <= kLaneChunk lanes.
template <class T>
POOL3D_HOT void GatherSum(const int16_t* __restrict idx_base,
                          const typename T::M* __restrict go_base,
                          const int64_t* __restrict off,
                          const int16_t* __restrict tap, int64_t nwin,
                          int64_t n, typename T::M* __restrict dx) {
  float acc[kLaneChunk];
  for (int64_t j = 0; j < n; ++j) acc[j] = 0.0f;
  for (int64_t i = 0; i < nwin; ++i) {
    const int16_t* __restrict id = idx_base + off[i];
    const typename T::M* __restrict g = go_base + off[i];
    const int16_t t = tap[i];
    for (int64_t j = 0; j < n; ++j) {
      const uint32_t m = -uint32_t(id[j] == t);
      acc[j] += BitsFloat(FloatBits(T::ToF32(g[j])) & m);
    }
  }
  for (int64_t j = 0; j < n; ++j) dx[j] = T::FromF32(acc[j]);
}

// dx[0, n) of a run with nwin covering windows.
template <class T>
inline void GatherRun(const int16_t* idx_base, const typename T::M* go_base,
                      const int64_t* off, const int16_t* tap, int64_t nwin,
                      int64_t n, typename T::M* dx) {
  if (nwin == 0) {
    std::memset(static_cast<void*>(dx), 0, sizeof(*dx) * n);
    return;
  }
  if (nwin == 1) {
    GatherOne<T>(idx_base + off[0], go_base + off[0], tap[0], n, dx);
    return;
  }
  for (int64_t j0 = 0; j0 < n; j0 += kLaneChunk) {
    const int64_t nn = std::min(kLaneChunk, n - j0);
    GatherSum<T>(idx_base + j0, go_base + j0, off, tap, nwin, nn, dx + j0);
  }
}

}  // namespace pool3d

#endif  // POOL3D_KERNELS_COMMON_LANE_GATHER_H_
