// The lane runs of one channels-last output row, for the lane searches of
// lane_search.h.
//
// An output row is (b, od, oh): Wo pixels of C channels, contiguous in the
// output. Its windows share their real depth and height taps; only the W
// taps of border pixels differ. ForEachRunNdhwc hands out runs of npix pixels
// of n lanes that share one tap list:
//   - stride 1 along W: the interior pixels (all kW taps real) as ONE run of
//     (ow, c) lanes, (ihi - ilo) * C of them, contiguous in input and output
//     (tap tw of pixel ow + 1 is tap tw of pixel ow shifted by C);
//   - a larger stride, where the caller asks for `pixels_at_once`: the
//     interior pixels as one run of ihi - ilo pixels of C lanes, sW * C
//     input elements apart;
//   - every other pixel: its C channels.
// Taps are listed in ascending row-major order, padding left out; lane j of
// pixel p of a run reads input element base + p * step + off[i] + j of the
// batch.
#ifndef POOL3D_KERNELS_COMMON_NDHWC_ROWS_H_
#define POOL3D_KERNELS_COMMON_NDHWC_ROWS_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "shared_kernels/geometry.h"

namespace pool3d {

struct NdhwcTaps {
  std::vector<int64_t> off_full, off;
  std::vector<int16_t> tap_full, tap;
};

// fn(d, h) for the input rows the windows of output row (od, oh) cover.
template <class Fn>
void ForEachCoveredRow(const Geom& g, int64_t od, int64_t oh, Fn&& fn) {
  const int64_t d0 = od * g.sD - g.pD, h0 = oh * g.sH - g.pH;
  for (int64_t d = std::max<int64_t>(d0, 0); d < std::min(d0 + g.kD, g.D); ++d)
    for (int64_t h = std::max<int64_t>(h0, 0); h < std::min(h0 + g.kH, g.H);
         ++h)
      fn(d, h);
}

// fn(base, step, off, tap, ntaps, npix, n_lanes, ow0): the run's pixels start
// at output pixel ow0.
template <class Fn>
void ForEachRunNdhwc(const Geom& g, int64_t od, int64_t oh, NdhwcTaps& s,
                  bool pixels_at_once, Fn&& fn) {
  const int64_t C = g.C, d0 = od * g.sD - g.pD, h0 = oh * g.sH - g.pH;
  int64_t td_lo, td_hi, th_lo, th_hi;
  TapRange(d0, g.kD, g.D, &td_lo, &td_hi);
  TapRange(h0, g.kH, g.H, &th_lo, &th_hi);
  s.off_full.clear();
  s.tap_full.clear();
  for (int64_t td = td_lo; td < td_hi; ++td)
    for (int64_t th = th_lo; th < th_hi; ++th)
      for (int64_t tw = 0; tw < g.kW; ++tw) {
        s.off_full.push_back((((d0 + td) * g.H + h0 + th) * g.W + tw) * C);
        s.tap_full.push_back(int16_t((td * g.kH + th) * g.kW + tw));
      }
  const int64_t nfull = int64_t(s.off_full.size());
  // Pixels whose W taps are all real: w0 >= 0 and w0 + kW <= W.
  int64_t ilo = (g.pW + g.sW - 1) / g.sW;
  int64_t ihi = g.W - g.kW + g.pW >= 0 ? (g.W - g.kW + g.pW) / g.sW + 1 : 0;
  ilo = std::min(ilo, g.Wo);
  ihi = std::max(ilo, std::min(ihi, g.Wo));
  auto border = [&](int64_t ow) {
    const int64_t w0 = ow * g.sW - g.pW;
    int64_t lo, hi;
    TapRange(w0, g.kW, g.W, &lo, &hi);
    s.off.clear();
    s.tap.clear();
    for (int64_t i = 0; i < nfull; ++i) {
      const int64_t tw = i % g.kW;
      if (tw < lo || tw >= hi) continue;
      s.off.push_back(s.off_full[i]);
      s.tap.push_back(s.tap_full[i]);
    }
    fn(w0 * C, 0, s.off.data(), s.tap.data(), int64_t(s.off.size()), 1, C,
       ow);
  };
  for (int64_t ow = 0; ow < ilo; ++ow) border(ow);
  if (g.sW == 1 && ihi > ilo) {
    fn((ilo - g.pW) * C, 0, s.off_full.data(), s.tap_full.data(), nfull, 1,
       (ihi - ilo) * C, ilo);
  } else if (pixels_at_once && ihi > ilo) {
    fn((ilo * g.sW - g.pW) * C, g.sW * C, s.off_full.data(), s.tap_full.data(),
       nfull, ihi - ilo, C, ilo);
  } else {
    for (int64_t ow = ilo; ow < ihi; ++ow)
      fn((ow * g.sW - g.pW) * C, 0, s.off_full.data(), s.tap_full.data(),
         nfull, 1, C, ow);
  }
  for (int64_t ow = ihi; ow < g.Wo; ++ow) border(ow);
}

}  // namespace pool3d

#endif  // POOL3D_KERNELS_COMMON_NDHWC_ROWS_H_
