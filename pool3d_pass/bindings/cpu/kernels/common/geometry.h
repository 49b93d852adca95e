// Window geometry shared by every pooling kernel.
//
// Geom holds one call's validated shape and attributes (see validate.h, the
// only place that builds one). The helpers clip a window's taps to the input
// and describe what a selected tap index means, so that the forward (which
// writes indices) and the backward from indices (which reads them) share one
// definition: tap t of a window is td * kH * kW + th * kW + tw.
#ifndef POOL3D_KERNELS_COMMON_GEOMETRY_H_
#define POOL3D_KERNELS_COMMON_GEOMETRY_H_

#include <algorithm>
#include <cstdint>

namespace pool3d {

struct Geom {
  int64_t B, C;
  int64_t D, H, W;     // input spatial extents
  int64_t Do, Ho, Wo;  // output spatial extents
  int64_t kD, kH, kW, sD, sH, sW, pD, pH, pW;
  bool in_cl, out_cl;  // channels-last (NDHWC) input / output
  bool overlap;        // some stride < kernel: windows may share elements
  bool full_cover;     // every input element lies in some window

  int64_t Taps() const { return kD * kH * kW; }
  int64_t InputPlane() const { return D * H * W; }
  int64_t OutputPlane() const { return Do * Ho * Wo; }
};

// Taps t in [0, k) of a window starting at `start` that fall inside [0, n).
inline void TapRange(int64_t start, int64_t k, int64_t n, int64_t* lo,
                     int64_t* hi) {
  *lo = std::max<int64_t>(0, -start);
  *hi = std::min<int64_t>(k, n - start);
  if (*hi < *lo) *hi = *lo;
}

// Input rows [lo, hi) along one axis that window `o` "owns" when windows do
// not overlap: its own taps plus any uncovered rows up to the next window
// (and to the end of the axis for the last window). Disjoint across `o`.
inline void OwnedRange(int64_t o, int64_t n_out, int64_t s, int64_t p,
                       int64_t n, int64_t* lo, int64_t* hi) {
  int64_t a = o == 0 ? 0 : o * s - p;
  int64_t b = o == n_out - 1 ? n : (o + 1) * s - p;
  *lo = std::clamp<int64_t>(a, 0, n);
  *hi = std::clamp<int64_t>(b, 0, n);
  if (*hi < *lo) *hi = *lo;
}

// Element strides (b, c, d, h, w) of a rank-5 tensor with spatial extents
// (d, h, w) and C channels, channels-last or not.
inline void LayoutStrides(bool cl, int64_t C, int64_t d, int64_t h, int64_t w,
                          int64_t* st) {
  if (cl) {
    st[0] = d * h * w * C; st[1] = 1; st[2] = h * w * C; st[3] = w * C;
    st[4] = C;
  } else {
    st[0] = C * d * h * w; st[1] = d * h * w; st[2] = h * w; st[3] = w;
    st[4] = 1;
  }
}

}  // namespace pool3d

#endif  // POOL3D_KERNELS_COMMON_GEOMETRY_H_
