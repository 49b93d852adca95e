// The Generic kernels' per-thread work: any window, any pair of layouts, one
// window (or one input element) a unit, with the window's extents known only
// at run time. The rules are shared_kernels/window_scan.h's (the CPU kernels'
// scans); what is this file's own is the order of the loads: a unit walks its
// window's real taps (or an element's covering windows) kGenericBatch at a
// time, every load of a batch issued before the first is used, where the
// shared scans wait for each element before reading the next.
#ifndef POOL3D_GPU_CUDA_GENERIC_UNITS_H_
#define POOL3D_GPU_CUDA_GENERIC_UNITS_H_

#include <cstdint>
#include <type_traits>

#include "shared_kernels/window_scan.h"
#include "unit_common.h"

namespace pool3d {
namespace gpu {

// Loads in flight per thread in a Generic unit (checks/gpu_model.py reads it).
constexpr int kGenericBatch = 8;

// A row-major walk over a box of three axes, n_b x n_c the inner two, its
// element offset and its tap index kept by additions and selects (no multiply
// and no branch a step: a batch's loads stay one block).
template <class I>
struct Walk3 {
  I off, tap;        // where it is
  I c, n_c, b, n_b;  // inner counters and extents
  I st_b, st_c;      // offset steps
  I tap_b, tap_c;    // tap steps
  I st_a, tap_a;     // outer steps

