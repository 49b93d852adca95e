// The channels-last forward (y and indices) by lane search
// (common/lane_search.h), in the element's own type.
//
// ForwardNdhwcLanes: one work item is one output row (b, od, oh), its
// pixels' channels (or, at stride 1 along W, the whole interior of the row)
// searched as lanes, tap by tap. No staging copy, no key pass: every input
// element is read where a window needs it.
//
// ForwardNdhwcDisjoint: windows that neither overlap nor reach into padding
// share one tap list, built once per call; a row's pixels are searched in
// one call. Fewer channels than a vector: the row's taps are first staged
// as planes of Wo * C contiguous lanes, searched as one pixel.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/cl_rows.h"
#include "common/element_types.h"
#include "common/geometry.h"
#include "common/lane_search.h"
#include "common/threading.h"
#include "layouts.h"

namespace pool3d {

template <class T>
void ForwardRowCl(const Geom& g, const typename T::M* xb, int64_t od,
                  int64_t oh, ClTaps& s, typename T::M* y_row,
                  int16_t* idx_row) {
  const int64_t C = g.C;
  ForEachRunCl(g, od, oh, s,
               [&](int64_t base, const int64_t* off, const int16_t* tap,
                   int64_t ntaps, int64_t n, int64_t ow0) {
                 SearchFirstMax<T>(xb + base, off, tap, ntaps, n,
                                   y_row + ow0 * C, idx_row + ow0 * C);
               });
}

template <class T>
void ForwardNdhwcLanes(const Geom& g, const typename T::M* x, typename T::M* y,
                       int16_t* idx) {
  const int64_t rows = g.B * g.Do * g.Ho, C = g.C;
  const int64_t in_batch = g.D * g.H * g.W * C;
  ParallelFor<ClTaps>(
      rows, ThreadCount(rows, g.B * in_batch), [&](int64_t r, ClTaps& s) {
        const int64_t oh = r % g.Ho, od = r / g.Ho % g.Do, b = r / (g.Ho * g.Do);
        const int64_t o = r * g.Wo * C;
        ForwardRowCl<T>(g, x + b * in_batch, od, oh, s, y + o, idx + o);
      });
}

// dst[ow * C + c] = src[ow * step + c] for ow < n, c < C < L: each chunk
// copied as a whole vector where the source row (`avail` elements from src)
// holds one; the next chunk overwrites the excess (dst has L more slots).
template <class M>
static void StagePlane(const M* __restrict src, int64_t avail, int64_t step,
                       int64_t C, int64_t n, M* __restrict dst) {
  constexpr int64_t L = 32 / sizeof(M);
  int64_t ow = 0;
  for (; ow < n && ow * step + L <= avail; ++ow)
    std::memcpy(dst + ow * C, src + ow * step, L * sizeof(M));
  for (; ow < n; ++ow) std::copy(src + ow * step, src + ow * step + C, dst + ow * C);
}

template <class T>
void ForwardNdhwcDisjoint(const Geom& g, const typename T::M* x,
                          typename T::M* y, int16_t* idx) {
  using M = typename T::M;
  constexpr int64_t kLanes = 32 / sizeof(M);
  const int64_t rows = g.B * g.Do * g.Ho, C = g.C, WoC = g.Wo * C;
  const int64_t in_batch = g.D * g.H * g.W * C;
  const bool staged = C < kLanes;
  std::vector<int64_t> off, plane;
  std::vector<int16_t> tap;
  for (int64_t td = 0; td < g.kD; ++td)
    for (int64_t th = 0; th < g.kH; ++th)
      for (int64_t tw = 0; tw < g.kW; ++tw) {
        off.push_back(((td * g.H + th) * g.W + tw) * C);
        tap.push_back(int16_t((td * g.kH + th) * g.kW + tw));
        plane.push_back(int64_t(plane.size()) * WoC);
      }
  const int64_t ntaps = int64_t(tap.size());
  ParallelFor<std::vector<M>>(
      rows, ThreadCount(rows, g.B * in_batch),
      [&](int64_t r, std::vector<M>& s) {
        const int64_t oh = r % g.Ho, od = r / g.Ho % g.Do, b = r / (g.Ho * g.Do);
        const M* xr =
            x + b * in_batch + ((od * g.sD) * g.H + oh * g.sH) * g.W * C;
        M* yr = y + r * WoC;
        int16_t* ir = idx + r * WoC;
        if (!staged) {
          return FirstMaxPixels<T>(xr, g.sW * C, off.data(), tap.data(), ntaps,
                                   true, g.Wo, C, yr, ir);
        }
        s.resize(ntaps * WoC + kLanes);
        for (int64_t i = 0; i < ntaps; ++i)
          StagePlane(xr + off[i], (g.W - i % g.kW) * C, g.sW * C, C, g.Wo,
                     s.data() + plane[i]);
        FirstMaxPixels<T>(s.data(), 0, plane.data(), tap.data(), ntaps, true,
                          1, WoC, yr, ir);
      });
}

#define POOL3D_INSTANTIATE(T)                                              \
  template void ForwardRowCl<T>(const Geom&, const T::M*, int64_t, int64_t, \
                                ClTaps&, T::M*, int16_t*);                 \
  template void ForwardNdhwcLanes<T>(const Geom&, const T::M*, T::M*,      \
                                     int16_t*);                            \
  template void ForwardNdhwcDisjoint<T>(const Geom&, const T::M*, T::M*,   \
                                        int16_t*);
POOL3D_INSTANTIATE(F32T)
POOL3D_INSTANTIATE(BF16T)
POOL3D_INSTANTIATE(F16T)
#undef POOL3D_INSTANTIATE

}  // namespace pool3d
