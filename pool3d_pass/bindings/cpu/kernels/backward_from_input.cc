// pool3d.max_pooling_3d_backward_from_input: grad_input from
// (grad_output, input), fused: the selection is searched and scattered at
// once, no indices or maxima in memory (except where the channels-last
// forward's indices then from_indices measure faster: ViaIndicesPays,
// choices.h).
//
// The search runs with NaN sorting above every number (KeyNanHigh): a
// window's winner is then the first tap equal to
// its maximum (+0 == -0) unless the window holds a NaN, in which case the
// winner's key is NaN and nothing is selected. So the search alone is the
// contract's selection; no check against an `output`, no fallback. Equal to
// backward(grad_output, input, forward(input).output) and to
// backward_from_indices(grad_output, forward(input).indices), bit for bit:
// the same windows add the same values to the same elements in the same
// (od, oh, ow) order, in f32.
//
// NCDHW: one work item is one (b, c) plane, as the recompute backward; windows
// that do not overlap write every element once. NDHWC: where it measures faster
// (ViaIndicesPays, choices.h), the forward's search into scratch indices, then
// from_indices; windows that do not overlap, with a full vector of channels, by
// search and gather (from_input_ndhwc_gather.cc); otherwise the separable
// search across channels (common/separable_ndhwc_w_first.h) and the sliding f32
// accumulator of ndhwc_accumulator.h.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "choices.h"
#include "common/first_max.h"
#include "common/separable_ncdhw.h"
#include "common/separable_ndhwc_w_first.h"
#include "common/threading.h"
#include "kernels.h"
#include "layouts.h"
#include "ncdhw_no_overlap.h"
#include "ndhwc_accumulator.h"
#include "shared_kernels/dispatch.h"
#include "shared_kernels/element_types.h"
#include "shared_kernels/geometry.h"

