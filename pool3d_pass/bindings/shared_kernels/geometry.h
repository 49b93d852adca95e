// Shared by the CPU and the CUDA kernels (bindings/shared_kernels/): both
// platforms read one Geom and one definition of a tap index, so indices written
// on one are read the same on the other.
//
// Window geometry shared by every pooling kernel.
//
// Geom holds one call's validated shape and attributes (see validate.h, the
// only place that builds one). The helpers clip a window's taps to the input
// and describe what a selected tap index means, so that the forward (which
// writes indices) and the backward from indices (which reads them) share one
// definition: tap t of a window is td * kH * kW + th * kW + tw.
//
// The helpers marked POOL3D_HD (hd.h) are the window-geometry rules the CUDA
// kernels share: templates over the integer type (int64_t here; int32_t or
// int64_t on the GPU) and, where they read a geometry, over its struct (Geom
// here, the GPU's own narrower copy there), which needs only the fields named.
#ifndef POOL3D_SHARED_KERNELS_GEOMETRY_H_
#define POOL3D_SHARED_KERNELS_GEOMETRY_H_

#include <algorithm>
#include <cstdint>

#include "hd.h"

namespace pool3d {

struct Geom {
  int64_t B, C;
  int64_t D, H, W;     // input spatial extents
  int64_t Do, Ho, Wo;  // output spatial extents
  int64_t kD, kH, kW, sD, sH, sW, pD, pH, pW;
  bool in_cl, out_cl;  // channels-last (NDHWC) input / output
  bool overlap;        // some stride < kernel: windows may share elements
  bool full_cover;     // every input element lies in some window

  POOL3D_HD int64_t Taps() const { return kD * kH * kW; }
  POOL3D_HD int64_t InputPlane() const { return D * H * W; }
  POOL3D_HD int64_t OutputPlane() const { return Do * Ho * Wo; }
};

// Taps t in [0, k) of a window starting at `start` that fall inside [0, n).
template <class I>
POOL3D_HD inline void TapRange(I start, I k, I n, I* lo, I* hi) {
  *lo = start < 0 ? -start : I(0);
  *hi = n - start < k ? n - start : k;
  if (*hi < *lo) *hi = *lo;
}

// The windows o in [*lo, *hi] (possibly empty: *lo > *hi) of one axis that
// cover input position i, q = i + p (its position in the padded axis):
// o * s <= q < o * s + k and 0 <= o < n_out. Ascending o is the order in
// which the scatter adds their gradients (first window first).
template <class I>
POOL3D_HD inline void CoveringWindows(I q, I k, I s, I n_out, I* lo, I* hi) {
  *lo = q < k ? I(0) : (q - k) / s + 1;
  *hi = q / s < n_out - 1 ? q / s : n_out - 1;
}

// The tap of window-relative position (td, th, tw): the contract's index.
template <class I, class G>
POOL3D_HD inline I TapOf(const G& g, I td, I th, I tw) {
  return (td * I(g.kH) + th) * I(g.kW) + tw;
}

// The input position (d, h, w) that tap t of window (d0, h0, w0) names, or
// false where t names no real element: outside [0, taps) (a window that
// selected nothing stores -1; a corrupt index) or a tap in the padding.
template <class I, class G>
POOL3D_HD inline bool SelectedPosition(const G& g, I t, I d0, I h0, I w0, I* d,
                                       I* h, I* w) {
  const I kH = I(g.kH), kW = I(g.kW);
  if (t < 0 || t >= I(g.kD) * kH * kW) return false;
  *d = d0 + t / (kH * kW);
  *h = h0 + t / kW % kH;
  *w = w0 + t % kW;
  return *d >= 0 && *d < I(g.D) && *h >= 0 && *h < I(g.H) && *w >= 0 &&
         *w < I(g.W);
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
template <class I>
POOL3D_HD inline void LayoutStrides(bool cl, I C, I d, I h, I w, I* st) {
  if (cl) {
    st[0] = d * h * w * C; st[1] = 1; st[2] = h * w * C; st[3] = w * C;
    st[4] = C;
  } else {
    st[0] = C * d * h * w; st[1] = d * h * w; st[2] = h * w; st[3] = w;
    st[4] = 1;
  }
}

}  // namespace pool3d

#endif  // POOL3D_SHARED_KERNELS_GEOMETRY_H_
