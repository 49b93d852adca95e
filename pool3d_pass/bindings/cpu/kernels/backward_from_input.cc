// pool3d.max_pooling_3d_backward_from_input: grad_input from
// (grad_output, input), fused: the selection is searched and scattered at
// once, no indices or maxima in memory.
//
// The separable search (common/separable_*.h) runs with NaN sorting above
// every number (KeyNanHigh): a window's winner is then the first tap equal to
// its maximum (+0 == -0) unless the window holds a NaN, in which case the
// winner's key is NaN and nothing is selected. So the search alone is the
// contract's selection; no check against an `output`, no fallback. Equal to
// backward(grad_output, input, forward(input).output) and to
// backward_from_indices(grad_output, forward(input).indices), bit for bit:
// the same windows add the same values to the same elements in the same
// (od, oh, ow) order, in f32.
//
// NCDHW: one work item is one (b, c) plane, as the recompute backward.
// NDHWC: one work item is one (b, channel block), with the sliding f32
// accumulator of ndhwc_accumulator.h.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "common/element_types.h"
#include "common/first_max.h"
#include "common/geometry.h"
#include "common/separable_ncdhw.h"
#include "common/separable_ndhwc.h"
#include "common/threading.h"
#include "kernels.h"
#include "layouts.h"
#include "ndhwc_accumulator.h"

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
        float* acc;
        if constexpr (kF32) {
          acc = reinterpret_cast<float*>(dp);
        } else {
          s.acc.resize(DHW);
          acc = s.acc.data();
        }
        std::fill(acc, acc + DHW, 0.0f);
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

// off[i] = where lane i (= ow * nc + c) of one output row scatters, relative
// to the row's origin in the accumulator, or -1 where the winner's key is
// NaN; t[i] is a tap code with radices rad.
void SelectedOffsetsCl(const Geom& g, Radices rad, const int32_t* k,
                       const int32_t* t, int64_t nc, int64_t astride,
                       int32_t* off) {
  const bool direct = rad.Hr == g.H && rad.Wr == g.W;
  for (int64_t ow = 0; ow < g.Wo; ++ow) {
    for (int64_t c = 0; c < nc; ++c) {
      const int64_t i = ow * nc + c;
      if (k[i] == kNanHighKey) {
        off[i] = -1;
        continue;
      }
      int64_t q = t[i];
      if (!direct) {  // a window larger than the input: decode the tap
        const int64_t td = q / (rad.Hr * rad.Wr), th = q / rad.Wr % rad.Hr,
                      tw = q % rad.Wr;
        q = (td * g.H + th) * g.W + tw;
      }
      off[i] = int32_t((ow * g.sW + q) * astride + c);
    }
  }
}

template <class T>
void FromInputNdhwc(const Geom& g, const typename T::M* go,
                    const typename T::M* x, typename T::M* dx) {
  using M = typename T::M;
  const int64_t C = g.C, DHW = g.D * g.H * g.W;
  const Radices rad{std::max(g.H, g.kH), std::max(g.W, g.kW)};
  const NdhwcBlocks blocks = PlanNdhwcBlocks<T>(g);
  ParallelFor<ClScratch>(blocks.items, blocks.threads, [&](int64_t item,
                                                           ClScratch& s) {
    const int64_t cb = item % blocks.ncb, b = item / blocks.ncb;
    const int64_t c0 = cb * blocks.nc_blk,
                  nc = std::min(blocks.nc_blk, C - c0);
    const M* xb = x + b * DHW * C + c0;
    NdhwcAccumulator<T> acc(g, blocks, dx + b * DHW * C + c0, nc, s);
    s.off.resize(g.Wo * nc);
    struct Sink {
      const Geom& g;
      Radices rad;
      const M* go;
      int64_t b, c0, nc;
      ClScratch& s;
      NdhwcAccumulator<T>& acc;
      void BeginDepth(int64_t od) { acc.StartTo(od * g.sD - g.pD + g.kD); }
      void EndDepth(int64_t od) { acc.FinishAfter(od); }
      void Row(int64_t od, int64_t oh, const int32_t* wk, const int32_t* wt) {
        const int64_t o = ((b * g.Do + od) * g.Ho + oh) * g.Wo * g.C + c0;
        int32_t* off = s.off.data();
        SelectedOffsetsCl(g, rad, wk, wt, nc, acc.astride, off);
        const int64_t d0 = od * g.sD - g.pD, h0 = oh * g.sH - g.pH;
        float* a = acc.data() +
                   (((d0 - acc.acc_d) * g.H + h0) * g.W - g.pW) * acc.astride;
        for (int64_t ow = 0; ow < g.Wo; ++ow) {
          const M* gv = go + o + ow * g.C;
          const int32_t* of = off + ow * nc;
          for (int64_t c = 0; c < nc; ++c)
            if (of[c] >= 0) a[of[c]] += T::ToF32(gv[c]);
        }
      }
    } sink{g, rad, go, b, c0, nc, s, acc};
    SearchBlock<T, NanHigh>(g, rad, xb, nc, s, sink);
  });
}

template <class T>
void Dispatch(const Geom& g, const void* go, const void* x, void* dx) {
  using M = typename T::M;
  auto* gm = static_cast<const M*>(go);
  auto* xm = static_cast<const M*>(x);
  auto* dm = static_cast<M*>(dx);
  if (g.in_cl != g.out_cl) return FromInputGeneric<T>(g, gm, xm, dm);
  if (g.in_cl) {
    if (NdhwcSearchFits(g)) return FromInputNdhwc<T>(g, gm, xm, dm);
    return FromInputGeneric<T>(g, gm, xm, dm);
  }
  if (NcdhwSearchFits(g)) return FromInputNcdhw<T>(g, gm, xm, dm);
  return FromInputGeneric<T>(g, gm, xm, dm);
}

}  // namespace

void MaxPool3dBackwardFromInput(const Geom& g, ElementType t,
                                const void* grad_output, const void* input,
                                void* grad_input) {
  switch (t) {
    case ElementType::kF32:
      return Dispatch<F32T>(g, grad_output, input, grad_input);
    case ElementType::kBF16:
      return Dispatch<BF16T>(g, grad_output, input, grad_input);
    case ElementType::kF16:
      return Dispatch<F16T>(g, grad_output, input, grad_input);
  }
}

}  // namespace pool3d