namespace pool3d {
namespace {

// pos[i] = `row` + i * sW + idx[i] for the n windows of one output row, or -1
// where the winner's key is NaN.
POOL3D_HOT void SelectedPositions(const int32_t* __restrict key,
                                  const int32_t* __restrict idx, int32_t row,
                                  int32_t sW, int64_t n,
                                  int32_t* __restrict pos) {
  for (int32_t i = 0; i < int32_t(n); ++i) {
    const int32_t nan = -int32_t(key[i] == kNanHighKey);
    pos[i] = ((row + i * sW + idx[i]) & ~nan) | nan;
  }
}

// sel[i] = idx[i], or -1 where the winner's key is NaN.
POOL3D_HOT void SelectedTaps(const int32_t* __restrict key,
                             const int32_t* __restrict idx, int64_t n,
                             int32_t* __restrict sel) {
  for (int64_t i = 0; i < n; ++i) {
    const int32_t nan = -int32_t(key[i] == kNanHighKey);
    sel[i] = (idx[i] & ~nan) | nan;
  }
}

// Windows that do not overlap: one work item is one (plane, od), searched
// and written once (ncdhw_no_overlap.h).
template <class T, int KW>
void FromInputNcdhwNoOverlap(const Geom& g, const typename T::M* go,
                             const typename T::M* x, typename T::M* dx) {
  const int64_t planes = g.B * g.C;
  const int64_t DHW = g.D * g.H * g.W, HoWo = g.Ho * g.Wo, ODHW = g.Do * HoWo;
  ParallelFor<NoOverlapScratch>(
      planes * g.Do, ThreadCount(planes * g.Do, planes * DHW),
      [&](int64_t item, NoOverlapScratch& s) {
        const int64_t p = item / g.Do, od = item % g.Do;
        s.sel.resize(HoWo);
        int32_t* sel = s.sel.data();
        SearchDepthNoOverlap<T, KW>(
            g, x + p * DHW, od, s,
            [&](int64_t oh, const int32_t* best, const int32_t* tap) {
              SelectedTaps(best, tap, g.Wo, sel + oh * g.Wo);
            });
        WriteDepthNoOverlapAnyK<T>(g, od, sel, go + p * ODHW + od * HoWo,
                                   dx + p * DHW);
      });
}

template <class T>
void FromInputNcdhw(const Geom& g, const typename T::M* go,
                    const typename T::M* x, typename T::M* dx) {
  using M = typename T::M;
  constexpr bool kF32 = sizeof(M) == 4;
  const int64_t planes = g.B * g.C;
  const int64_t HW = g.H * g.W, DHW = g.D * HW, HoWo = g.Ho * g.Wo,
                ODHW = g.Do * HoWo;
  ParallelFor<SepScratch>(
      planes, ThreadCount(planes, planes * DHW), [&](int64_t p, SepScratch& s) {
        const M* xp = x + p * DHW;
        M* dp = dx + p * DHW;
        float* acc = ZeroedPlaneAccumulator<kF32>(s, dp, DHW);
        PrepareSeparable(g, s);
        int32_t* pos = s.pos.data();
        SearchPlane<T, NanHigh>(
            g, xp, s, int32_t(g.W), int32_t(HW),
            [&](int64_t od, const int32_t* dk, const int32_t* di) {
              const M* gr = go + p * ODHW + od * HoWo;
              const int64_t d0 = od * g.sD - g.pD;
              for (int64_t oh = 0; oh < g.Ho; ++oh) {
                const int64_t o = oh * g.Wo;
                const int64_t row = d0 * HW + (oh * g.sH - g.pH) * g.W - g.pW;
                SelectedPositions(dk + o, di + o, int32_t(row), int32_t(g.sW),
                                  g.Wo, pos);
                for (int64_t ow = 0; ow < g.Wo; ++ow)
                  if (pos[ow] >= 0) acc[pos[ow]] += T::ToF32(gr[o + ow]);
              }
            });
        if constexpr (!kF32) {
          for (int64_t i = 0; i < DHW; ++i) dp[i] = T::FromF32(acc[i]);
        }
      });
}

// One work item is one (b, channel block): the separable search of
// common/separable_ndhwc_w_first.h, each output row's winners' gradients added
// at once into the sliding accumulator, in (od, oh, ow) order.
template <class T>
void FromInputNdhwc(const Geom& g, const typename T::M* go,
                    const typename T::M* x, typename T::M* dx) {
  using M = typename T::M;
  using K = NarrowKey<T>;
  const int64_t C = g.C, HW = g.H * g.W, DHW = g.D * HW;
  const int64_t taps = g.Taps();
  const NdhwcBlocks blocks = PlanNdhwcBlocks<T>(g);
  struct Scratch : SepDFirstScratch {
    SepWFirstScratch<T> search;
    std::vector<int64_t> off;
  };
  ParallelFor<Scratch>(blocks.items, blocks.threads, [&](int64_t item,
                                                         Scratch& s) {
    const int64_t cb = item % blocks.ncb, b = item / blocks.ncb;
    const int64_t c0 = cb * blocks.nc_blk,
                  nc = std::min(blocks.nc_blk, C - c0);
    const M* xb = x + b * DHW * C + c0;
    NdhwcAccumulator<T> acc(g, blocks, dx + b * DHW * C + c0, nc, s);
    const int64_t as = acc.astride;
    s.off.resize(taps);  // tap t's offset from the window's origin in acc
    for (int64_t t = 0; t < taps; ++t)
      s.off[t] = ((t / (g.kH * g.kW) * g.H + t / g.kW % g.kH) * g.W +
                  t % g.kW) * as;
    const int64_t* off = s.off.data();
    SearchBlockWFirst<T>(g, xb, nc, s.search, [&](int64_t od, int64_t oh,
                                               const K* best, const K* tap) {
      const int64_t d0 = od * g.sD - g.pD, h0 = oh * g.sH - g.pH;
      if (oh == 0) acc.StartTo(d0 + g.kD);
      for (int64_t ow = 0; ow < g.Wo; ++ow) {
        const int64_t w0 = ow * g.sW - g.pW;
        const M* __restrict gv =
            go + (((b * g.Do + od) * g.Ho + oh) * g.Wo + ow) * C + c0;
        float* __restrict a =
            acc.data() + (((d0 - acc.acc_d) * g.H + h0) * g.W + w0) * as;
        const K* __restrict bk = best + ow * nc;
        const K* __restrict bt = tap + ow * nc;
        for (int64_t c = 0; c < nc; ++c)
          if (bk[c] != kNarrowNan<T>) a[off[bt[c]] + c] += T::ToF32(gv[c]);
      }
      if (oh == g.Ho - 1) acc.FinishAfter(od);
    });
  });
}

// from_indices(grad_output, forward(input).indices), where ViaIndicesPays:
// the forward's own routine for g (ForwardNdhwcDisjoint or
// ForwardNdhwcLanes), indices only.
template <class T>
void FromInputNdhwcViaIndices(const Geom& g, ElementType t,
                              const typename T::M* go,
                              const typename T::M* x, typename T::M* dx) {
  const std::unique_ptr<int16_t[]> idx(  // all written by the search
      new int16_t[g.B * g.Do * g.Ho * g.Wo * g.C]);
  if (WindowsDisjoint(g)) {
    ForwardNdhwcDisjoint<T>(g, x, nullptr, idx.get());
  } else {
    ForwardNdhwcLanes<T>(g, x, nullptr, idx.get());
  }
  CallOperands gather;
  gather.go = go;
  gather.idx_in = idx.get();
  gather.dx = dx;
  MaxPool3dBackwardFromIndices(g, t, gather);
}

template <class T>
void Dispatch(const Geom& g, ElementType t, const void* go, const void* x,
              void* dx) {
  using M = typename T::M;
  auto* gm = static_cast<const M*>(go);
  auto* xm = static_cast<const M*>(x);
  auto* dm = static_cast<M*>(dx);
  if (g.in_cl != g.out_cl) return FromInputGeneric<T>(g, gm, xm, dm);
  if (g.in_cl) {
    if (ViaIndicesPays<T>(g))
      return FromInputNdhwcViaIndices<T>(g, t, gm, xm, dm);
    if (!g.overlap && LanesPay(g, 32 / sizeof(M)))
      return FromInputNdhwcGather<T>(g, gm, xm, dm);
    return FromInputNdhwc<T>(g, gm, xm, dm);
  }
  if (!g.overlap && g.sW == g.kW && g.kW == 2)
    return FromInputNcdhwNoOverlap<T, 2>(g, gm, xm, dm);
  if (!g.overlap) return FromInputNcdhwNoOverlap<T, 0>(g, gm, xm, dm);
  if (NcdhwSearchFits(g)) return FromInputNcdhw<T>(g, gm, xm, dm);
  return FromInputGeneric<T>(g, gm, xm, dm);
}

}  // namespace

void MaxPool3dBackwardFromInput(const Geom& g, ElementType t, const CallOperands& ops) {
  ForElementType(t, [&](auto tag) {
    Dispatch<decltype(tag)>(g, t, ops.go, ops.x, ops.dx);
  });
}

}  // namespace pool3d
