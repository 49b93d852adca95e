// The separable first-max search over one NDHWC (batch, channel block), D
// first: int32 keys, and tap codes that break ties and can be offsets from the
// window's origin (what a scatter needs). separable_ndhwc_w_first.h runs W
// first instead, in the element's width, where no tie codes are needed.
//
// Same idea as separable_ncdhw.h, with a block of nc channels as the vector
// dimension: every array holds nc lanes per spatial position. The reduction
// runs D first, straight from the input: per output depth and input row, the
// first maximum over td of each position, written into stride phases (phase
// r holds padded positions r, r + sW, ...) so that tap tw of all windows of a
// row is one contiguous run; then over tw, giving one Wo x nc row per input
// row, kept in a ring of kH rows; then over th for each output row. Only
// those few rows are live, so they stay in cache (the slices of an H-first
// search do not, with C lanes per position).
//
// Because D comes first, a tie is broken explicitly: each lane carries its
// winner's tap code t = (td * Hr + th) * Wr + tw, and among equal keys the
// smaller t wins: the first in row-major order, for any radices Hr >= kH,
// Wr >= kW. Radices (kH, kW) make t the tap number (the forward's index);
// (max(H, kH), max(W, kW)) make it, when H >= kH and W >= kW, the tap's
// offset in the input from the window's origin (what a scatter needs).
//
// Output depths are visited in order and output rows in order within each,
// so a sink that scatters gives every input element its contributions in
// (od, oh, ow) order.
#ifndef POOL3D_KERNELS_COMMON_SEPARABLE_NDHWC_D_FIRST_H_
#define POOL3D_KERNELS_COMMON_SEPARABLE_NDHWC_D_FIRST_H_

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "first_max.h"
#include "scratch_buffer.h"
#include "shared_kernels/element_types.h"
#include "shared_kernels/geometry.h"

