// pool3d.max_pooling_3d_backward_from_indices: grad_input from
// (grad_output, indices).
//
// grad_input = 0, then every window whose index t names a real tap adds its
// grad_output there. An index outside [0, kD * kH * kW), or naming a tap in
// the padding, selects nothing (-1 is the forward's "NaN maximum"; anything
// else cannot come from the forward, and is never an out-of-bounds write).
// Windows are visited in (od, oh, ow) order within each work item, so every
// input element receives its contributions in that order, added in f32
// (in dx itself for f32) and rounded once.
//
// NCDHW: one work item is one (b, c) plane, or two scattered side by side; a
// tap's offset in the plane comes from a table (td * H * W + th * W + tw) built
// once per call, and windows at a border accept a selected tap through a mask
// of the taps real there (one per output position along each axis, also built
// once per call); windows that do not overlap write every element once instead
// (no zeroing). NDHWC: one work item is one (b, channel block), with the
// sliding f32 accumulator of ndhwc_accumulator.h; windows that do not overlap
// where FromIndicesGatherPays, and bf16 windows that overlap where
// OverlapGatherPays (both in choices.h), gather instead
// (from_indices_ndhwc_gather.cc).
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "choices.h"
#include "common/scratch_buffer.h"
#include "common/separable_ndhwc_d_first.h"
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

// Per tap t: its (td, th, tw) and its offset from the window's origin in an
// input laid out with strides (sd, sh, sw). Where a window has at most 64
// taps (masked), also per output position along each axis the taps real
// there, tap t as bit t: window (od, oh, ow)'s real taps are
// real_d[od] & real_h[oh] & real_w[ow].
struct TapTable {
  std::vector<int32_t> td, th, tw;
  std::vector<int64_t> off;
  bool masked;
  std::vector<uint64_t> real_d, real_h, real_w;
  TapTable(const Geom& g, int64_t sd, int64_t sh, int64_t sw)
      : masked(g.Taps() <= 64) {
    const int64_t n = g.Taps();
    td.resize(n); th.resize(n); tw.resize(n); off.resize(n);
    for (int64_t t = 0; t < n; ++t) {
      td[t] = int32_t(t / (g.kH * g.kW));
      th[t] = int32_t(t / g.kW % g.kH);
      tw[t] = int32_t(t % g.kW);
      off[t] = td[t] * sd + th[t] * sh + tw[t] * sw;
    }
    if (!masked) return;
    auto axis = [n](int64_t n_out, int64_t stride, int64_t pad, int64_t size,
                    const std::vector<int32_t>& tap) {
      std::vector<uint64_t> real(n_out, 0);
      for (int64_t o = 0; o < n_out; ++o)
        for (int64_t t = 0; t < n; ++t) {
          const int64_t i = o * stride - pad + tap[t];
          if (i >= 0 && i < size) real[o] |= uint64_t{1} << t;
        }
      return real;
    };
    real_d = axis(g.Do, g.sD, g.pD, g.D, td);
    real_h = axis(g.Ho, g.sH, g.pH, g.H, th);
    real_w = axis(g.Wo, g.sW, g.pW, g.W, tw);
  }
};

struct PlaneScratch {
  ScratchBuffer<float> acc;
};

// Windows that do not overlap: one work item is one (plane, od), writing the
// input depths od owns once (ncdhw_no_overlap.h).
template <class T>
void FromIndicesNcdhwNoOverlap(const Geom& g, const typename T::M* go,
                               const int16_t* idx, typename T::M* dx) {
  const int64_t planes = g.B * g.C, DHW = g.D * g.H * g.W;
  const int64_t HoWo = g.Ho * g.Wo, ODHW = g.Do * HoWo;
  struct None {};
  ParallelFor<None>(planes * g.Do, ThreadCount(planes * g.Do, planes * DHW),
                    [&](int64_t item, None&) {
                      const int64_t p = item / g.Do, od = item % g.Do;
                      WriteDepthNoOverlapAnyK<T>(
                          g, od, idx + p * ODHW + od * HoWo,
                          go + p * ODHW + od * HoWo, dx + p * DHW);
                    });
}

// Planes scattered side by side in one work item. Where windows overlap,
// neighbouring windows often select the same element (about half of them at
// k3 s1 on normal inputs), and each such add waits for the one before it
// through memory (store-to-load forwarding); a second plane, which shares no
// element with the first, fills those waits. Measured with the border mask
// below, from cold caches, f32 (2,64,16,56,56) k3 s1 p1: 1.2x-1.25x in all;
// four planes measured 0.9x-0.95x two.
constexpr int kPlanesAtOnce = 2;

