// The channels-last search of one output row where windows neither overlap
// nor reach into padding (WindowsDisjoint): every pixel of every row has the
// same real taps, so one tap list, built once per call, serves them all and
// a row's pixels are searched in one FirstMaxPixels call (lane_search.h).
// With fewer channels than a vector, the row's taps are first staged as
// planes of Wo * C contiguous lanes, searched as one pixel.
#ifndef POOL3D_KERNELS_COMMON_DISJOINT_ROWS_H_
#define POOL3D_KERNELS_COMMON_DISJOINT_ROWS_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "lane_search.h"
#include "shared_kernels/geometry.h"

namespace pool3d {

// dst[ow * C + c] = src[ow * step + c] for ow < n, c < C < L: each chunk
// copied as a whole vector where the source row (`avail` elements from src)
// holds one; the next chunk overwrites the excess (dst has L more slots).
template <class M>
inline void StagePlane(const M* __restrict src, int64_t avail, int64_t step,
                       int64_t C, int64_t n, M* __restrict dst) {
  constexpr int64_t L = 32 / sizeof(M);
  int64_t ow = 0;
  for (; ow < n && ow * step + L <= avail; ++ow)
    std::memcpy(dst + ow * C, src + ow * step, L * sizeof(M));
  for (; ow < n; ++ow) std::copy(src + ow * step, src + ow * step + C, dst + ow * C);
}

template <class T>
class DisjointRows {
 public:
  using M = typename T::M;
  static constexpr int64_t kLanes = 32 / sizeof(M);

  explicit DisjointRows(const Geom& g) : g_(g), WoC_(g.Wo * g.C) {
    for (int64_t td = 0; td < g.kD; ++td)
      for (int64_t th = 0; th < g.kH; ++th)
        for (int64_t tw = 0; tw < g.kW; ++tw) {
          off_.push_back(((td * g.H + th) * g.W + tw) * g.C);
          tap_.push_back(int16_t((td * g.kH + th) * g.kW + tw));
          plane_.push_back(int64_t(plane_.size()) * WoC_);
        }
  }

  // Output row r = (b, od, oh) of input x: Wo * C maxima and indices.
  // `stage` is the caller's per-thread scratch.
  void Row(const M* x, int64_t r, std::vector<M>& stage, M* yr,
           int16_t* ir) const {
    const Geom& g = g_;
    const int64_t C = g.C, ntaps = int64_t(tap_.size());
    const int64_t oh = r % g.Ho, od = r / g.Ho % g.Do, b = r / (g.Ho * g.Do);
    const M* xr = x + b * g.D * g.H * g.W * C +
                  ((od * g.sD) * g.H + oh * g.sH) * g.W * C;
    if (C >= kLanes) {
      return FirstMaxPixels<T>(xr, g.sW * C, off_.data(), tap_.data(), ntaps,
                               true, g.Wo, C, yr, ir);
    }
    stage.resize(ntaps * WoC_ + kLanes);
    for (int64_t i = 0; i < ntaps; ++i)
      StagePlane(xr + off_[i], (g.W - i % g.kW) * C, g.sW * C, C, g.Wo,
                 stage.data() + plane_[i]);
    FirstMaxPixels<T>(stage.data(), 0, plane_.data(), tap_.data(), ntaps,
                      true, 1, WoC_, yr, ir);
  }

 private:
  const Geom& g_;
  const int64_t WoC_;
  std::vector<int64_t> off_, plane_;
  std::vector<int16_t> tap_;
};

}  // namespace pool3d

#endif  // POOL3D_KERNELS_COMMON_DISJOINT_ROWS_H_