  POOL3D_HD void Next() {
    off += st_c;
    tap += tap_c;
    const bool wrap_c = ++c == n_c;
    c = wrap_c ? I(0) : c;
    b += wrap_c ? I(1) : I(0);
    off += wrap_c ? st_b - n_c * st_c : I(0);
    tap += wrap_c ? tap_b - n_c * tap_c : I(0);
    const bool wrap_b = b == n_b;
    b = wrap_b ? I(0) : b;
    off += wrap_b ? st_a - n_b * st_b : I(0);
    tap += wrap_b ? tap_a - n_b * tap_b : I(0);
  }
};

// Calls fn(element bits, tap) for the real taps of window (d0, h0, w0) in
// row-major order (element at xp[d * st[0] + h * st[1] + w * st[2]]),
// kGenericBatch at a time, every load of a batch issued before the first is
// used; a batch past the last tap is filled with copies of the first tap
// (same bits, same tap: a copy changes no search's result). Stops after the
// batch in which `done` became true. *first: the first tap, set before fn runs.
template <class T, class G, class I, class Fn>
POOL3D_HD inline void ForRealTaps(const G& g, const typename T::M* xp, const I* st, I d0, I h0, I w0,
                                  bool& done, int32_t* first_tap_out, Fn&& fn) {
  using M = typename T::M;
  I td_lo, td_hi, th_lo, th_hi, tw_lo, tw_hi;
  TapRange<I>(d0, I(g.kD), I(g.D), &td_lo, &td_hi);
  TapRange<I>(h0, I(g.kH), I(g.H), &th_lo, &th_hi);
  TapRange<I>(w0, I(g.kW), I(g.W), &tw_lo, &tw_hi);
  const I nh = th_hi - th_lo, nw = tw_hi - tw_lo;
  const I count = (td_hi - td_lo) * nh * nw;
  Walk3<I> at{(d0 + td_lo) * st[0] + (h0 + th_lo) * st[1] + (w0 + tw_lo) * st[2],
              I(TapOf<I>(g, td_lo, th_lo, tw_lo)), I(0), nw, I(0), nh, st[1], st[2], I(g.kW), I(1), st[0],
              I(g.kH) * I(g.kW)};
  const I first = at.off;
  const int32_t first_tap = int32_t(at.tap);
  *first_tap_out = first_tap;
  for (I f = 0; f < count && !done; f += kGenericBatch) {
    M v[kGenericBatch];
    int32_t tap[kGenericBatch];
#pragma unroll
    for (int k = 0; k < kGenericBatch; ++k) {
      const bool live = f + k < count;
      v[k] = xp[live ? at.off : first];
      tap[k] = live ? int32_t(at.tap) : first_tap;
      at.Next();
    }
#pragma unroll
    for (int k = 0; k < kGenericBatch; ++k) fn(v[k], tap[k]);
  }
}

// WindowFirstMax (shared_kernels/window_scan.h) with batched loads: *m the
// window's maximum (+0 over -0; a NaN maximum: its first NaN, by the shared
// scan, a rare path), *tap the first tap equal to it (-1 where the maximum is
// NaN). Compared as f32 (exact): +0 == -0, so the first zero stays; a NaN
// compares false, and the running maximum (max.NaN) says whether one was met.
template <class T, class G, class I>
POOL3D_HD inline void GenericFirstMax(const G& g, const typename T::M* xp, const I* st, I d0, I h0, I w0,
                                      typename T::M* m, int32_t* tap) {
  using M = typename T::M;
  float best = NegativeInfinity();
  int32_t best_tap = -1;
  bool plus_zero = false, done = false;
  ForRealTaps<T>(g, xp, st, d0, h0, w0, done, &best_tap, [&](M v, int32_t t) {
    const float f = Wide<T>(v);
    best_tap = f > best ? t : best_tap;  // (best_tap starts at the first tap: an all -inf window keeps it)
    best = MaxNan(best, f);
    plus_zero = plus_zero || v == 0;
  });
  if (best != best) {  // the first NaN, with its own bits
    WindowFirstMax<T>(g, xp, st, d0, h0, w0, m, tap);  // model: rare
    return;
  }
  *m = best != 0.0f ? Narrow<T>(best) : plus_zero ? M(0) : M(M(1) << (8 * sizeof(M) - 1));
  *tap = best_tap;
}

// WindowFirstEqual with batched loads: the first real tap equal to y as a
// float (+0 == -0, NaN equals nothing), or -1.
template <class T, class G, class I>
POOL3D_HD inline int32_t GenericFirstEqual(const G& g, const typename T::M* xp, const I* st, I d0, I h0, I w0,
                                           typename T::M y) {
  using M = typename T::M;
  const float want = Wide<T>(y);
  int32_t found = -1, first = -1;
  bool done = false;
  ForRealTaps<T>(g, xp, st, d0, h0, w0, done, &first, [&](M v, int32_t t) {
    found = found < 0 && Wide<T>(v) == want ? t : found;
    done = found >= 0;
  });
  return found;
}

// CoveringWindows (shared_kernels/geometry.h) with the stride's FastDiv.
template <class I, class U>
POOL3D_HD inline void CoveringFast(I q, I k, const FastDiv<U>& s, I n_out, I* lo, I* hi) {
  *lo = q < k ? I(0) : I(s.Div(U(q - k))) + 1;
  const I top = I(s.Div(U(q)));
  *hi = top < n_out - 1 ? top : n_out - 1;
}

// The gradient of input position (d, h, w) (channel base: the output offset
// of its batch item and channel): the windows covering it, in ascending
// order, each adding its gradient where its index names this position;
// kGenericBatch windows' index and gradient loads in flight.
template <class T, class I, class U>
POOL3D_HD inline float GenericGather(const Launch<I>& g, const Operands<typename T::M>& p, I base, I d, I h,
                                     I w) {
  using M = typename T::M;
  const I qd = d + g.pD, qh = h + g.pH, qw = w + g.pW;
  I d_lo, d_hi, h_lo, h_hi, w_lo, w_hi;
  CoveringFast<I, U>(qd, g.kD, g.sdiv[0], g.Do, &d_lo, &d_hi);
  CoveringFast<I, U>(qh, g.kH, g.sdiv[1], g.Ho, &h_lo, &h_hi);
  CoveringFast<I, U>(qw, g.kW, g.sdiv[2], g.Wo, &w_lo, &w_hi);
  const I nd = d_hi - d_lo + 1, nh = h_hi - h_lo + 1, nw = w_hi - w_lo + 1;
  const I count = nd > 0 && nh > 0 && nw > 0 ? nd * nh * nw : I(0);
  // the walk's tap is the tap of this position in the current window: down by s a window step
  Walk3<I> at{base + d_lo * g.ys[2] + h_lo * g.ys[3] + w_lo * g.ys[4],
              I(TapOf<I>(g, qd - d_lo * g.sD, qh - h_lo * g.sH, qw - w_lo * g.sW)), I(0), nw, I(0), nh,
              g.ys[3], g.ys[4], -g.sH * g.kW, -g.sW, g.ys[2], -g.sD * g.kH * g.kW};
  float acc = 0.0f;
  const I first = at.off;  // past the last window, a batch re-reads the first (no load is conditional)
  for (I f = 0; f < count; f += kGenericBatch) {
    int16_t idx[kGenericBatch];
    M gv[kGenericBatch];
    int32_t want[kGenericBatch];
#pragma unroll
    for (int k = 0; k < kGenericBatch; ++k) {
      const bool ok = f + k < count;
      idx[k] = p.idx_in[ok ? at.off : first];
      gv[k] = p.go[ok ? at.off : first];
      want[k] = ok ? int32_t(at.tap) : -2;  // (an index is -1 or a tap: never -2)
      at.Next();
    }
#pragma unroll
    for (int k = 0; k < kGenericBatch; ++k)
      if (int32_t(idx[k]) == want[k]) acc += Wide<T>(gv[k]);
  }
  return acc;
}

}  // namespace gpu
}  // namespace pool3d

#endif  // POOL3D_GPU_CUDA_GENERIC_UNITS_H_
