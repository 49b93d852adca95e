// The separable first-max search of channels-last windows in the element's
// width, W, then H, then D (row-major order, so no tie codes are needed),
// giving tap numbers. separable_ndhwc_d_first.h runs D first instead, with tap
// codes.
//
// Per (batch, channel block): the keys of each input row are computed once
// (KeyNanHigh order, int16 for bf16/f16, int32 for f32; lanes are channels)
// into stride phases, so that tap tw of all the row's windows is one
// contiguous run; reduced over tw into one Wo x nc row per input row (stage
// W; padding slots hold the lowest key, which no real element ties), those
// over th into one Ho x Wo x nc slice per input depth (stage H, kept in a
// ring of min(kD, D) slices), and those over td per output depth (stage D).
// Every step replaces a lane's maximum only on a strictly greater key, in
// ascending tap order: the winner is the first tap in row-major (td, th, tw)
// order holding the maximum, and its tap number is carried along. About
// kW / sW + kH / (sW sH) + kD / (sW sH sD) compare-selects per input element
// and lane, against kD kH kW / (sD sH sW) for a window-by-window search.
#ifndef POOL3D_KERNELS_COMMON_SEPARABLE_NDHWC_W_FIRST_H_
#define POOL3D_KERNELS_COMMON_SEPARABLE_NDHWC_W_FIRST_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "first_max.h"
#include "narrow_keys.h"
#include "prefetch.h"
#include "shared_kernels/element_types.h"
#include "shared_kernels/geometry.h"

namespace pool3d {

template <class T>
struct SepWFirstScratch {
  using K = NarrowKey<T>;
  std::vector<K> row;         // one input row's keys
  std::vector<K> phases;      // the same in stride phases
  std::vector<K> wk, wt;      // stage W of one depth slice: H x Wo x nc
  std::vector<K> hk, ht;      // stage H ring: min(kD, D) slices of Ho x Wo x nc
  std::vector<K> dk, dt;      // stage D of one output row: Wo x nc
};

// kN taps (at most 3) of one search stage in one pass over the n lanes, the
// running winner's key k and tap t kept in registers between taps: tap i
// offers keys ck[i] with tap numbers ct[i] + add[i] (add[i] alone without
// kHasT), taken where its key is greater (so the first maximum stays).
// Masks, not branches, so that it vectorises in the key's width. kFirst: the
// first tap is a plain copy. (One pass per tap, k and t in memory between
// them, measured 1.13x-1.30x slower: docs/benchmarks.md.)
template <class K, int kN, bool kFirst, bool kHasT>
POOL3D_HOT void FusedStepsWFirst(const K* const* ckp, const K* const* ctp,
                             const K* add, K* __restrict k, K* __restrict t,
                             int64_t n) {
  const K* __restrict c0 = ckp[0];
  const K* __restrict c1 = kN > 1 ? ckp[1] : ckp[0];
  const K* __restrict c2 = kN > 2 ? ckp[2] : ckp[0];
  const K* __restrict t0 = kHasT ? ctp[0] : nullptr;
  const K* __restrict t1 = kHasT && kN > 1 ? ctp[1] : t0;
  const K* __restrict t2 = kHasT && kN > 2 ? ctp[2] : t0;
  const K a0 = add[0], a1 = kN > 1 ? add[1] : 0, a2 = kN > 2 ? add[2] : 0;
  for (int64_t j = 0; j < n; ++j) {
    K kk, tt;
    if constexpr (kFirst) {
      kk = c0[j];
      tt = K((kHasT ? t0[j] : K(0)) + a0);
    } else {
      kk = k[j];
      tt = t[j];
      TakeIfGreater<K>(c0[j], K((kHasT ? t0[j] : K(0)) + a0), kk, tt);
    }
    if constexpr (kN > 1)
      TakeIfGreater<K>(c1[j], K((kHasT ? t1[j] : K(0)) + a1), kk, tt);
    if constexpr (kN > 2)
      TakeIfGreater<K>(c2[j], K((kHasT ? t2[j] : K(0)) + a2), kk, tt);
    k[j] = kk;
    t[j] = tt;
  }
}

// One stage's taps, in order: keys ck[i], tap numbers ct[i] + add[i] (add[i]
// alone without kHasT). Run: all of them over n lanes into k / t, the first
// a plain copy, three at a time.
template <class K, bool kHasT>
struct StageTaps {
  std::vector<const K*> ck, ct;
  std::vector<K> add;

