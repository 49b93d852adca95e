// The Generic kernels' per-thread work: any window, any pair of layouts, with
// the window's extents known only at run time. The rules are
// shared_kernels/window_scan.h's (the CPU kernels' scans); what is this
// file's own is how the work is laid out:
// - a unit is one window (or input position) of kGenericLanes channels: the
//   walk over its taps (or covering windows), the decoding and the address
//   arithmetic are paid once for the lanes, which differ only by a channel
//   offset (NCDHW: a plane apart; NDHWC: neighbours). Consecutive units are
//   neighbours along the output's (gathers: the input's) innermost axis, so
//   a warp's loads and stores stay coalesced in either layout. A lane past
//   the last channel reads channel C - 1 and stores nothing;
// - taps are walked kGenericBatch at a time, every load of a batch (for every
//   lane) issued before the first is used, where the shared scans wait for
//   each element before reading the next.
// Why not lanes along W in NCDHW: with a run-time stride and kernel each lane
// would clamp its own columns at the row's ends (three more instructions a
// load) and the loads would not be vectors anyway (a column's alignment
// changes with the tap).
#ifndef POOL3D_GPU_CUDA_GENERIC_UNITS_H_
#define POOL3D_GPU_CUDA_GENERIC_UNITS_H_

#include <cstdint>
#include <type_traits>

#include "shared_kernels/window_scan.h"
#include "unit_common.h"

namespace pool3d {
namespace gpu {

// Channels a Generic unit works on (checks/gpu_model.py reads it).
constexpr int kGenericLanes = 4;
// Taps (window kernels) or covering windows (gathers) a batch: their loads for
// every lane are in flight together (checks/gpu_model.py reads it).
constexpr int kGenericBatch = 4;

// A row-major walk over a box of three axes (n_b x n_c the inner two), its
// element offset and its tap index kept by additions and selects (no multiply
// and no branch a step: a batch's loads stay one block). Made by Walk3Of.
template <class I>
struct Walk3 {
  I off, tap;     // where it is
  I c, n_c, b, n_b;  // inner counters and extents
  I st_c, tap_c;  // a step along the innermost axis
  I st_b, tap_b;  // what a wrap of the innermost axis adds (the next row's start less n_c steps)
  I st_a, tap_a;  // what a wrap of the middle axis adds

