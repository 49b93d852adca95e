// backward_from_indices, channels-last, by gather (common/lane_gather.h):
// one work item is one input row (b, d, h), W * C elements written once.
//
// The row's covering (od, oh) pairs are the same for all its pixels; the W
// part comes from a per-call table: for every w, its covering (ow, tw) in
// ascending ow. At stride 1 along W the pixels whose kW windows are all
// inside the output become ONE run of (w, c) lanes (window tw of pixel w + 1
// is window tw of pixel w shifted by C); every other pixel is a run of its C
// channels. Used where each input element lies in few windows
// (GatherFromIndicesPays); dense overlap (k3 s1) keeps the scatter.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "common/element_types.h"
#include "common/geometry.h"
#include "common/lane_gather.h"
#include "common/threading.h"
#include "layouts.h"

namespace pool3d {
namespace {

// The windows covering position i of an axis: o ascending, tap = i + p - o*s.
struct Cover {
  std::vector<int64_t> start;  // into o / tap, n + 1 entries
  std::vector<int64_t> o, tap;
  Cover(int64_t n, int64_t k, int64_t s, int64_t p, int64_t n_out) {
    start.push_back(0);
    for (int64_t i = 0; i < n; ++i) {
      // o*s <= i + p < o*s + k
      const int64_t hi = std::min((i + p) / s, n_out - 1);
      const int64_t lo = i + p - k < 0 ? 0 : (i + p - k) / s + 1;
      for (int64_t oo = lo; oo <= hi; ++oo)
        if (i + p - oo * s >= 0 && i + p - oo * s < k) {
          o.push_back(oo);
          tap.push_back(i + p - oo * s);
        }
      start.push_back(int64_t(o.size()));
    }
  }
  int64_t Count(int64_t i) const { return start[i + 1] - start[i]; }
};

struct RowScratch {
  std::vector<int64_t> off;
  std::vector<int16_t> tap;
  std::vector<int64_t> dh_off;  // per covering (od, oh): output offset
  std::vector<int32_t> dh_tap;  // and (td * kH + th) * kW
};

}  // namespace

bool GatherFromIndicesPays(const Geom& g) {
  auto most = [](int64_t k, int64_t s) { return (k + s - 1) / s; };
  return most(g.kD, g.sD) * most(g.kH, g.sH) * most(g.kW, g.sW) <= 8;
}

template <class T>
void FromIndicesNdhwcGather(const Geom& g, const typename T::M* go,
                            const int16_t* idx, typename T::M* dx) {
  using M = typename T::M;
  const int64_t C = g.C, rows = g.B * g.D * g.H;
  const Cover cd(g.D, g.kD, g.sD, g.pD, g.Do), ch(g.H, g.kH, g.sH, g.pH, g.Ho),
      cw(g.W, g.kW, g.sW, g.pW, g.Wo);
  // Stride 1 along W: pixels w in [wlo, whi) have all kW windows.
  int64_t wlo = g.W, whi = g.W;
  if (g.sW == 1) {
    wlo = std::max<int64_t>(0, g.kW - 1 - g.pW);
    whi = std::max(wlo, std::min(g.W, g.Wo - g.pW));
  }
  ParallelFor<RowScratch>(
      rows, ThreadCount(rows, rows * g.W * C), [&](int64_t r, RowScratch& s) {
        const int64_t h = r % g.H, d = r / g.H % g.D, b = r / (g.H * g.D);
        M* out = dx + r * g.W * C;
        s.dh_off.clear();
        s.dh_tap.clear();
        for (int64_t i = cd.start[d]; i < cd.start[d + 1]; ++i)
          for (int64_t j = ch.start[h]; j < ch.start[h + 1]; ++j) {
            s.dh_off.push_back(((b * g.Do + cd.o[i]) * g.Ho + ch.o[j]) * g.Wo * C);
            s.dh_tap.push_back(int32_t((cd.tap[i] * g.kH + ch.tap[j]) * g.kW));
          }
        const int64_t ndh = int64_t(s.dh_off.size());
        auto pixel = [&](int64_t w) {
          s.off.clear();
          s.tap.clear();
          for (int64_t q = 0; q < ndh; ++q)
            for (int64_t i = cw.start[w]; i < cw.start[w + 1]; ++i) {
              s.off.push_back(s.dh_off[q] + cw.o[i] * C);
              s.tap.push_back(int16_t(s.dh_tap[q] + cw.tap[i]));
            }
          GatherRun<T>(idx, go, s.off.data(), s.tap.data(),
                       int64_t(s.off.size()), C, out + w * C);
        };
        for (int64_t w = 0; w < std::min(wlo, g.W); ++w) pixel(w);
        if (whi > wlo) {
          s.off.clear();
          s.tap.clear();
          for (int64_t q = 0; q < ndh; ++q)
            for (int64_t tw = g.kW - 1; tw >= 0; --tw) {  // ow ascending
              s.off.push_back(s.dh_off[q] + (wlo + g.pW - tw) * C);
              s.tap.push_back(int16_t(s.dh_tap[q] + tw));
            }
          GatherRun<T>(idx, go, s.off.data(), s.tap.data(),
                       int64_t(s.off.size()), (whi - wlo) * C, out + wlo * C);
        }
        for (int64_t w = std::max(whi, std::min(wlo, g.W)); w < g.W; ++w)
          pixel(w);
      });
}

#define POOL3D_INSTANTIATE(T)                                               \
  template void FromIndicesNdhwcGather<T>(const Geom&, const T::M*,         \
                                          const int16_t*, T::M*);
POOL3D_INSTANTIATE(F32T)
POOL3D_INSTANTIATE(BF16T)
POOL3D_INSTANTIATE(F16T)
#undef POOL3D_INSTANTIATE

}  // namespace pool3d