  void Clear() {
    ck.clear();
    ct.clear();
    add.clear();
  }
  void Add(const K* keys, const K* taps, K a) {
    ck.push_back(keys);
    ct.push_back(taps);
    add.push_back(a);
  }
  void Run(K* k, K* t, int64_t n) const {
    const int64_t m = int64_t(ck.size());
    for (int64_t i = 0; i < m;) {
      const int64_t g = std::min<int64_t>(3, m - i);
      const K* const* c = ck.data() + i;
      const K* const* d = ct.data() + i;
      const K* a = add.data() + i;
      if (g == 3) {
        i == 0 ? FusedStepsWFirst<K, 3, true, kHasT>(c, d, a, k, t, n)
               : FusedStepsWFirst<K, 3, false, kHasT>(c, d, a, k, t, n);
      } else if (g == 2) {
        i == 0 ? FusedStepsWFirst<K, 2, true, kHasT>(c, d, a, k, t, n)
               : FusedStepsWFirst<K, 2, false, kHasT>(c, d, a, k, t, n);
      } else {
        i == 0 ? FusedStepsWFirst<K, 1, true, kHasT>(c, d, a, k, t, n)
               : FusedStepsWFirst<K, 1, false, kHasT>(c, d, a, k, t, n);
      }
      i += g;
    }
  }
};

// The keys of one input row (W positions C apart, nc lanes) into stride
// phases: padded position wp = w + pW goes to phase wp % sW, slot wp / sW
// (L slots of nc lanes per phase). Positions no window reaches are skipped;
// padding slots keep the lowest key, below every real one.
template <class T>
POOL3D_HOT void RowKeysWFirst(const typename T::M* __restrict xr, int64_t W,
                          int64_t C, int64_t nc, int64_t sW, int64_t pW,
                          int64_t used, int64_t L,
                          NarrowKey<T>* __restrict row,
                          NarrowKey<T>* __restrict phases) {
  using K = NarrowKey<T>;
  if (nc == C) {  // the whole row at once, then whole positions into phases
    for (int64_t i = 0; i < W * C; ++i) row[i] = NarrowKeyOf<T>(xr[i]);
  } else {
    for (int64_t w = 0; w < W; ++w)
      for (int64_t c = 0; c < nc; ++c)
        row[w * nc + c] = NarrowKeyOf<T>(xr[w * C + c]);
  }
  for (int64_t w = 0; w < W; ++w) {
    const int64_t wp = w + pW, r = wp % sW;
    if (r >= used || wp / sW >= L) continue;  // no window reads it
    std::memcpy(phases + (r * L + wp / sW) * nc, row + w * nc,
                sizeof(K) * nc);
  }
}

// The winners of one output row into output (y) and indices (idx), lanes
// ow * nc + c at ow * C + c: bits of the key, tap or -1 (NaN). Returns
// whether some lane is a zero or a NaN (the caller fixes those up).
template <class T>
POOL3D_HOT bool WriteWinnersWFirst(const NarrowKey<T>* __restrict best,
                               const NarrowKey<T>* __restrict tap, int64_t Wo,
                               int64_t nc, int64_t C, typename T::M* __restrict y,
                               int16_t* __restrict idx) {
  using K = NarrowKey<T>;
  K special = 0;
  for (int64_t ow = 0; ow < Wo; ++ow) {
    const K* __restrict bk = best + ow * nc;
    const K* __restrict bt = tap + ow * nc;
    typename T::M* __restrict yo = y + ow * C;
    int16_t* __restrict io = idx + ow * C;
    for (int64_t c = 0; c < nc; ++c) {
      const K nan = K(-K(bk[c] == kNarrowNan<T>));
      yo[c] = NarrowKeyBits<T>(bk[c]);
      io[c] = int16_t((bt[c] & ~nan) | nan);
      special |= K(nan | K(-K(bk[c] == 0)));
    }
  }
  return special != 0;
}

// The search over one (batch, channel block): xb points at the batch's
// channel c0, the block has nc lanes. Calls row(od, oh, k, t) for every
// output row in (od, oh) order, k/t holding Wo x nc winners' keys and tap
// numbers (lane ow * nc + c).
template <class T, class Row>
void SearchBlockWFirst(const Geom& g, const typename T::M* xb, int64_t nc,
                   SepWFirstScratch<T>& s, Row&& row) {
  using K = NarrowKey<T>;
  const int64_t rowlen = g.Wo * nc, slice = g.Ho * rowlen;
  const int64_t L = g.Wo + (g.kW - 1) / g.sW, used = std::min(g.sW, g.kW);
  s.row.resize(g.W * nc);
  s.phases.assign(used * L * nc, std::numeric_limits<K>::min());
  s.wk.resize(g.H * rowlen);
  s.wt.resize(g.H * rowlen);
  // A window's real depths are at most R consecutive ones: distinct slots.
  const int64_t R = std::min(g.kD, g.D);
  s.hk.resize(R * slice);
  s.ht.resize(R * slice);
  s.dk.resize(rowlen);
  s.dt.resize(rowlen);
  int64_t next = 0;  // the first input depth not yet in the ring
  // Each stage's taps: W's are fixed (phase slots), H's and D's per row.
  StageTaps<K, false> w_taps;
  StageTaps<K, true> row_taps;
  for (int64_t tw = 0; tw < g.kW; ++tw)
    w_taps.Add(s.phases.data() + ((tw % g.sW) * L + tw / g.sW) * nc, nullptr,
               K(tw));
  for (int64_t od = 0; od < g.Do; ++od) {
    const int64_t d0 = od * g.sD - g.pD;
    int64_t td_lo, td_hi;
    TapRange(d0, g.kD, g.D, &td_lo, &td_hi);
    for (int64_t d = std::max(next, d0 + td_lo); d < d0 + td_hi; ++d) {
      // Stages W and H of input depth d into ring slot d % R.
      for (int64_t h = 0; h < g.H; ++h) {
        // The next input row's lanes, while this one is keyed and reduced
        // (measured 1.04x-1.12x faster, cold caches).
        PrefetchRowLanes(xb, (d * g.H + h + 1) * g.W * g.C, g.W, g.C, nc);
        RowKeysWFirst<T>(xb + (d * g.H + h) * g.W * g.C, g.W, g.C, nc, g.sW,
                         g.pW, used, L, s.row.data(), s.phases.data());
        w_taps.Run(s.wk.data() + h * rowlen, s.wt.data() + h * rowlen, rowlen);
      }
      K* hk = s.hk.data() + (d % R) * slice;
      K* ht = s.ht.data() + (d % R) * slice;
      for (int64_t oh = 0; oh < g.Ho; ++oh) {
        const int64_t h0 = oh * g.sH - g.pH;
        int64_t lo, hi;
        TapRange(h0, g.kH, g.H, &lo, &hi);
        row_taps.Clear();
        for (int64_t th = lo; th < hi; ++th)
          row_taps.Add(s.wk.data() + (h0 + th) * rowlen,
                       s.wt.data() + (h0 + th) * rowlen, K(th * g.kW));
        row_taps.Run(hk + oh * rowlen, ht + oh * rowlen, rowlen);
      }
    }
    next = std::max(next, d0 + td_hi);
    // Stage D, one output row at a time.
    for (int64_t oh = 0; oh < g.Ho; ++oh) {
      K* dk = s.dk.data();
      K* dt = s.dt.data();
      const int64_t o = oh * rowlen;
      auto ring_k = [&](int64_t td) {
        return s.hk.data() + ((d0 + td) % R) * slice + o;
      };
      auto ring_t = [&](int64_t td) {
        return s.ht.data() + ((d0 + td) % R) * slice + o;
      };
      row_taps.Clear();
      for (int64_t td = td_lo; td < td_hi; ++td)
        row_taps.Add(ring_k(td), ring_t(td), K(td * g.kH * g.kW));
      row_taps.Run(dk, dt, rowlen);
      row(od, oh, static_cast<const K*>(dk), static_cast<const K*>(dt));
    }
  }
}

}  // namespace pool3d

#endif  // POOL3D_KERNELS_COMMON_SEPARABLE_NDHWC_W_FIRST_H_