  POOL3D_HD void Next() {
    off += st_c;
    tap += tap_c;
    const bool wrap_c = ++c == n_c;
    c = wrap_c ? I(0) : c;
    b += wrap_c ? I(1) : I(0);
    off += wrap_c ? st_b : I(0);
    tap += wrap_c ? tap_b : I(0);
    const bool wrap_b = b == n_b;
    b = wrap_b ? I(0) : b;
    off += wrap_b ? st_a : I(0);
    tap += wrap_b ? tap_a : I(0);
  }
};

// The walk from (off, tap) over n_b x n_c inner positions, each axis' step in
// offset and tap (a outermost, c innermost).
template <class I>
POOL3D_HD inline Walk3<I> Walk3Of(I off, I tap, I n_b, I n_c, I st_a, I st_b, I st_c, I tap_a, I tap_b, I tap_c) {
  return Walk3<I>{off, tap, I(0), n_c, I(0), n_b, st_c, tap_c, st_b - n_c * st_c, tap_b - n_c * tap_c,
                  st_a - n_b * st_b, tap_a - n_b * tap_b};
}

// The element offsets of a unit's V lanes: base + channel * stride for the
// channels c0 .. c0 + V - 1, those past C at channel C - 1 (a copy of a real
// lane: whatever it computes is not stored).
template <class I, int V>
POOL3D_HD inline void LaneOffsets(I base, I c0, I C, I stride, I* off) {
#pragma unroll
  for (int j = 0; j < V; ++j) off[j] = base + (c0 + j < C ? c0 + j : C - 1) * stride;
}

// The bits of a 16- or 32-bit element as a signed integer: the larger of two
// is the larger element where both are zeros or negative (so the maximum of
// a window's bits is 0 exactly where a zero maximum has a +0 tap).
template <class T>
POOL3D_HD inline int32_t SignedBits(typename T::M v) {
  return sizeof(typename T::M) == 4 ? int32_t(v) : int32_t(int16_t(v));
}

// Calls fn(values, tap) for the real taps of window (d0, h0, w0) in
// row-major order, values[j] lane j's element (at xl[j][d * st[0] + h * st[1]
// + w * st[2]]), kGenericBatch taps at a time, every load of a batch issued
// before the first is used; a batch past the last tap is filled with copies
// of the first tap (same bits, same tap: a copy changes no search's result).
// Stops after a batch for which done() holds. Returns the first tap.
template <class T, int V, class G, class I, class Fn, class Done>
POOL3D_HD inline int32_t ForRealTaps(const G& g, const typename T::M* const* xl, const I* st, I d0, I h0, I w0,
                                     Fn&& fn, Done&& done) {
  using M = typename T::M;
  I td_lo, td_hi, th_lo, th_hi, tw_lo, tw_hi;
  TapRange<I>(d0, I(g.kD), I(g.D), &td_lo, &td_hi);
  TapRange<I>(h0, I(g.kH), I(g.H), &th_lo, &th_hi);
  TapRange<I>(w0, I(g.kW), I(g.W), &tw_lo, &tw_hi);
  const I nh = th_hi - th_lo, nw = tw_hi - tw_lo;
  const I count = (td_hi - td_lo) * nh * nw;
  Walk3<I> at = Walk3Of<I>((d0 + td_lo) * st[0] + (h0 + th_lo) * st[1] + (w0 + tw_lo) * st[2],
                           I(TapOf<I>(g, td_lo, th_lo, tw_lo)), nh, nw, st[0], st[1], st[2],
                           I(g.kH) * I(g.kW), I(g.kW), I(1));
  const I first = at.off;
  const int32_t first_tap = int32_t(at.tap);
#pragma unroll 1
  for (I f = 0; f < count; f += kGenericBatch) {
    M v[kGenericBatch][V];
    int32_t tap[kGenericBatch];
#pragma unroll
    for (int k = 0; k < kGenericBatch; ++k) {
      const bool live = f + k < count;
      const I off = live ? at.off : first;
      tap[k] = live ? int32_t(at.tap) : first_tap;
#pragma unroll
      for (int j = 0; j < V; ++j) v[k][j] = LoadGlobal(xl[j] + off);
      at.Next();
    }
#pragma unroll
    for (int k = 0; k < kGenericBatch; ++k) fn(v[k], tap[k]);
    if (done()) break;
  }
  return first_tap;
}

// The searches of a Generic unit's V windows, fed the taps in row-major order:
// Mode kMax, kIndices: the first maximum (compared as f32, exact: +0 == -0,
// so the first zero stays; a NaN compares false, and the running maximum,
// max.NaN, says whether one was met); kMax also the largest element bits as
// signed integers (a zero maximum's sign). kSelect: the first tap equal to a
// target (NaN equals nothing).
template <class T, int V, int Mode>
struct LaneSearch {
  using M = typename T::M;
  float m[V], want[V];
  int32_t tap[V], zero[V];

  POOL3D_HD LaneSearch() {
#pragma unroll
    for (int j = 0; j < V; ++j) {
      m[j] = NegativeInfinity();
      want[j] = 0.0f;
      tap[j] = -1;
      zero[j] = INT32_MIN;
    }
  }

  POOL3D_HD void Step(const M* v, int32_t t) {
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const float f = Wide<T>(v[j]);
      if constexpr (Mode == kSelect) {
        tap[j] = tap[j] < 0 && f == want[j] ? t : tap[j];
      } else {
        tap[j] = f > m[j] ? t : tap[j];
        m[j] = MaxNan(m[j], f);
        if constexpr (Mode == kMax) {
          const int32_t b = SignedBits<T>(v[j]);
          zero[j] = b > zero[j] ? b : zero[j];
        }
      }
    }
  }

  // kSelect: whether every lane found its tap (the walk may stop).
  POOL3D_HD bool Done() const {
    if constexpr (Mode != kSelect) {
      return false;
    } else {
      bool all = true;
#pragma unroll
      for (int j = 0; j < V; ++j) all = all && tap[j] >= 0;
      return all;
    }
  }

