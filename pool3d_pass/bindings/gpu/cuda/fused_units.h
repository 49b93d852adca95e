// Writing a non-overlapping window block, and the fused kernel's unit: the
// gradient of backward_from_input / backward where windows do not overlap,
// selected and written in one pass (no index reaches memory). The gather of
// non-overlapping windows (gather_units.h) writes the same blocks.
#ifndef POOL3D_GPU_CUDA_FUSED_UNITS_H_
#define POOL3D_GPU_CUDA_FUSED_UNITS_H_

#include <cstdint>
#include <type_traits>

#include "generic_units.h"
#include "search.h"
#include "shared_kernels/window_scan.h"
#include "unit_common.h"
#include "window_units.h"

namespace pool3d {
namespace gpu {

// ---------------------------------------------------------------------------
// Writing a non-overlapping window block (k = s, no padding): dx at the tap
// selected in each lane gets that lane's gradient (-0 as +0, the scatter's
// 0 + g), every other element 0; rows of the input that no window covers
// (beyond Do*kD, Ho*kH, Wo*kW) are written 0 by the last window of their
// axis, so every dx element is written exactly once.

// The rows past the last window of an axis (a window owns them; they get 0).
template <class T, class W, int N>
POOL3D_HD inline void ZeroUncoveredNcdhw(const Launch<int32_t>& g, typename T::M* dxp, int32_t d0, int32_t h0,
                                         int32_t c0, bool last_d, bool last_h) {
  using M = typename T::M;
  M zero[N];
#pragma unroll
  for (int i = 0; i < N; ++i) zero[i] = M(0);
  const int32_t d_end = last_d ? g.D : d0 + W::kD;
  const int32_t h_end = last_h ? g.H : h0 + W::kH;
  for (int32_t d = d0; d < d_end; ++d)
    for (int32_t h = h0; h < h_end; ++h)
      if (d >= d0 + W::kD || h >= h0 + W::kH)
        StoreVec<M, N>(dxp + (d * g.H + h) * g.W + c0, zero);
}

template <class T, class W, int V>
POOL3D_HD inline void ZeroUncoveredNdhwc(const Launch<int32_t>& g, typename T::M* dxp, int32_t d0, int32_t h0,
                                         int32_t w0, bool last_d, bool last_h, bool last_w) {
  using M = typename T::M;
  M zero[V];
#pragma unroll
  for (int j = 0; j < V; ++j) zero[j] = M(0);
  const int32_t d_end = last_d ? g.D : d0 + W::kD;
  const int32_t h_end = last_h ? g.H : h0 + W::kH;
  const int32_t w_end = last_w ? g.W : w0 + W::kW;
  for (int32_t d = d0; d < d_end; ++d)
    for (int32_t h = h0; h < h_end; ++h)
      for (int32_t w = w0; w < w_end; ++w)
        if (d >= d0 + W::kD || h >= h0 + W::kH || w >= w0 + W::kW)
          StoreVec<M, V>(dxp + ((d * g.H + h) * g.W + w) * g.C, zero);
}

template <class T, class W, int V>
POOL3D_HD inline void WriteBlockNcdhw(const Launch<int32_t>& g,
                                      typename T::M* dxp, int32_t od,
                                      int32_t oh, int32_t ow0,
                                      const int32_t* tap,
                                      const typename T::M* gv) {
  using M = typename T::M;
  constexpr int N = V * W::kW;
  const int32_t d0 = od * W::kD, h0 = oh * W::kH, c0 = ow0 * W::kW;
#pragma unroll
  for (int td = 0; td < W::kD; ++td)
#pragma unroll
    for (int th = 0; th < W::kH; ++th) {
      M out[N];
#pragma unroll
      for (int j = 0; j < V; ++j)
#pragma unroll
        for (int tw = 0; tw < W::kW; ++tw)
          out[j * W::kW + tw] =
              tap[j] == (td * W::kH + th) * W::kW + tw ? gv[j] : M(0);
      StoreVec<M, N>(dxp + ((d0 + td) * g.H + h0 + th) * g.W + c0, out);
    }
  const bool last_d = od == g.Do - 1 && g.D > g.Do * W::kD, last_h = oh == g.Ho - 1 && g.H > g.Ho * W::kH;
  if (last_d || last_h) ZeroUncoveredNcdhw<T, W, N>(g, dxp, d0, h0, c0, last_d, last_h);  // model: rare
}

template <class T, class W, int V>
POOL3D_HD inline void WriteBlockNdhwc(const Launch<int32_t>& g,
                                      typename T::M* dxp, int32_t od,
                                      int32_t oh, int32_t ow,
                                      const int32_t* tap,
                                      const typename T::M* gv) {
  using M = typename T::M;
  const int32_t d0 = od * W::kD, h0 = oh * W::kH, w0 = ow * W::kW;
#pragma unroll
  for (int td = 0; td < W::kD; ++td)
#pragma unroll
    for (int th = 0; th < W::kH; ++th)
#pragma unroll
      for (int tw = 0; tw < W::kW; ++tw) {
        M out[V];
#pragma unroll
        for (int j = 0; j < V; ++j)
          out[j] = tap[j] == (td * W::kH + th) * W::kW + tw ? gv[j] : M(0);
        StoreVec<M, V>(dxp + (((d0 + td) * g.H + h0 + th) * g.W + w0 + tw) * g.C, out);
      }
  const bool last_d = od == g.Do - 1 && g.D > g.Do * W::kD, last_h = oh == g.Ho - 1 && g.H > g.Ho * W::kH,
             last_w = ow == g.Wo - 1 && g.W > g.Wo * W::kW;
  if (last_d || last_h || last_w)
    ZeroUncoveredNdhwc<T, W, V>(g, dxp, d0, h0, w0, last_d, last_h, last_w);  // model: rare
}

// The gradient values of V lanes, -0 as +0.
template <class T, int V>
POOL3D_HD inline void LoadGradient(const typename T::M* go, typename T::M* gv) {
  LoadVec<typename T::M, V>(go, gv);
#pragma unroll
  for (int j = 0; j < V; ++j) gv[j] = Normalise<T>(gv[j]);
}


// ---------------------------------------------------------------------------
// The fused kernel's unit: backward_from_input (Mode kByMax: x, g) or
// backward (kByOutput: x, y, g) for non-overlapping windows without
// padding: each unit selects in V windows and writes their blocks; no index
// ever reaches memory.

// Whether a window class tiles the input (Generic ones: launch_plan.h's Fusible, at run time).
template <class W>
POOL3D_HD constexpr bool Tiles() {
  if constexpr (W::kFixed) {
    return !W::kOverlap && W::pD == 0 && W::pH == 0 && W::pW == 0;
  } else {
    return true;
  }
}

template <class T, class W, int L, int V, int Mode>
struct FusedUnit {
  using M = typename T::M;
  using I = typename W::Offset;
  using U = typename std::make_unsigned<I>::type;
  static_assert(Tiles<W>(), "fused units are for non-overlapping windows without padding");