// A run of windows [lo, hi) whose taps are all real, K planes side by
// side: window j adds its grad_output at a[j * sw + off[t]] where
// accept(t), in order; sw is 1 where kUnitStride. Used for the windows of one
// NCDHW output row (sw: the stride along W) and for the channels of one
// NDHWC window (each lane a "window" at unit stride). Its own function, so
// that the loop keeps its pointers in registers: inlined in its callers they
// were reloaded from the stack on every window (14-14.5 instructions a
// window or lane, against 8-10 here; callgrind).
template <class T, int K, bool kUnitStride, class Accept>
__attribute__((noinline)) void ScatterRun(
    float* const (&ar)[K], const int16_t* const (&ir)[K],
    const typename T::M* const (&gr)[K], const int64_t* __restrict off,
    int64_t sw, int64_t lo, int64_t hi, Accept accept) {
  float* a[K];
  const int16_t* i[K];
  const typename T::M* gv[K];
  if constexpr (kUnitStride) sw = 1;
  for (int s = 0; s < K; ++s)
    a[s] = ar[s] + lo * sw, i[s] = ir[s], gv[s] = gr[s];
  for (int64_t ow = lo; ow < hi; ++ow) {
    for (int s = 0; s < K; ++s) {
      const uint32_t t = uint32_t(int32_t(i[s][ow]));
      if (accept(t)) a[s][off[t]] += T::ToF32(gv[s][ow]);
      a[s] += sw;
    }
  }
}

// The windows [0, n) of one NDHWC output row whose taps are all real, in
// order: window j adds lane c of its grad_output at a[j * a_step + off[t] + c]
// where its index t names a tap. Its own function, as ScatterRun is, and one
// call a row rather than a window: with few channels (C = 3) the call and
// loop set-up per window were more instructions than its adds.
template <class T>
__attribute__((noinline)) void ScatterInteriorRowNdhwc(
    float* __restrict a, int64_t a_step, const int16_t* __restrict it,
    const typename T::M* __restrict gt, int64_t C, int64_t nc, int64_t n,
    const int64_t* __restrict off, uint32_t ntaps) {
  for (int64_t j = 0; j < n; ++j, a += a_step, it += C, gt += C) {
    for (int64_t c = 0; c < nc; ++c) {
      const uint32_t t = uint32_t(int32_t(it[c]));
      if (t < ntaps) a[off[t] + c] += T::ToF32(gt[c]);
    }
  }
}

