// Shared by the CPU and the CUDA kernels (bindings/shared_kernels/): the CUDA
// kernels' scalar paths run these same searches, so both platforms pick the
// same tap.
//
// Direct, tap-by-tap searches of one window: the rare paths of the fast
// kernels and the whole of the layout-generic ones.
#ifndef POOL3D_SHARED_KERNELS_WINDOW_SCAN_H_
#define POOL3D_SHARED_KERNELS_WINDOW_SCAN_H_

#include <cstdint>

#include "element_types.h"
#include "geometry.h"

namespace pool3d {

// The first tap of window (d0, h0, w0) whose input equals y receives gv.
// Spatial position q lives at xp[q * step] and acc[(q - q0) * acc_step].
template <class T>
void ScanWindow(const Geom& g, const typename T::M* xp, float* acc,
                int64_t d0, int64_t h0, int64_t w0, typename T::M yv,
                float gv, int64_t step = 1, int64_t acc_step = 1,
                int64_t q0 = 0) {
  const int64_t HW = g.H * g.W;
  int64_t td_lo, td_hi, th_lo, th_hi, tw_lo, tw_hi;
  TapRange(d0, g.kD, g.D, &td_lo, &td_hi);
  TapRange(h0, g.kH, g.H, &th_lo, &th_hi);
  TapRange(w0, g.kW, g.W, &tw_lo, &tw_hi);
  for (int64_t td = td_lo; td < td_hi; ++td)
    for (int64_t th = th_lo; th < th_hi; ++th)
      for (int64_t tw = tw_lo; tw < tw_hi; ++tw) {
        const int64_t q = (d0 + td) * HW + (h0 + th) * g.W + w0 + tw;
        if (EqMask<T>(xp[q * step], yv)) {
          acc[(q - q0) * acc_step] += gv;
          return;
        }
      }
}

// The contract's selection for window (d0, h0, w0), input position (d, h, w)
// at xp[d * st[0] + h * st[1] + w * st[2]]: *m = the window's maximum (its
// first NaN if it holds one; +0 over -0), *tap = the first tap equal to it
// as td * kH * kW + th * kW + tw, or -1 when the maximum is NaN. The window
// must hold a real element. Shared with the CUDA kernels (one thread per
// window there): I is the offset type, G a geometry with Geom's field names.
template <class T, class G, class I>
POOL3D_HD void WindowFirstMax(const G& g, const typename T::M* xp, const I* st,
                              I d0, I h0, I w0, typename T::M* m,
                              int32_t* tap) {
  using M = typename T::M;
  I td_lo, td_hi, th_lo, th_hi, tw_lo, tw_hi;
  TapRange<I>(d0, I(g.kD), I(g.D), &td_lo, &td_hi);
  TapRange<I>(h0, I(g.kH), I(g.H), &th_lo, &th_hi);
  TapRange<I>(w0, I(g.kW), I(g.W), &tw_lo, &tw_hi);
  int32_t best_key = kPadKey, best_tap = -1;
  M best = 0;
  bool plus_zero = false;
  for (I td = td_lo; td < td_hi; ++td)
    for (I th = th_lo; th < th_hi; ++th)
      for (I tw = tw_lo; tw < tw_hi; ++tw) {
        const M v = xp[(d0 + td) * st[0] + (h0 + th) * st[1] +
                       (w0 + tw) * st[2]];
        if (IsNan<T>(v)) {
          *m = v;
          *tap = -1;
          return;
        }
        plus_zero |= v == 0;
        const int32_t k = Key<T>(v);
        if (k > best_key) {
          best_key = k;
          best = v;
          best_tap = int32_t(TapOf<I>(g, td, th, tw));
        }
      }
  *m = best_key == 0 && plus_zero ? M(0) : best;
  *tap = best_tap;
}

// The recompute backward's selection of window (d0, h0, w0) (strides as in
// WindowFirstMax): the first real tap whose input equals y as a float (+0 ==
// -0, NaN equals nothing), or -1 when none does (y NaN, or not the window's
// maximum).
template <class T, class G, class I>
POOL3D_HD int32_t WindowFirstEqual(const G& g, const typename T::M* xp,
                                   const I* st, I d0, I h0, I w0,
                                   typename T::M y) {
  I td_lo, td_hi, th_lo, th_hi, tw_lo, tw_hi;
  TapRange<I>(d0, I(g.kD), I(g.D), &td_lo, &td_hi);
  TapRange<I>(h0, I(g.kH), I(g.H), &th_lo, &th_hi);
  TapRange<I>(w0, I(g.kW), I(g.W), &tw_lo, &tw_hi);
  for (I td = td_lo; td < td_hi; ++td)
    for (I th = th_lo; th < th_hi; ++th)
      for (I tw = tw_lo; tw < tw_hi; ++tw)
        if (EqMask<T>(xp[(d0 + td) * st[0] + (h0 + th) * st[1] +
                         (w0 + tw) * st[2]],
                      y))
          return int32_t(TapOf<I>(g, td, th, tw));
  return -1;
}

}  // namespace pool3d

#endif  // POOL3D_SHARED_KERNELS_WINDOW_SCAN_H_
