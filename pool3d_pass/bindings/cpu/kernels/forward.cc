// pool3d.max_pooling_3d_forward: (output, indices) from input.
//
// NDHWC runs the lane search (forward_ndhwc_lanes.cc) with one shared tap list
// where windows neither overlap nor reach into padding (WindowsDisjoint), the
// lane search across channels where it pays (LanesPay, choices.h), else the
// separable one across channels (common/separable_ndhwc_w_first.h). NCDHW runs
// the separable first-max search (common/separable_ncdhw.h) when windows
// overlap and a single pass over the input when they do not, all with NaN
// sorting above every number (KeyNanHigh) and indices counted as tap numbers
// (td * kH * kW + th * kW + tw). The winner's key then gives the output
// directly: keys order like the floats and map back to their bits, except in
// two rare cases fixed up afterwards, tap by tap:
//   - key NaN: the window holds a NaN, the winner is its first one; output is
//     that NaN's bits, index -1 (nothing selected);
//   - key 0: the maximum is a zero; it is +0 if the window holds a +0, else
//     -0 (XLA's max), while the index stays the first zero of either sign.
// One work item is one (b, c) plane or (plane, od) (NCDHW), or one (b,
// channel block) (NDHWC); every output element is written by exactly one
// item.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "choices.h"
#include "common/first_max.h"
#include "common/separable_ncdhw.h"
#include "common/separable_ndhwc_w_first.h"
#include "common/threading.h"
#include "kernels.h"
#include "layouts.h"
#include "ncdhw_no_overlap.h"
#include "shared_kernels/dispatch.h"
#include "shared_kernels/element_types.h"
#include "shared_kernels/geometry.h"