// Scatters K planes' windows into their accumulators acc[0..K) (zeroed), in
// (od, oh, ow) order within each plane.
template <class T, int K>
void ScatterPlanes(const Geom& g, const TapTable& tab,
                   float* const (&acc)[K],
                   const typename T::M* const (&gp)[K],
                   const int16_t* const (&ip)[K]) {
  const int64_t HW = g.H * g.W, taps = g.Taps();
  int64_t ilo, ihi;
  InteriorW(g, &ilo, &ihi);
  // Windows with some tap in the padding, where a window has more taps than
  // a mask has bits: check the selected tap.
  auto checked = [&](int s, int64_t o, int64_t row, int64_t d0, int64_t h0,
                     int64_t lo, int64_t hi) {
    for (int64_t ow = lo; ow < hi; ++ow) {
      const int64_t t = ip[s][o + ow];
      if (uint64_t(t) >= uint64_t(taps)) continue;
      const int64_t d = d0 + tab.td[t], h = h0 + tab.th[t],
                    w = ow * g.sW - g.pW + tab.tw[t];
      if (d < 0 || d >= g.D || h < 0 || h >= g.H || w < 0 || w >= g.W)
        continue;  // a tap in the padding
      acc[s][row + ow * g.sW + tab.off[t]] += T::ToF32(gp[s][o + ow]);
    }
  };
  const int64_t* __restrict off = tab.off.data();
  const uint32_t ntaps = uint32_t(taps);
  for (int64_t od = 0; od < g.Do; ++od) {
    const int64_t d0 = od * g.sD - g.pD;
    for (int64_t oh = 0; oh < g.Ho; ++oh) {
      const int64_t h0 = oh * g.sH - g.pH;
      const int64_t o = (od * g.Ho + oh) * g.Wo;
      const int64_t row = d0 * HW + h0 * g.W - g.pW;
      const int64_t left = std::min(ilo, g.Wo), right = std::max(ihi, left);
      // Windows with some W tap in the padding: each window's own mask.
      const uint64_t real_dh =
          tab.masked ? tab.real_d[od] & tab.real_h[oh] : 0;
      auto border = [&](int64_t lo, int64_t hi) {
        if (!tab.masked) {
          for (int s = 0; s < K; ++s) checked(s, o, row, d0, h0, lo, hi);
          return;
        }
        for (int64_t ow = lo; ow < hi; ++ow) {
          const uint64_t real = real_dh & tab.real_w[ow];
          for (int s = 0; s < K; ++s) {
            const uint32_t t = uint32_t(int32_t(ip[s][o + ow]));
            if (t < 64 && (real >> t & 1) != 0)
              acc[s][row + ow * g.sW + off[t]] += T::ToF32(gp[s][o + ow]);
          }
        }
      };
      border(0, left);
      float* ar[K];
      const int16_t* ir[K];
      const typename T::M* gr[K];
      for (int s = 0; s < K; ++s) {
        ar[s] = acc[s] + row;
        ir[s] = ip[s] + o;
        gr[s] = gp[s] + o;
      }
      // Windows whose W taps are all real; accept(t): tap t is real in D, H.
      auto scatter_interior = [&](auto accept) {
        if (g.sW == 1) {
          ScatterRun<T, K, true>(ar, ir, gr, off, 1, ilo, ihi, accept);
        } else {
          ScatterRun<T, K, false>(ar, ir, gr, off, g.sW, ilo, ihi, accept);
        }
      };
      if (d0 >= 0 && d0 + g.kD <= g.D && h0 >= 0 && h0 + g.kH <= g.H) {
        scatter_interior([ntaps](uint32_t t) { return t < ntaps; });
      } else if (tab.masked) {  // a row at the D or H border
        scatter_interior([real_dh](uint32_t t) {
          return t < 64 && (real_dh >> t & 1) != 0;
        });
      } else {
        for (int s = 0; s < K; ++s) checked(s, o, row, d0, h0, ilo, ihi);
      }
      border(right, g.Wo);
    }
  }
}

template <class T>
void FromIndicesNcdhw(const Geom& g, const typename T::M* go,
                      const int16_t* idx, typename T::M* dx) {
  using M = typename T::M;
  constexpr bool kF32 = sizeof(M) == 4;
  constexpr int K = kPlanesAtOnce;
  const int64_t planes = g.B * g.C, DHW = g.D * g.H * g.W;
  const int64_t ODHW = g.Do * g.Ho * g.Wo;
  const TapTable tab(g, g.H * g.W, g.W, 1);
  // Planes side by side only where that leaves a few items per thread.
  const int threads = ThreadCount(planes, planes * DHW);
  const int64_t per_item = planes >= 4 * K * threads ? K : 1;
  const int64_t items = (planes + per_item - 1) / per_item;
  ParallelFor<PlaneScratch>(items, threads, [&](int64_t item,
                                                PlaneScratch& s) {
    const int64_t p0 = item * per_item,
                  n = std::min(per_item, planes - p0);
    float* const planes_acc = kF32 ? nullptr : s.acc.Reserve(n * DHW);
    float* acc[K];
    const M* gp[K];
    const int16_t* ip[K];
    for (int64_t i = 0; i < n; ++i) {
      if constexpr (kF32) {
        acc[i] = reinterpret_cast<float*>(dx + (p0 + i) * DHW);
      } else {
        acc[i] = planes_acc + i * DHW;
      }
      std::fill(acc[i], acc[i] + DHW, 0.0f);
      gp[i] = go + (p0 + i) * ODHW;
      ip[i] = idx + (p0 + i) * ODHW;
    }
    if (n == K) {
      ScatterPlanes<T, K>(g, tab, acc, gp, ip);
    } else {
      for (int64_t i = 0; i < n; ++i)
        ScatterPlanes<T, 1>(g, tab, {acc[i]}, {gp[i]}, {ip[i]});
    }
    if constexpr (!kF32) {
      M* dp = dx + p0 * DHW;
      for (int64_t i = 0; i < n * DHW; ++i) dp[i] = T::FromF32(planes_acc[i]);
    }
  });
}