  POOL3D_HD static void Run(const Launch<I>& g, const Operands<M>& p, U u) {
    if constexpr (!W::kFixed) {
      RunGeneric(g, p, u);
    } else {
      RunFixed(g, p, u);
    }
  }

  // Generic windows (k = s, no padding: launch_plan.h's Fusible): V channels of one window a unit, in
  // output layout order; the lanes' taps searched together (generic_units.h), then their blocks written
  // (and the rows no window covers, where it is the last window of an axis), kGenericBatch elements a step.
  POOL3D_HD static void RunGeneric(const Launch<I>& g, const Operands<M>& p, U u) {
    U c[5];
    Decode<U, 4>(g.div, u, c);
    I n, cb, od, oh, ow;
    if (g.out_cl) {  // channels-last output: (channel block, w, h, d, n)
      cb = I(c[0]); ow = I(c[1]); oh = I(c[2]); od = I(c[3]); n = I(c[4]);
    } else {  // (w, h, d, channel block, n)
      ow = I(c[0]); oh = I(c[1]); od = I(c[2]); cb = I(c[3]); n = I(c[4]);
    }
    const I c0 = cb * I(V);
    I xo[V], yo[V];
    LaneOffsets<I, V>(n * g.xs[0], c0, g.C, g.xs[1], xo);
    LaneOffsets<I, V>(n * g.ys[0] + od * g.ys[2] + oh * g.ys[3] + ow * g.ys[4], c0, g.C, g.ys[1], yo);
    const M* xl[V];
#pragma unroll
    for (int j = 0; j < V; ++j) xl[j] = p.x + xo[j];
    const I d0 = od * g.sD, h0 = oh * g.sH, w0 = ow * g.sW;
    int32_t tap[V];
    M gv[V];
    if constexpr (Mode == kByOutput) {
      LaneSearch<T, V, kSelect> s;
#pragma unroll
      for (int j = 0; j < V; ++j) s.want[j] = Wide<T>(p.y_in[yo[j]]);
      SearchLanes<T, V>(g, xl, g.xs + 2, d0, h0, w0, s);
#pragma unroll
      for (int j = 0; j < V; ++j) tap[j] = s.tap[j];
    } else {
      LaneSearch<T, V, kIndices> s;
      SearchLanes<T, V>(g, xl, g.xs + 2, d0, h0, w0, s);
#pragma unroll
      for (int j = 0; j < V; ++j) tap[j] = s.m[j] != s.m[j] ? -1 : s.tap[j];
    }
#pragma unroll
    for (int j = 0; j < V; ++j) gv[j] = Normalise<T>(p.go[yo[j]]);
    // the block this window owns: its taps, and to the end of an axis for the last window
    const I d1 = od == g.Do - 1 ? g.D : d0 + g.kD, h1 = oh == g.Ho - 1 ? g.H : h0 + g.kH,
            w1 = ow == g.Wo - 1 ? g.W : w0 + g.kW;
    const I nh = h1 - h0, nw = w1 - w0, count = (d1 - d0) * nh * nw;
    // the walk's tap: the element's place in the window (past kW or kH: no tap, rows no window covers)
    Walk3<I> at = Walk3Of<I>(d0 * g.xs[2] + h0 * g.xs[3] + w0 * g.xs[4], I(0), nh, nw, g.xs[2], g.xs[3], g.xs[4],
                             g.kH * g.kW, g.kW, I(1));
    M* dxl[V];
#pragma unroll
    for (int j = 0; j < V; ++j) dxl[j] = p.dx + xo[j];
    const I lanes = g.C - c0;  // lanes holding a channel (more than V: all)
    for (I f = 0; f < count; f += kGenericBatch) {
#pragma unroll
      for (int k = 0; k < kGenericBatch; ++k) {
        if (f + k < count) {
          const bool inside = at.c < g.kW && at.b < g.kH && at.tap < g.kD * g.kH * g.kW;
#pragma unroll
          for (int j = 0; j < V; ++j)
            if (j < lanes) dxl[j][at.off] = inside && int32_t(at.tap) == tap[j] ? gv[j] : M(0);
        }
        at.Next();
      }
    }
  }

