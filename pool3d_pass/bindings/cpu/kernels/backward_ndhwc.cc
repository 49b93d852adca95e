// pool3d.max_pooling_3d_backward, NDHWC input and output: vectorised across
// channels.
//
// Windows that do not overlap: one work item is one (b, od, channel block);
// each window's taps are visited in row-major order with a per-channel
// "found" mask, every owned input element written exactly once.
//
// Overlapping windows: one work item is one (b, channel block), searched by
// common/separable_ndhwc_d_first.h (D first, tap codes breaking ties) and
// checked against `output` like the NCDHW path (same int32 keys, same
// tap-by-tap fallback). The f32 accumulator of the half types covers a window
// of depth slices that slides along D; f32 accumulates in dx itself. A depth
// slice is zeroed just before the first window that reaches it and rounded into
// dx as soon as no later window can, so that it is still in cache at both ends.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/first_max.h"
#include "common/separable_ndhwc_d_first.h"
#include "common/threading.h"
#include "common/window_rows.h"
#include "layouts.h"
#include "ndhwc_accumulator.h"
#include "shared_kernels/element_types.h"
#include "shared_kernels/geometry.h"
#include "shared_kernels/window_scan.h"

namespace pool3d {
namespace {

template <class T>
struct Scratch {
  std::vector<typename T::M> found, gnorm;
};

template <class T>
void NdhwcNoOverlap(const Geom& g, const typename T::M* x,
                    const typename T::M* y, const typename T::M* go,
                    typename T::M* dx) {
  using M = typename T::M;
  const int64_t C = g.C;
  const int64_t total = g.B * g.D * g.H * g.W * C;
  const int hint = ThreadCount(int64_t{1} << 20, total);
  const int64_t nc_blk = std::min<int64_t>(ChannelBlock(C, g.B * g.Do, hint),
                                           1024);
  const int64_t ncb = (C + nc_blk - 1) / nc_blk;
  const int64_t items = g.B * g.Do * ncb;
  ParallelFor<Scratch<T>>(items, ThreadCount(items, total), [&](int64_t item,
                                                               Scratch<T>& s) {
    const int64_t cb = item % ncb, od = (item / ncb) % g.Do,
                  b = item / (ncb * g.Do);
    const int64_t c0 = cb * nc_blk, nc = std::min(nc_blk, C - c0);
    const M* xb = x + b * g.D * g.H * g.W * C + c0;
    M* db = dx + b * g.D * g.H * g.W * C + c0;
    if (!g.full_cover) {
      int64_t lo, hi;
      OwnedRange(od, g.Do, g.sD, g.pD, g.D, &lo, &hi);
      if (nc == C) {
        std::memset(db + lo * g.H * g.W * C, 0,
                    sizeof(M) * (hi - lo) * g.H * g.W * C);
      } else {
        for (int64_t i = lo * g.H * g.W; i < hi * g.H * g.W; ++i)
          std::memset(db + i * C, 0, sizeof(M) * nc);
      }
    }
    s.found.resize(nc);
    s.gnorm.resize(nc);
    M* __restrict found = s.found.data();
    M* __restrict gn = s.gnorm.data();
    ForWindowRows(g, od, [&](WindowRow r) {
      for (int64_t ow = 0; ow < g.Wo; ++ow) {
        const int64_t w0 = ow * g.sW - g.pW;
        int64_t tw_lo, tw_hi;
        TapRange(w0, g.kW, g.W, &tw_lo, &tw_hi);
        const int64_t opos = ((b * g.Do + od) * g.Ho + r.oh) * g.Wo + ow;
        const M* __restrict yv = y + opos * C + c0;
        const M* __restrict gv = go + opos * C + c0;
        for (int64_t c = 0; c < nc; ++c) {
          gn[c] = Normalise<T>(gv[c]);
          found[c] = 0;
        }
        for (int64_t td = r.td_lo; td < r.td_hi; ++td) {
          for (int64_t th = r.th_lo; th < r.th_hi; ++th) {
            for (int64_t tw = tw_lo; tw < tw_hi; ++tw) {
              const int64_t ipos =
                  ((r.d0 + td) * g.H + (r.h0 + th)) * g.W + (w0 + tw);
              const M* __restrict xv = xb + ipos * C;
              M* __restrict dv = db + ipos * C;
              for (int64_t c = 0; c < nc; ++c) {
                M e = EqMask<T>(xv[c], yv[c]) & M(~found[c]);
                dv[c] = M(e & gn[c]);
                found[c] = M(found[c] | e);
              }
            }
          }
        }
      }
    });
  });
}

// For the Wo windows of one output row (lane i = ow * nc + c): off[i] = where
// lane i sends its gradient, (ow * sW + offset of tap t[i]) * astride + c
// relative to the row's origin in acc, or -1 when the separable winner is not
// provably the contract's tap (its key differs from Key(y), or y is NaN).
// y: the output row at channel c0 (positions C apart). Returns whether no
// lane is -1.
template <class T>
POOL3D_HOT bool WinnerOffsetsNdhwc(const Geom& g,
                                const typename T::M* __restrict y,
                                const int32_t* __restrict k,
                                const int32_t* __restrict t, int64_t nc,
                                int32_t astride, int32_t* __restrict off) {
  const int64_t Hr = std::max(g.H, g.kH), Wr = std::max(g.W, g.kW);
  const int32_t sW = int32_t(g.sW);
  int32_t all_ok = -1;
  for (int64_t ow = 0; ow < g.Wo; ++ow) {
    for (int64_t c = 0; c < nc; ++c) {
      const int64_t i = ow * nc + c;
      const int32_t ky = Key<T>(y[ow * g.C + c]);
      const int32_t ok = -int32_t(k[i] == ky) & -int32_t(ky != kNanKey);
      const int32_t pos = int32_t(ow) * sW + t[i];
      off[i] = ((pos * astride + int32_t(c)) & ok) | ~ok;
      all_ok &= ok;
    }
  }
  if (Hr == g.H && Wr == g.W) return all_ok != 0;
  // A window larger than the input: the tap code is not the offset.
  for (int64_t i = 0; i < g.Wo * nc; ++i) {
    if (off[i] < 0) continue;
    const int64_t td = t[i] / (Hr * Wr), th = t[i] / Wr % Hr, tw = t[i] % Wr;
    const int64_t pos = i / nc * g.sW + (td * g.H + th) * g.W + tw;
    off[i] = int32_t(pos * astride + i % nc);
  }
  return all_ok != 0;
}

// Adds grad_output of the Wo windows of output row (od, oh) to their winners
// (off from WinnerOffsetsNdhwc; all_ok: no lane is -1). acc holds spatial
// position q of lane c, from depth acc_d on, at acc[(q - acc_d * H * W) *
// astride + c]; xb, yr and gr point at channel c0. Windows are handled in
// order, lanes being independent.
template <class T>
void ScatterRowNdhwc(const Geom& g, const typename T::M* xb,
                  const typename T::M* yr, const typename T::M* gr,
                  const int32_t* off, bool all_ok, int64_t nc, int64_t od,
                  int64_t oh, float* acc, int64_t acc_d, int64_t astride) {
  const int64_t d0 = od * g.sD - g.pD, h0 = oh * g.sH - g.pH;
  const int64_t origin = (((d0 - acc_d) * g.H + h0) * g.W - g.pW) * astride;
  if (all_ok) {  // the common case, without the fallback in the loop
    for (int64_t ow = 0; ow < g.Wo; ++ow) {
      const typename T::M* gv = gr + ow * g.C;
      const int32_t* o = off + ow * nc;
      for (int64_t c = 0; c < nc; ++c) acc[origin + o[c]] += T::ToF32(gv[c]);
    }
    return;
  }
  for (int64_t ow = 0; ow < g.Wo; ++ow) {
    const typename T::M* gv = gr + ow * g.C;
    const int32_t* o = off + ow * nc;
    for (int64_t c = 0; c < nc; ++c) {
      if (o[c] >= 0) {
        acc[origin + o[c]] += T::ToF32(gv[c]);
      } else {
        ScanWindow<T>(g, xb + c, acc + c, d0, h0, ow * g.sW - g.pW,
                      yr[ow * g.C + c], T::ToF32(gv[c]), g.C, astride,
                      acc_d * g.H * g.W);
      }
    }
  }
}

template <class T>
void NdhwcOverlap(const Geom& g, const typename T::M* x,
                  const typename T::M* y, const typename T::M* go,
                  typename T::M* dx) {
  using M = typename T::M;
  const int64_t C = g.C;
  const Radices rad{std::max(g.H, g.kH), std::max(g.W, g.kW)};
  const NdhwcBlocks blocks = PlanNdhwcBlocks<T>(g);
  ParallelFor<SepDFirstScratch>(blocks.items, blocks.threads,
                                [&](int64_t item, SepDFirstScratch& s) {
    const int64_t cb = item % blocks.ncb, b = item / blocks.ncb;
    const int64_t c0 = cb * blocks.nc_blk,
                  nc = std::min(blocks.nc_blk, C - c0);
    const M* xb = x + b * g.D * g.H * g.W * C + c0;
    NdhwcAccumulator<T> acc(g, blocks, dx + b * g.D * g.H * g.W * C + c0, nc,
                            s);
    s.off.resize(g.Wo * nc);
    struct Sink {
      const Geom& g;
      const M* xb;
      const M* y;
      const M* go;
      int64_t b, c0, nc;
      SepDFirstScratch& s;
      NdhwcAccumulator<T>& acc;
      void BeginDepth(int64_t od) { acc.StartTo(od * g.sD - g.pD + g.kD); }
      void Row(int64_t od, int64_t oh, const int32_t* wk, const int32_t* wt) {
        const int64_t o = ((b * g.Do + od) * g.Ho + oh) * g.Wo * g.C + c0;
        const bool all_ok = WinnerOffsetsNdhwc<T>(
            g, y + o, wk, wt, nc, int32_t(acc.astride), s.off.data());
        ScatterRowNdhwc<T>(g, xb, y + o, go + o, s.off.data(), all_ok, nc, od,
                        oh, acc.data(), acc.acc_d, acc.astride);
      }
      void EndDepth(int64_t od) { acc.FinishAfter(od); }
    } sink{g, xb, y, go, b, c0, nc, s, acc};
    SearchBlockDFirst<T, NanLow>(g, rad, xb, nc, s, sink);
  });
}

}  // namespace

bool NdhwcSearchFits(const Geom& g) {
  // Tap codes and offsets within an output row are int32.
  const int64_t Hr = std::max(g.H, g.kH), Wr = std::max(g.W, g.kW);
  const int64_t row_span =
      (g.kD * Hr + g.kH) * Wr + (g.Wo - 1) * g.sW + 2 * g.kW;
  return row_span * g.C < (int64_t{1} << 31);
}

template <class T>
void BackwardNdhwc(const Geom& g, const typename T::M* x,
                   const typename T::M* y, const typename T::M* go,
                   typename T::M* dx) {
  if (!g.overlap) return NdhwcNoOverlap<T>(g, x, y, go, dx);
  if (NdhwcSearchFits(g)) return NdhwcOverlap<T>(g, x, y, go, dx);
  return BackwardGeneric<T>(g, x, y, go, dx);
}

#define POOL3D_INSTANTIATE(T)                                              \
  template void BackwardNdhwc<T>(const Geom&, const T::M*, const T::M*,    \
                                 const T::M*, T::M*);
POOL3D_INSTANTIATE(F32T)
POOL3D_INSTANTIATE(BF16T)
POOL3D_INSTANTIATE(F16T)
#undef POOL3D_INSTANTIATE

}  // namespace pool3d