  // Lane j's maximum as an element (kMax; not for a NaN maximum: the rare path).
  POOL3D_HD M Maximum(int j) const {
    return m[j] != 0.0f ? Narrow<T>(m[j]) : zero[j] == 0 ? M(0) : M(M(1) << (8 * sizeof(M) - 1));
  }
};

// Searches the windows (d0, h0, w0) of a unit's V lanes (input elements at
// xl[j], strides st); s.want set first for kSelect.
template <class T, int V, int Mode, class G, class I>
POOL3D_HD inline void SearchLanes(const G& g, const typename T::M* const* xl, const I* st, I d0, I h0, I w0,
                                  LaneSearch<T, V, Mode>& s) {
  using M = typename T::M;
  const int32_t first = ForRealTaps<T, V>(
      g, xl, st, d0, h0, w0, [&](const M* v, int32_t t) { s.Step(v, t); }, [&] { return s.Done(); });
  // kMax, kIndices: a window whose every tap is -inf (none is > -inf) selects its first tap
  if constexpr (Mode != kSelect) {
#pragma unroll
    for (int j = 0; j < V; ++j) s.tap[j] = s.tap[j] < 0 ? first : s.tap[j];
  }
}

// CoveringWindows (shared_kernels/geometry.h) with the stride's FastDiv.
template <class I, class U>
POOL3D_HD inline void CoveringFast(I q, I k, const FastDiv<U>& s, I n_out, I* lo, I* hi) {
  *lo = q < k ? I(0) : I(s.Div(U(q - k))) + 1;
  const I top = I(s.Div(U(q)));
  *hi = top < n_out - 1 ? top : n_out - 1;
}

// The gradient of input position (d, h, w) for a unit's V lanes (lane j's
// windows at output offset ol[j]): the windows covering it, in ascending
// order, each adding its gradient where its index names this position;
// kGenericBatch windows' index and gradient loads, for every lane, in flight.
template <class T, int V, class I, class U>
POOL3D_HD inline void GenericGather(const Launch<I>& g, const Operands<typename T::M>& p, const I* ol, I d, I h,
                                    I w, float* acc) {
  using M = typename T::M;
  const I qd = d + g.pD, qh = h + g.pH, qw = w + g.pW;
  I d_lo, d_hi, h_lo, h_hi, w_lo, w_hi;
  CoveringFast<I, U>(qd, g.kD, g.sdiv[0], g.Do, &d_lo, &d_hi);
  CoveringFast<I, U>(qh, g.kH, g.sdiv[1], g.Ho, &h_lo, &h_hi);
  CoveringFast<I, U>(qw, g.kW, g.sdiv[2], g.Wo, &w_lo, &w_hi);
  const I nd = d_hi - d_lo + 1, nh = h_hi - h_lo + 1, nw = w_hi - w_lo + 1;
  const I count = nd > 0 && nh > 0 && nw > 0 ? nd * nh * nw : I(0);
  // the walk's tap is the tap of this position in the current window: down by s a window step
  Walk3<I> at = Walk3Of<I>(d_lo * g.ys[2] + h_lo * g.ys[3] + w_lo * g.ys[4],
                           I(TapOf<I>(g, qd - d_lo * g.sD, qh - h_lo * g.sH, qw - w_lo * g.sW)), nh, nw, g.ys[2],
                           g.ys[3], g.ys[4], -g.sD * g.kH * g.kW, -g.sH * g.kW, -g.sW);
#pragma unroll
  for (int j = 0; j < V; ++j) acc[j] = 0.0f;
  const I first = at.off;  // past the last window, a batch re-reads the first (no load is conditional)
#pragma unroll 1
  for (I f = 0; f < count; f += kGenericBatch) {
    int16_t idx[kGenericBatch][V];
    M gv[kGenericBatch][V];
    int32_t want[kGenericBatch];
#pragma unroll
    for (int k = 0; k < kGenericBatch; ++k) {
      const bool ok = f + k < count;
      const I off = ok ? at.off : first;
      want[k] = ok ? int32_t(at.tap) : -2;  // (an index is -1 or a tap: never -2)
#pragma unroll
      for (int j = 0; j < V; ++j) {
        idx[k][j] = p.idx_in[ol[j] + off];
        gv[k][j] = LoadNow(p.go + (ol[j] + off));
      }
      at.Next();
    }
#pragma unroll
    for (int k = 0; k < kGenericBatch; ++k)
#pragma unroll
      for (int j = 0; j < V; ++j)
        if (int32_t(idx[k][j]) == want[k]) acc[j] += Wide<T>(gv[k][j]);
  }
}

}  // namespace gpu
}  // namespace pool3d

#endif  // POOL3D_GPU_CUDA_GENERIC_UNITS_H_
