// pool3d.max_pooling_3d_backward, NCDHW input and output.
//
// Windows that do not overlap (stride >= kernel): one work item is one
// (plane, od) pair; it writes every element of the input rows it owns exactly
// once (the selected gradient or zero), reading input, output and
// grad_output once, in bit patterns, with no separate zeroing pass.
//
// Overlapping windows: one work item is one (b, c) plane, accumulated in f32
// (in dx itself for f32), with the separable first-max search of
// common/separable_ncdhw.h. Its winner is then checked against `output` (the
// contract's rule): when its key equals Key(output) and output is not NaN,
// x[winner] == output, so it is the first tap equal to output; otherwise
// (NaN maxima, or an `output` that is not the exact maximum) the window is
// rescanned directly, tap by tap.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/first_max.h"
#include "common/separable_ncdhw.h"
#include "common/threading.h"
#include "common/window_rows.h"
#include "layouts.h"
#include "shared_kernels/element_types.h"
#include "shared_kernels/geometry.h"
#include "shared_kernels/window_scan.h"

namespace pool3d {
namespace {

template <class T>
struct Scratch {
  std::vector<typename T::M> found;
};

// One input row of one window row: taps tw of windows ow in [lo, hi), all in
// range. KW > 0 fixes kW == sW == KW at compile time.
template <class T, int KW>
inline void RowNoOverlap(const typename T::M* __restrict xr,
                         typename T::M* __restrict dr,
                         const typename T::M* __restrict yr,
                         const typename T::M* __restrict gr,
                         typename T::M* __restrict found, int64_t lo,
                         int64_t hi, int64_t kW, int64_t sW, int64_t pW) {
  using M = typename T::M;
  if constexpr (KW > 0) {
    const M* xs = xr + (lo * KW - pW);
    M* ds = dr + (lo * KW - pW);
    for (int64_t ow = lo; ow < hi; ++ow) {
      M yv = yr[ow], gv = Normalise<T>(gr[ow]), f = found[ow];
      const int64_t o = (ow - lo) * KW;
      for (int tw = 0; tw < KW; ++tw) {
        M e = EqMask<T>(xs[o + tw], yv) & M(~f);
        ds[o + tw] = M(e & gv);
        f = M(f | e);
      }
      found[ow] = f;
    }
  } else {
    for (int64_t ow = lo; ow < hi; ++ow) {
      const int64_t w0 = ow * sW - pW;
      M yv = yr[ow], gv = Normalise<T>(gr[ow]), f = found[ow];
      for (int64_t tw = 0; tw < kW; ++tw) {
        M e = EqMask<T>(xr[w0 + tw], yv) & M(~f);
        dr[w0 + tw] = M(e & gv);
        f = M(f | e);
      }
      found[ow] = f;
    }
  }
}

// Same with per-tap bounds checks (edge windows touching the padding).
template <class T>
inline void RowNoOverlapEdge(const typename T::M* xr, typename T::M* dr,
                             const typename T::M* yr, const typename T::M* gr,
                             typename T::M* found, int64_t ow, const Geom& g) {
  using M = typename T::M;
  const int64_t w0 = ow * g.sW - g.pW;
  int64_t lo, hi;
  TapRange(w0, g.kW, g.W, &lo, &hi);
  M yv = yr[ow], gv = Normalise<T>(gr[ow]), f = found[ow];
  for (int64_t tw = lo; tw < hi; ++tw) {
    M e = EqMask<T>(xr[w0 + tw], yv) & M(~f);
    dr[w0 + tw] = M(e & gv);
    f = M(f | e);
  }
  found[ow] = f;
}

template <class T, int KW>
void NcdhwNoOverlap(const Geom& g, const typename T::M* x,
                    const typename T::M* y, const typename T::M* go,
                    typename T::M* dx) {
  using M = typename T::M;
  const int64_t planes = g.B * g.C;
  const int64_t HW = g.H * g.W, DHW = g.D * HW, HoWo = g.Ho * g.Wo,
                ODHW = g.Do * HoWo;
  // Windows ow in [ilo, ihi) have all their taps inside [0, W).
  int64_t ilo = (g.pW + g.sW - 1) / g.sW;
  int64_t ihi = g.W + g.pW - g.kW >= 0 ? (g.W + g.pW - g.kW) / g.sW + 1 : 0;
  ihi = std::min(ihi, g.Wo);
  ilo = std::min(ilo, g.Wo);
  if (ihi < ilo) ihi = ilo;
  const int threads = ThreadCount(planes * g.Do, planes * DHW);
  ParallelFor<Scratch<T>>(planes * g.Do, threads, [&](int64_t item,
                                                      Scratch<T>& s) {
    const int64_t p = item / g.Do, od = item % g.Do;
    const M* xp = x + p * DHW;
    M* dp = dx + p * DHW;
    const M* yp = y + p * ODHW + od * HoWo;
    const M* gp = go + p * ODHW + od * HoWo;
    int64_t own_lo, own_hi;
    OwnedRange(od, g.Do, g.sD, g.pD, g.D, &own_lo, &own_hi);
    if (!g.full_cover && own_hi > own_lo) {
      std::memset(dp + own_lo * HW, 0, sizeof(M) * (own_hi - own_lo) * HW);
    }
    s.found.resize(g.Wo);
    M* found = s.found.data();
    ForWindowRows(g, od, [&](WindowRow r) {
      const M* yr = yp + r.oh * g.Wo;
      const M* gr = gp + r.oh * g.Wo;
      std::fill(found, found + g.Wo, M(0));
      for (int64_t td = r.td_lo; td < r.td_hi; ++td) {
        for (int64_t th = r.th_lo; th < r.th_hi; ++th) {
          const int64_t row = (r.d0 + td) * HW + (r.h0 + th) * g.W;
          const M* xr = xp + row;
          M* dr = dp + row;
          for (int64_t ow = 0; ow < ilo; ++ow)
            RowNoOverlapEdge<T>(xr, dr, yr, gr, found, ow, g);
          RowNoOverlap<T, KW>(xr, dr, yr, gr, found, ilo, ihi, g.kW, g.sW,
                              g.pW);
          for (int64_t ow = ihi; ow < g.Wo; ++ow)
            RowNoOverlapEdge<T>(xr, dr, yr, gr, found, ow, g);
        }
      }
    });
  });
}

// pos[i] = where window i (of one output row) sends its gradient: `row` +
// i * sW + idx[i], or -1 when the separable winner is not provably the
// contract's tap (its key differs from Key(y), or y is NaN).
template <class T>
POOL3D_HOT void WinnerPositions(const typename T::M* __restrict yr,
                                const int32_t* __restrict key,
                                const int32_t* __restrict idx, int32_t row,
                                int32_t sW, int64_t n,
                                int32_t* __restrict pos) {
  for (int32_t i = 0; i < int32_t(n); ++i) {
    const int32_t ky = Key<T>(yr[i]);
    const int32_t ok = -int32_t(key[i] == ky) & -int32_t(ky != kNanKey);
    pos[i] = ((row + i * sW + idx[i]) & ok) | ~ok;
  }
}

// Adds grad_output of the Ho x Wo windows at output depth od to their
// winners (dk/di from the search), in (oh, ow) order.
template <class T>
void ScatterSlice(const Geom& g, const typename T::M* xp,
                  const typename T::M* yr, const typename T::M* gr,
                  const int32_t* dk, const int32_t* di, int64_t od,
                  int32_t* pos, float* acc) {
  const int64_t HW = g.H * g.W;
  const int64_t d0 = od * g.sD - g.pD;
  for (int64_t oh = 0; oh < g.Ho; ++oh) {
    const int64_t h0 = oh * g.sH - g.pH;
    const int64_t o = oh * g.Wo;
    WinnerPositions<T>(yr + o, dk + o, di + o,
                       int32_t(d0 * HW + h0 * g.W - g.pW), int32_t(g.sW), g.Wo,
                       pos);
    for (int64_t ow = 0; ow < g.Wo; ++ow) {
      if (pos[ow] >= 0) {
        acc[pos[ow]] += T::ToF32(gr[o + ow]);
      } else {
        ScanWindow<T>(g, xp, acc, d0, h0, ow * g.sW - g.pW, yr[o + ow],
                      T::ToF32(gr[o + ow]));
      }
    }
  }
}

template <class T>
void NcdhwOverlap(const Geom& g, const typename T::M* x,
                  const typename T::M* y, const typename T::M* go,
                  typename T::M* dx) {
  using M = typename T::M;
  constexpr bool kF32 = sizeof(M) == 4;
  const int64_t planes = g.B * g.C;
  const int64_t HW = g.H * g.W, DHW = g.D * HW, HoWo = g.Ho * g.Wo,
                ODHW = g.Do * HoWo;
  const int threads = ThreadCount(planes, planes * DHW);
  ParallelFor<SepScratch>(planes, threads, [&](int64_t p, SepScratch& s) {
    const M* xp = x + p * DHW;
    M* dp = dx + p * DHW;
    float* acc = ZeroedPlaneAccumulator<kF32>(s, dp, DHW);
    PrepareSeparable(g, s);
    SearchPlane<T, NanLow>(
        g, xp, s, int32_t(g.W), int32_t(HW),
        [&](int64_t od, const int32_t* dk, const int32_t* di) {
          ScatterSlice<T>(g, xp, y + p * ODHW + od * HoWo,
                          go + p * ODHW + od * HoWo, dk, di, od,
                          s.pos.data(), acc);
        });
    if constexpr (!kF32) {
      for (int64_t i = 0; i < DHW; ++i) dp[i] = T::FromF32(acc[i]);
    }
  });
}

}  // namespace

bool NcdhwSearchFits(const Geom& g) {
  return g.D * g.H * g.W < (int64_t{1} << 31) - (g.H + 1) * g.W;
}

template <class T>
void BackwardNcdhw(const Geom& g, const typename T::M* x,
                   const typename T::M* y, const typename T::M* go,
                   typename T::M* dx) {
  if (g.overlap) {
    if (NcdhwSearchFits(g)) return NcdhwOverlap<T>(g, x, y, go, dx);
    return BackwardGeneric<T>(g, x, y, go, dx);
  }
  if (g.sW == g.kW) {
    if (g.kW == 1) return NcdhwNoOverlap<T, 1>(g, x, y, go, dx);
    if (g.kW == 2) return NcdhwNoOverlap<T, 2>(g, x, y, go, dx);
    if (g.kW == 3) return NcdhwNoOverlap<T, 3>(g, x, y, go, dx);
    if (g.kW == 4) return NcdhwNoOverlap<T, 4>(g, x, y, go, dx);
  }
  return NcdhwNoOverlap<T, 0>(g, x, y, go, dx);
}

#define POOL3D_INSTANTIATE(T)                                              \
  template void BackwardNcdhw<T>(const Geom&, const T::M*, const T::M*,    \
                                 const T::M*, T::M*);
POOL3D_INSTANTIATE(F32T)
POOL3D_INSTANTIATE(BF16T)
POOL3D_INSTANTIATE(F16T)
#undef POOL3D_INSTANTIATE

}  // namespace pool3d
