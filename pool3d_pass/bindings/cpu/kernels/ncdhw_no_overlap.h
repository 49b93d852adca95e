// NCDHW windows that do not overlap: searching them in one pass, and writing
// their gradient once.
//
// With stride >= kernel every input element lies in at most one window.
// The search visits each once: per output row the taps in row-major order,
// each input row turned into keys just before its use (read back from L1,
// not from a slice-sized buffer: 12% faster at NCHW k2 s2), windows across
// W as the vector lanes, the running maximum replaced only on a strictly
// greater key. Windows that tile the row (kW == sW, no W padding) merge the
// tap rows first and then search each window's kW taps once (13% faster
// again at NCHW k2 s2). The gradient is written in one pass with no
// zeroing and no read-modify-write: every tap of a window gets grad_output
// where it is the selected tap, +0 elsewhere. The backward from indices and
// the fused backward from input both end there, given per window its selected
// tap number (td * kH * kW + th * kW + tw; any other value, e.g. -1, selects
// nothing).
#ifndef POOL3D_KERNELS_NCDHW_NO_OVERLAP_H_
#define POOL3D_KERNELS_NCDHW_NO_OVERLAP_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/first_max.h"
#include "common/window_rows.h"
#include "shared_kernels/element_types.h"
#include "shared_kernels/geometry.h"