namespace pool3d {

struct SepDFirstScratch {
  ScratchBuffer<float> acc;     // f32 accumulator of the half types
  std::vector<int32_t> pk, pt;  // one row's D maxima, in stride phases
  std::vector<int32_t> rk, rt;  // ring of kH rows reduced over (td, tw)
  std::vector<int32_t> wk, wt;  // one output row reduced over everything
  std::vector<int32_t> off;     // where each lane of that row scatters
};

struct Radices {
  int64_t Hr, Wr;
};

// Stage D for npos positions of one input row: k/t[p * nc + c] = first
// maximum over the nd real depth taps of key(x[j * slice + p * x_step + c])
// and its tap code t0 + j * t_step. Ascending j keeps the first of ties.
// ND > 0 fixes nd == ND at compile time (the running maximum then stays in
// registers); ND == 0 takes any nd.
template <class T, class KP, int ND>
POOL3D_HOT void DepthMax(const typename T::M* __restrict x, int64_t x_step,
                         int64_t slice, int64_t nd, int32_t t0,
                         int32_t t_step, int32_t* __restrict k,
                         int32_t* __restrict t, int64_t npos, int64_t nc) {
  for (int64_t p = 0; p < npos; ++p) {
    const typename T::M* xp = x + p * x_step;
    int32_t* kp = k + p * nc;
    int32_t* tp = t + p * nc;
    if constexpr (ND > 0) {
      for (int64_t c = 0; c < nc; ++c) {
        int32_t kk = KP::template KeyOf<T>(xp[c]), tt = t0;
        for (int j = 1; j < ND; ++j)
          TakeIfGreater(KP::template KeyOf<T>(xp[j * slice + c]),
                        t0 + j * t_step, kk, tt);
        kp[c] = kk;
        tp[c] = tt;
      }
    } else {
      for (int64_t c = 0; c < nc; ++c) {
        kp[c] = KP::template KeyOf<T>(xp[c]);
        tp[c] = t0;
      }
      for (int64_t j = 1; j < nd; ++j) {
        const typename T::M* xj = xp + j * slice;
        const int32_t tj = t0 + int32_t(j) * t_step;
        for (int64_t c = 0; c < nc; ++c)
          TakeIfGreater(KP::template KeyOf<T>(xj[c]), tj, kp[c], tp[c]);
      }
    }
  }
}

// Stages D and W for input row rh, for windows starting at depth d0 whose
// real depth taps are [td_lo, td_hi): rk/rt (Wo x nc) = first maximum over
// (td, tw) and its tap code. xb: batch b at the block's channel c0.
template <class T, class KP>
void StageDW(const Geom& g, Radices rad, const typename T::M* xb,
               int64_t nc, int64_t d0, int64_t td_lo, int64_t td_hi,
               int64_t rh, SepDFirstScratch& s, int32_t* rk, int32_t* rt) {
  const int64_t L = g.Wo + (g.kW - 1) / g.sW;  // positions per phase
  const int64_t used = std::min(g.sW, g.kW);    // taps never reach the rest
  const int64_t HWC = g.H * g.W * g.C;
  const typename T::M* xr = xb + ((d0 + td_lo) * g.H + rh) * g.W * g.C;
  for (int64_t r = 0; r < used; ++r) {  // padding lanes already hold kPadKey
    // Phase r holds padded positions r + j * sW, j < L: input w = that - pW.
    const int64_t j0 = std::max<int64_t>(0, (g.pW - r + g.sW - 1) / g.sW);
    const int64_t j1 = std::min(L, (g.W + g.pW - r + g.sW - 1) / g.sW);
    if (j1 > j0) {
      const int64_t nd = td_hi - td_lo;
      auto depth_max = nd == 1   ? DepthMax<T, KP, 1>
                       : nd == 2 ? DepthMax<T, KP, 2>
                       : nd == 3 ? DepthMax<T, KP, 3>
                                 : DepthMax<T, KP, 0>;
      depth_max(xr + (r + j0 * g.sW - g.pW) * g.C, g.sW * g.C, HWC, nd,
                int32_t(td_lo * rad.Hr * rad.Wr), int32_t(rad.Hr * rad.Wr),
                s.pk.data() + (r * L + j0) * nc,
                s.pt.data() + (r * L + j0) * nc, j1 - j0, nc);
    }
  }
  auto tap = [&](int64_t tw) {
    const int64_t o = ((tw % g.sW) * L + tw / g.sW) * nc;
    return std::make_pair(s.pk.data() + o, s.pt.data() + o);
  };
  ReduceRowsTie(tap, g.kW, 1, rk, rt, g.Wo * nc);
}

// The search over one (batch, channel block): xb points at batch b, channel
// c0, and the block has nc lanes. For each output depth od in order:
// sink.BeginDepth(od), then sink.Row(od, oh, wk, wt) for each output row oh in
// order (Wo x nc lanes of winners' keys and tap codes, lane ow * nc + c), then
// sink.EndDepth(od).
template <class T, class KP, class Sink>
void SearchBlockDFirst(const Geom& g, Radices rad, const typename T::M* xb,
                 int64_t nc, SepDFirstScratch& s, Sink& sink) {
  const int64_t row = g.Wo * nc;
  const int64_t L = g.Wo + (g.kW - 1) / g.sW;
  s.pk.assign(std::min(g.sW, g.kW) * L * nc, kPadKey);
  s.pt.assign(s.pk.size(), 0);
  s.rk.resize(g.kH * row);
  s.rt.resize(g.kH * row);
  s.wk.resize(row);
  s.wt.resize(row);
  for (int64_t od = 0; od < g.Do; ++od) {
    const int64_t d0 = od * g.sD - g.pD;
    int64_t td_lo, td_hi;
    TapRange(d0, g.kD, g.D, &td_lo, &td_hi);
    sink.BeginDepth(od);
    int64_t next = 0;  // the first padded row not yet in the ring
    for (int64_t oh = 0; oh < g.Ho; ++oh) {
      // Stages D and W for the rows of this output row not yet in the ring
      // (row h in slot h % kH).
      const int64_t h_lo = oh * g.sH, h_hi = h_lo + g.kH;
      for (int64_t h = std::max(next, h_lo); h < h_hi; ++h) {
        int32_t* rk = s.rk.data() + (h % g.kH) * row;
        int32_t* rt = s.rt.data() + (h % g.kH) * row;
        const int64_t rh = h - g.pH;
        if (rh < 0 || rh >= g.H || td_lo == td_hi) {  // only padding
          std::fill(rk, rk + row, kPadKey);
          std::fill(rt, rt + row, 0);
        } else {
          StageDW<T, KP>(g, rad, xb, nc, d0, td_lo, td_hi, rh, s, rk, rt);
        }
      }
      next = h_hi;
      // Stage H (tap code += th * Wr).
      auto rows = [&](int64_t th) {
        const int64_t o = ((h_lo + th) % g.kH) * row;
        return std::make_pair(s.rk.data() + o, s.rt.data() + o);
      };
      ReduceRowsTie(rows, g.kH, int32_t(rad.Wr), s.wk.data(), s.wt.data(),
                    row);
      sink.Row(od, oh, static_cast<const int32_t*>(s.wk.data()),
               static_cast<const int32_t*>(s.wt.data()));
    }
    sink.EndDepth(od);
  }
}

}  // namespace pool3d

#endif  // POOL3D_KERNELS_COMMON_SEPARABLE_NDHWC_D_FIRST_H_