template <class T>
void FromIndicesNdhwc(const Geom& g, const typename T::M* go,
                      const int16_t* idx, typename T::M* dx) {
  using M = typename T::M;
  const int64_t C = g.C, DHW = g.D * g.H * g.W;
  const int64_t taps = g.Taps();
  const uint32_t ntaps = uint32_t(taps);
  const TapTable tab(g, g.H * g.W, g.W, 1);
  const NdhwcBlocks blocks = PlanNdhwcBlocks<T>(g);
  ParallelFor<SepDFirstScratch>(blocks.items, blocks.threads,
                                [&](int64_t item, SepDFirstScratch& s) {
    const int64_t cb = item % blocks.ncb, b = item / blocks.ncb;
    const int64_t c0 = cb * blocks.nc_blk,
                  nc = std::min(blocks.nc_blk, C - c0);
    NdhwcAccumulator<T> acc(g, blocks, dx + b * DHW * C + c0, nc, s);
    const int64_t as = acc.astride;
    // Tap offsets in the accumulator, for windows whose taps are all real.
    std::vector<int64_t> off(taps);
    for (int64_t t = 0; t < taps; ++t) off[t] = tab.off[t] * as;
    int64_t ilo, ihi;
    InteriorW(g, &ilo, &ihi);
    for (int64_t od = 0; od < g.Do; ++od) {
      const int64_t d0 = od * g.sD - g.pD;
      acc.StartTo(d0 + g.kD);
      float* a = acc.data();
      const bool d_real = d0 >= 0 && d0 + g.kD <= g.D;
      for (int64_t oh = 0; oh < g.Ho; ++oh) {
        const int64_t h0 = oh * g.sH - g.pH;
        const bool dh_real = d_real && h0 >= 0 && h0 + g.kH <= g.H;
        const int64_t row = ((d0 - acc.acc_d) * g.H + h0) * g.W;
        const int64_t o_row = ((b * g.Do + od) * g.Ho + oh) * g.Wo * C + c0;
        for (int64_t ow = 0; ow < g.Wo; ++ow) {
          if (dh_real && ow == ilo && ihi > ilo) {
            const int64_t o = o_row + ilo * C;
            ScatterInteriorRowNdhwc<T>(a + (row + ilo * g.sW - g.pW) * as,
                                    g.sW * as, idx + o, go + o, C, nc,
                                    ihi - ilo, off.data(), ntaps);
            ow = ihi - 1;
            continue;
          }
          const int64_t w0 = ow * g.sW - g.pW;
          const int64_t o = o_row + ow * C;
          const int64_t origin = row + w0;
          const int16_t* __restrict it = idx + o;
          const M* __restrict gt = go + o;
          for (int64_t c = 0; c < nc; ++c) {
            const int64_t t = it[c];
            if (uint64_t(t) >= uint64_t(taps)) continue;
            const int64_t d = d0 + tab.td[t], h = h0 + tab.th[t],
                          w = w0 + tab.tw[t];
            if (d < 0 || d >= g.D || h < 0 || h >= g.H || w < 0 || w >= g.W)
              continue;  // a tap in the padding
            a[(origin + tab.off[t]) * as + c] += T::ToF32(gt[c]);
          }
        }
      }
      acc.FinishAfter(od);
    }
  });
}

template <class T>
void Dispatch(const Geom& g, const void* go, const int16_t* idx, void* dx) {
  using M = typename T::M;
  auto* gm = static_cast<const M*>(go);
  auto* dm = static_cast<M*>(dx);
  if (g.in_cl != g.out_cl) return FromIndicesGeneric<T>(g, gm, idx, dm);
  if (g.in_cl) {
#ifdef POOL3D_OVERLAP_GATHER
    if constexpr (std::is_same_v<T, BF16T>)
      if (OverlapGatherPays(g))
        return FromIndicesNdhwcOverlapGatherBf16(g, gm, idx, dm);
#endif
    if (!g.overlap && FromIndicesGatherPays<M>(g))
      return FromIndicesNdhwcGather<T>(g, gm, idx, dm);
    return FromIndicesNdhwc<T>(g, gm, idx, dm);
  }
  if (!g.overlap) return FromIndicesNcdhwNoOverlap<T>(g, gm, idx, dm);
  return FromIndicesNcdhw<T>(g, gm, idx, dm);
}

}  // namespace

void MaxPool3dBackwardFromIndices(const Geom& g, ElementType t, const CallOperands& ops) {
  ForElementType(t, [&](auto tag) {
    Dispatch<decltype(tag)>(g, ops.go, ops.idx_in, ops.dx);
  });
}

}  // namespace pool3d