namespace pool3d {

// Windows ow in [*ilo, *ihi) of an output row have all their W taps real.
inline void InteriorW(const Geom& g, int64_t* ilo, int64_t* ihi) {
  *ilo = std::min((g.pW + g.sW - 1) / g.sW, g.Wo);
  *ihi = g.W + g.pW - g.kW >= 0
             ? std::min((g.W + g.pW - g.kW) / g.sW + 1, g.Wo)
             : 0;
  if (*ihi < *ilo) *ihi = *ilo;
}

struct NoOverlapScratch {
  std::vector<int32_t> keys, best, tap, sel;
  std::vector<int32_t> merged_key, merged_tap;  // rows first
};

// best/tap[ow] over the taps base + tw of one input row of keys kr, for the
// windows ow in [lo, hi) whose W taps are all real. KW > 0 fixes kW == sW.
template <int KW>
POOL3D_HOT void RowTapsMax(const int32_t* __restrict kr, int32_t base,
                           int64_t lo, int64_t hi, int64_t kW, int64_t sW,
                           int64_t pW, int32_t* __restrict best,
                           int32_t* __restrict tap) {
  if constexpr (KW > 0) {
    const int32_t* __restrict ks = kr + lo * KW - pW;
    for (int64_t ow = lo; ow < hi; ++ow)
      for (int tw = 0; tw < KW; ++tw)
        TakeIfGreater(ks[(ow - lo) * KW + tw], base + tw, best[ow], tap[ow]);
  } else {
    for (int64_t ow = lo; ow < hi; ++ow)
      for (int64_t tw = 0; tw < kW; ++tw)
        TakeIfGreater(kr[ow * sW - pW + tw], base + int32_t(tw), best[ow],
                      tap[ow]);
  }
}

// Rows first, for windows that tile the row (kW == sW, no W padding): the
// tap rows (td, th) of an output row are merged element by element, in tap
// order, into ck/ct[w] (the first maximum's key, its row's tap base), keys
// made from x on the fly; then each window takes the first maximum of its
// kW merged elements in tap order (a greater key, or an equal one at a
// smaller tap). The same winners as the tap-by-tap search, with one pass
// across the window's W taps instead of one per tap row.
template <class T>
POOL3D_HOT void MergeTapRow(const typename T::M* __restrict x, bool first,
                            int32_t base, int32_t* __restrict ck,
                            int32_t* __restrict ct, int64_t n) {
  if (first) {
    for (int64_t i = 0; i < n; ++i) ck[i] = KeyNanHigh<T>(x[i]), ct[i] = base;
    return;
  }
  for (int64_t i = 0; i < n; ++i)
    TakeIfGreater(KeyNanHigh<T>(x[i]), base, ck[i], ct[i]);
}

template <int KW>
POOL3D_HOT void WindowsOfMergedRow(const int32_t* __restrict ck,
                                   const int32_t* __restrict ct, int64_t Wo,
                                   int32_t* __restrict best,
                                   int32_t* __restrict tap) {
  for (int64_t ow = 0; ow < Wo; ++ow) {
    int32_t b = ck[ow * KW], t = ct[ow * KW];
    for (int tw = 1; tw < KW; ++tw) {
      const int32_t k = ck[ow * KW + tw], c = ct[ow * KW + tw] + tw;
      const int32_t m = -int32_t(k > b || (k == b && c < t));
      b = (k & m) | (b & ~m);
      t = (c & m) | (t & ~m);
    }
    best[ow] = b;
    tap[ow] = t;
  }
}

// The rows-first search of output row oh (windows that tile the row: KW > 0,
// no W padding) into best/tap; false where it does not apply (then the
// tap-by-tap search runs), including an output row with no real tap row.
template <class T, int KW>
bool SearchMergedRow(const Geom& g, const typename T::M* xp, int64_t d0,
                     int64_t td_lo, int64_t td_hi, int64_t h0, int64_t th_lo,
                     int64_t th_hi, NoOverlapScratch& s, int32_t* best,
                     int32_t* tap) {
  if constexpr (KW == 0) {
    return false;
  } else {
    if (g.pW != 0 || td_lo == td_hi || th_lo == th_hi) return false;
    const int64_t n = g.Wo * KW;
    s.merged_key.resize(n);
    s.merged_tap.resize(n);
    for (int64_t td = td_lo; td < td_hi; ++td)
      for (int64_t th = th_lo; th < th_hi; ++th)
        MergeTapRow<T>(xp + ((d0 + td) * g.H + h0 + th) * g.W,
                       td == td_lo && th == th_lo,
                       int32_t((td * g.kH + th) * KW), s.merged_key.data(),
                       s.merged_tap.data(), n);
    WindowsOfMergedRow<KW>(s.merged_key.data(), s.merged_tap.data(), g.Wo,
                           best, tap);
    return true;
  }
}

// The search of output depth od of plane xp (KeyNanHigh order): calls
// row(oh, best, tap) for each output row, best/tap[ow] holding the winner's
// key and tap number of window ow.
template <class T, int KW, class Row>
void SearchDepthNoOverlap(const Geom& g, const typename T::M* xp, int64_t od,
                          NoOverlapScratch& s, Row&& row) {
  const int64_t HW = g.H * g.W;
  int64_t ilo, ihi;
  InteriorW(g, &ilo, &ihi);
  const int64_t d0 = od * g.sD - g.pD;
  int64_t td_lo, td_hi;
  TapRange(d0, g.kD, g.D, &td_lo, &td_hi);
  s.keys.resize(g.W);  // one input row's keys, made just before its use
  s.best.resize(g.Wo);
  s.tap.resize(g.Wo);
  int32_t* best = s.best.data();
  int32_t* tap = s.tap.data();
  for (int64_t oh = 0; oh < g.Ho; ++oh) {
    const int64_t h0 = oh * g.sH - g.pH;
    int64_t th_lo, th_hi;
    TapRange(h0, g.kH, g.H, &th_lo, &th_hi);
    if (!SearchMergedRow<T, KW>(g, xp, d0, td_lo, td_hi, h0, th_lo, th_hi, s,
                                best, tap)) {
      std::fill(best, best + g.Wo, kPadKey);
      std::fill(tap, tap + g.Wo, 0);
      for (int64_t td = td_lo; td < td_hi; ++td)
        for (int64_t th = th_lo; th < th_hi; ++th) {
          Keys<T, NanHigh>(xp + (d0 + td) * HW + (h0 + th) * g.W,
                           s.keys.data(), g.W);
          const int32_t* kr = s.keys.data();
          const int32_t base = int32_t((td * g.kH + th) * g.kW);
          auto edge = [&](int64_t ow) {
            const int64_t w0 = ow * g.sW - g.pW;
            int64_t lo, hi;
            TapRange(w0, g.kW, g.W, &lo, &hi);
            for (int64_t tw = lo; tw < hi; ++tw)
              TakeIfGreater(kr[w0 + tw], base + int32_t(tw), best[ow],
                            tap[ow]);
          };
          for (int64_t ow = 0; ow < ilo; ++ow) edge(ow);
          RowTapsMax<KW>(kr, base, ilo, ihi, g.kW, g.sW, g.pW, best, tap);
          for (int64_t ow = ihi; ow < g.Wo; ++ow) edge(ow);
        }
    }
    row(oh, static_cast<const int32_t*>(best), static_cast<const int32_t*>(tap));
  }
}

// One input row of the windows of one output row: tap base + tw of window ow
// is at dr[ow * sW - pW + tw]. KW > 0 fixes kW == sW == KW.
template <class T, int KW, class Sel>
inline void WriteRowNoOverlap(const Geom& g, const Sel* __restrict sel,
                              const typename T::M* __restrict gr,
                              int32_t base, int64_t ilo, int64_t ihi,
                              typename T::M* __restrict dr) {
  using M = typename T::M;
  auto edge = [&](int64_t ow) {
    const int64_t w0 = ow * g.sW - g.pW;
    int64_t lo, hi;
    TapRange(w0, g.kW, g.W, &lo, &hi);
    for (int64_t tw = lo; tw < hi; ++tw)
      dr[w0 + tw] = int32_t(sel[ow]) == base + tw ? Normalise<T>(gr[ow]) : M(0);
  };
  for (int64_t ow = 0; ow < ilo; ++ow) edge(ow);
  if constexpr (KW > 0) {
    M* ds = dr + ilo * KW - g.pW;
    for (int64_t ow = ilo; ow < ihi; ++ow) {
      const int32_t s = int32_t(sel[ow]);
      const M gv = Normalise<T>(gr[ow]);
      for (int tw = 0; tw < KW; ++tw)
        ds[(ow - ilo) * KW + tw] = s == base + tw ? gv : M(0);
    }
  } else {
    for (int64_t ow = ilo; ow < ihi; ++ow) {
      const int32_t s = int32_t(sel[ow]);
      const M gv = Normalise<T>(gr[ow]);
      M* d = dr + ow * g.sW - g.pW;
      for (int64_t tw = 0; tw < g.kW; ++tw)
        d[tw] = s == base + tw ? gv : M(0);
    }
  }
  for (int64_t ow = ihi; ow < g.Wo; ++ow) edge(ow);
}

// Writes the input depths that output depth od owns (its taps, and the rows
// no window covers up to the next one) of plane dp, from the Ho x Wo selected
// taps `sel` and gradients `gr` of that depth.
template <class T, int KW, class Sel>
void WriteDepthNoOverlap(const Geom& g, int64_t od, const Sel* sel,
                         const typename T::M* gr, typename T::M* dp) {
  const int64_t HW = g.H * g.W;
  if (!g.full_cover) {
    int64_t lo, hi;
    OwnedRange(od, g.Do, g.sD, g.pD, g.D, &lo, &hi);
    if (hi > lo) std::memset(dp + lo * HW, 0, sizeof(*dp) * (hi - lo) * HW);
  }
  int64_t ilo, ihi;
  InteriorW(g, &ilo, &ihi);
  ForWindowRows(g, od, [&](WindowRow r) {
    for (int64_t td = r.td_lo; td < r.td_hi; ++td)
      for (int64_t th = r.th_lo; th < r.th_hi; ++th)
        WriteRowNoOverlap<T, KW>(
            g, sel + r.oh * g.Wo, gr + r.oh * g.Wo,
            int32_t((td * g.kH + th) * g.kW), ilo, ihi,
            dp + (r.d0 + td) * HW + (r.h0 + th) * g.W);
  });
}

// WriteDepthNoOverlap with kW == sW in 1..4 fixed at compile time.
template <class T, class Sel>
void WriteDepthNoOverlapAnyK(const Geom& g, int64_t od, const Sel* sel,
                             const typename T::M* gr, typename T::M* dp) {
  if (g.sW == g.kW) {
    switch (g.kW) {
      case 1: return WriteDepthNoOverlap<T, 1>(g, od, sel, gr, dp);
      case 2: return WriteDepthNoOverlap<T, 2>(g, od, sel, gr, dp);
      case 3: return WriteDepthNoOverlap<T, 3>(g, od, sel, gr, dp);
      case 4: return WriteDepthNoOverlap<T, 4>(g, od, sel, gr, dp);
      default: break;
    }
  }
  return WriteDepthNoOverlap<T, 0>(g, od, sel, gr, dp);
}

}  // namespace pool3d

#endif  // POOL3D_KERNELS_NCDHW_NO_OVERLAP_H_