  POOL3D_HD static void RunFixed(const Launch<I>& g, const Operands<M>& p, U u) {
    int32_t tap[V];
    M gv[V];
    if constexpr (L == kNcdhw) {
      U c[4];
      Decode<U, 3>(g.div, u, c);
      const int32_t ow0 = int32_t(c[0]) * V, oh = int32_t(c[1]),
                    od = int32_t(c[2]), plane = int32_t(c[3]);
      const M* xp = p.x + plane * (g.D * g.H * g.W);
      const int32_t o0 = ((plane * g.Do + od) * g.Ho + oh) * g.Wo + ow0;
      Best best[V];
      NcdhwTaps<T, W, V>::template Search<kIndices>(g, xp, od, oh, ow0, best);
      if constexpr (Mode == kByOutput) {  // the first tap equal to y: the first maximum where y is it
        float target[V];
        LoadTargets<T, V>(p.y_in + o0, target);
        const int32_t st[3] = {g.H * g.W, g.W, 1};
#pragma unroll
        for (int j = 0; j < V; ++j) {
          if (target[j] != target[j]) {
            tap[j] = -1;
          } else if (!HeldNan(best[j]) && best[j].m == target[j]) {
            tap[j] = best[j].tap;
          } else {
            tap[j] = WindowFirstEqual<T>(g, xp, st, od * W::kD, oh * W::kH, (ow0 + j) * W::kW,
                                         Narrow<T>(target[j]));  // model: rare
          }
        }
      } else {
#pragma unroll
        for (int j = 0; j < V; ++j) tap[j] = HeldNan(best[j]) ? -1 : best[j].tap;
      }
      LoadGradient<T, V>(p.go + o0, gv);
      WriteBlockNcdhw<T, W, V>(g, p.dx + plane * (g.D * g.H * g.W), od, oh,
                               ow0, tap, gv);
    } else {
      U c[5];
      Decode<U, 4>(g.div, u, c);
      const int32_t c0 = int32_t(c[0]) * V, ow = int32_t(c[1]),
                    oh = int32_t(c[2]), od = int32_t(c[3]), n = int32_t(c[4]);
      const int32_t in0 = n * (g.D * g.H * g.W * g.C) + c0;
      const M* xp = p.x + in0;
      const int32_t o0 = (((n * g.Do + od) * g.Ho + oh) * g.Wo + ow) * g.C + c0;
      const int32_t d0 = od * W::kD, h0 = oh * W::kH, w0 = ow * W::kW;
      Best best[V];
      Select(p, o0, best, [&](auto& search) { NdhwcTaps<T, W, V>::Feed(g, xp, d0, h0, w0, search); });
#pragma unroll
      for (int j = 0; j < V; ++j) tap[j] = Mode == kByOutput ? best[j].tap : HeldNan(best[j]) ? -1 : best[j].tap;
      LoadGradient<T, V>(p.go + o0, gv);
      WriteBlockNdhwc<T, W, V>(g, p.dx + in0, od, oh, ow, tap, gv);
    }
  }

  // The V windows' selected taps: the first maximum (kByMax) or the first tap equal to y (kByOutput).
  template <class Feed>
  POOL3D_HD static void Select(const Operands<M>& p, int32_t o0, Best* best, Feed&& feed) {
    if constexpr (Mode == kByOutput) {
      float target[V];
      LoadTargets<T, V>(p.y_in + o0, target);
      WindowSearch<T, V, kSelect> search(target);
      feed(search);
      search.Finish(best);
    } else {
      WindowSearch<T, V, kIndices> search(nullptr);
      feed(search);
      search.Finish(best);
    }
  }
};

}  // namespace gpu
}  // namespace pool3d

#endif  // POOL3D_GPU_CUDA_FUSED_UNITS_H_
