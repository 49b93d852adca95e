// The gather formulation of backward_from_indices where windows do not
// overlap, with lanes across contiguous elements (the channels of one
// channels-last input pixel): each input element reads the one window that
// covers it and takes that window's grad_output where the window's index
// names the element's own tap, else +0. A window whose index is -1, out of
// range or a padding tap matches no real element: it selects nothing, and no
// write can go out of bounds. Every input element is written exactly once,
// in the element type: no zeroing pass, no accumulator plane, no rounding.
// (Measured: where windows overlap, reading every covering window costs more
// than the scatter, e.g. 27 windows per element at k3 s1.)
#ifndef POOL3D_KERNELS_COMMON_LANE_GATHER_H_
#define POOL3D_KERNELS_COMMON_LANE_GATHER_H_

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "element_types.h"
#include "first_max.h"

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

}  // namespace pool3d

#endif  // POOL3D_KERNELS_COMMON_LANE_GATHER_H_