namespace pool3d {
namespace {

// The element bits of a key (not NaN, not padding); a zero key gives +0.
template <class T>
inline typename T::M KeyBits(int32_t k) {
  using M = typename T::M;
  constexpr uint32_t kSign = uint32_t{1} << (sizeof(M) * 8 - 1);
  const int32_t neg = k >> 31;
  return M(uint32_t((k ^ neg) - neg) | (kSign & uint32_t(neg)));
}

// out[i] = bits of key k[i], idx[i] = t[i] or -1 (NaN), for n lanes `ostep`
// apart in out / idx (lane i of `in`). Returns whether some lane is a zero or
// a NaN (needs FixWindow).
template <class T>
POOL3D_HOT bool WriteWinners(const int32_t* __restrict k,
                             const int32_t* __restrict t, int64_t n,
                             typename T::M* __restrict out,
                             int16_t* __restrict idx) {
  int32_t special = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t nan = -int32_t(k[i] == kNanHighKey);
    out[i] = KeyBits<T>(k[i]);
    idx[i] = int16_t((t[i] & ~nan) | nan);
    special |= nan | -int32_t(k[i] == 0);
  }
  return special != 0;
}

// The rare lanes of one window: key NaN or 0, winner tap t, input element
// at tap (td, th, tw) = at(td, th, tw) (nullptr-free: the tap is real).
template <class T, class At>
void FixWindow(const Geom& g, int32_t k, int32_t t, int64_t d0, int64_t h0,
               int64_t w0, At at, typename T::M* out) {
  using M = typename T::M;
  const int64_t khw = g.kH * g.kW;
  if (k == kNanHighKey) {
    *out = at(t / khw, t / g.kW % g.kH, t % g.kW);
    return;
  }
  if (k != 0) return;
  int64_t td_lo, td_hi, th_lo, th_hi, tw_lo, tw_hi;
  TapRange(d0, g.kD, g.D, &td_lo, &td_hi);
  TapRange(h0, g.kH, g.H, &th_lo, &th_hi);
  TapRange(w0, g.kW, g.W, &tw_lo, &tw_hi);
  M zero = M(M(1) << (sizeof(M) * 8 - 1));  // -0 unless a +0 is found
  for (int64_t td = td_lo; td < td_hi; ++td)
    for (int64_t th = th_lo; th < th_hi; ++th)
      for (int64_t tw = tw_lo; tw < tw_hi; ++tw)
        if (at(td, th, tw) == 0) zero = 0;
  *out = zero;
}

template <class T>
void ForwardNcdhw(const Geom& g, const typename T::M* x, typename T::M* y,
                  int16_t* idx) {
  using M = typename T::M;
  const int64_t planes = g.B * g.C;
  const int64_t HW = g.H * g.W, DHW = g.D * HW, HoWo = g.Ho * g.Wo,
                ODHW = g.Do * HoWo;
  ParallelFor<SepScratch>(
      planes, ThreadCount(planes, planes * DHW), [&](int64_t p, SepScratch& s) {
        const M* xp = x + p * DHW;
        PrepareSeparable(g, s);
        SearchPlane<T, NanHigh>(
            g, xp, s, int32_t(g.kW), int32_t(g.kH * g.kW),
            [&](int64_t od, const int32_t* dk, const int32_t* di) {
              M* yo = y + p * ODHW + od * HoWo;
              if (!WriteWinners<T>(dk, di, HoWo, yo, idx + p * ODHW + od * HoWo))
                return;
              const int64_t d0 = od * g.sD - g.pD;
              for (int64_t i = 0; i < HoWo; ++i) {
                if (dk[i] != 0 && dk[i] != kNanHighKey) continue;
                const int64_t h0 = i / g.Wo * g.sH - g.pH,
                              w0 = i % g.Wo * g.sW - g.pW;
                FixWindow<T>(
                    g, dk[i], di[i], d0, h0, w0,
                    [&](int64_t td, int64_t th, int64_t tw) {
                      return xp[((d0 + td) * g.H + h0 + th) * g.W + w0 + tw];
                    },
                    yo + i);
              }
            });
      });
}

// NCDHW, windows that do not overlap: one work item is one (plane, od), the
// single-pass search of ncdhw_no_overlap.h.
template <class T, int KW>
void ForwardNcdhwNoOverlap(const Geom& g, const typename T::M* x,
                           typename T::M* y, int16_t* idx) {
  using M = typename T::M;
  const int64_t planes = g.B * g.C, DHW = g.D * g.H * g.W;
  const int64_t HoWo = g.Ho * g.Wo, ODHW = g.Do * HoWo;
  ParallelFor<NoOverlapScratch>(
      planes * g.Do, ThreadCount(planes * g.Do, planes * DHW),
      [&](int64_t item, NoOverlapScratch& s) {
        const int64_t p = item / g.Do, od = item % g.Do;
        const M* xp = x + p * DHW;
        const int64_t d0 = od * g.sD - g.pD;
        SearchDepthNoOverlap<T, KW>(
            g, xp, od, s,
            [&](int64_t oh, const int32_t* best, const int32_t* tap) {
              const int64_t o = p * ODHW + od * HoWo + oh * g.Wo;
              if (!WriteWinners<T>(best, tap, g.Wo, y + o, idx + o)) return;
              const int64_t h0 = oh * g.sH - g.pH;
              for (int64_t ow = 0; ow < g.Wo; ++ow) {
                if (best[ow] != 0 && best[ow] != kNanHighKey) continue;
                const int64_t w0 = ow * g.sW - g.pW;
                FixWindow<T>(
                    g, best[ow], tap[ow], d0, h0, w0,
                    [&](int64_t td, int64_t th, int64_t tw) {
                      return xp[((d0 + td) * g.H + h0 + th) * g.W + w0 + tw];
                    },
                    y + o + ow);
              }
            });
      });
}

// One work item is one (b, channel block): the separable search of
// common/separable_ndhwc_w_first.h, each output row written out as it comes.
template <class T>
void ForwardNdhwc(const Geom& g, const typename T::M* x, typename T::M* y,
                  int16_t* idx) {
  using M = typename T::M;
  using K = NarrowKey<T>;
  const int64_t C = g.C, DHW = g.D * g.H * g.W, total = g.B * DHW * C;
  const int64_t nc_blk =
      ChannelBlock(C, g.B, ThreadCount(int64_t{1} << 20, total));
  const int64_t ncb = (C + nc_blk - 1) / nc_blk, items = g.B * ncb;
  ParallelFor<SepWFirstScratch<T>>(
      items, ThreadCount(items, total),
      [&](int64_t item, SepWFirstScratch<T>& s) {
        const int64_t cb = item % ncb, b = item / ncb;
        const int64_t c0 = cb * nc_blk, nc = std::min(nc_blk, C - c0);
        const M* xb = x + b * DHW * C + c0;
        SearchBlockWFirst<T>(g, xb, nc, s, [&](int64_t od, int64_t oh,
                                           const K* best, const K* tap) {
          const int64_t d0 = od * g.sD - g.pD, h0 = oh * g.sH - g.pH;
          const int64_t o = ((b * g.Do + od) * g.Ho + oh) * g.Wo * C + c0;
          const bool special =
              WriteWinnersWFirst<T>(best, tap, g.Wo, nc, C, y + o, idx + o);
          if (!special) return;
          for (int64_t i = 0; i < g.Wo * nc; ++i) {
            const K k = best[i];
            if (k != 0 && k != kNarrowNan<T>) continue;
            const int64_t ow = i / nc, c = i % nc, w0 = ow * g.sW - g.pW;
            FixWindow<T>(
                g, k == 0 ? 0 : kNanHighKey, int32_t(tap[i]), d0, h0, w0,
                [&](int64_t td, int64_t th, int64_t tw) {
                  return xb[(((d0 + td) * g.H + h0 + th) * g.W + w0 + tw) * C +
                            c];
                },
                y + o + ow * C + c);
          }
        });
      });
}

template <class T>
void Dispatch(const Geom& g, const void* x, void* y, int16_t* idx) {
  using M = typename T::M;
  auto* xm = static_cast<const M*>(x);
  auto* ym = static_cast<M*>(y);
  if (g.in_cl != g.out_cl) return ForwardGeneric<T>(g, xm, ym, idx);
  if (g.in_cl) {
    if (WindowsDisjoint(g)) return ForwardNdhwcDisjoint<T>(g, xm, ym, idx);
    if (LanesPay(g, 32 / sizeof(M))) return ForwardNdhwcLanes<T>(g, xm, ym, idx);
    return ForwardNdhwc<T>(g, xm, ym, idx);
  }
  if (g.overlap) return ForwardNcdhw<T>(g, xm, ym, idx);
  if (g.sW == g.kW && g.kW == 2) return ForwardNcdhwNoOverlap<T, 2>(g, xm, ym, idx);
  if (g.sW == g.kW && g.kW == 3) return ForwardNcdhwNoOverlap<T, 3>(g, xm, ym, idx);
  return ForwardNcdhwNoOverlap<T, 0>(g, xm, ym, idx);
}

}  // namespace

void MaxPool3dForward(const Geom& g, ElementType t, const CallOperands& ops) {
  ForElementType(t, [&](auto tag) {
    Dispatch<decltype(tag)>(g, ops.x, ops.y, ops.idx);
  });
}

}  // namespace pool3d
