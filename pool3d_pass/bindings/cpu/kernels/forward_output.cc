// pool3d.max_pooling_3d_forward_output: y only, bit for bit XLA's
// reduce_window max (docs/contract.md), for inference programs.
//
// Every element becomes a total-order key (common/lane_search.h: -0 < +0,
// infinities at the ends; mapping back is the same flip), the window maximum
// is an integer max in the element's own width, and no selection is kept.
// A NaN anywhere in a row is found by an OR beside the max; such rows are
// then patched window by window with the window's first NaN.
// One work item is one (plane, od) (NCDHW and the 2-D shapes with a unit
// depth: the B * C planes; NDHWC: the B batches, C lanes a position); per
// output row, the real (td, th) input rows are maxed into one row of keys
// (contiguous, vectorised: W or W * C lanes), which is then reduced over the
// kW taps of each window (padding slots hold the lowest key). Every input
// row a window needs is read as one sequential stream.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "common/first_max.h"
#include "common/lane_search.h"  // TotalKey
#include "common/threading.h"
#include "common/window_rows.h"
#include "kernels.h"
#include "layouts.h"
#include "shared_kernels/dispatch.h"
#include "shared_kernels/element_types.h"
#include "shared_kernels/geometry.h"

namespace pool3d {
namespace {

// acc[w] = max(acc[w], key(x[w])) (first: acc[w] = key(x[w])) for w < n;
// returns whether some x[w] is a NaN.
template <class T>
POOL3D_HOT bool MaxRowInto(const typename T::M* __restrict x, bool first,
                           std::make_signed_t<typename T::M>* __restrict acc,
                           int64_t n) {
  using K = std::make_signed_t<typename T::M>;
  constexpr K kInf = K(T::kInf), kAbs = K(T::kAbs);
  K nan = 0;
  if (first) {
    for (int64_t w = 0; w < n; ++w) {
      const K b = K(x[w]);
      acc[w] = TotalKey<K>(b);
      nan |= K(-K(K(b & kAbs) > kInf));
    }
  } else {
    for (int64_t w = 0; w < n; ++w) {
      const K b = K(x[w]);
      acc[w] = std::max(acc[w], TotalKey<K>(b));
      nan |= K(-K(K(b & kAbs) > kInf));
    }
  }
  return nan != 0;
}

// y[ow * e + c] = bits of max over tw < kW of accp[(ow * sW + tw) * e + c]
// (e lanes a position: 1 channels-first, C channels-last).
template <class T>
POOL3D_HOT void ReduceW(const std::make_signed_t<typename T::M>* __restrict accp,
                        int64_t kW, int64_t sW, int64_t Wo, int64_t e,
                        std::make_signed_t<typename T::M>* __restrict best,
                        typename T::M* __restrict y) {
  using K = std::make_signed_t<typename T::M>;
  using M = typename T::M;
  if (e == 1 && sW == 2 && kW == 2) {
    for (int64_t ow = 0; ow < Wo; ++ow)
      y[ow] = M(TotalKey<K>(std::max(accp[2 * ow], accp[2 * ow + 1])));
    return;
  }
  if (e == 1) {
    for (int64_t ow = 0; ow < Wo; ++ow) best[ow] = accp[ow * sW];
    for (int64_t tw = 1; tw < kW; ++tw)
      for (int64_t ow = 0; ow < Wo; ++ow)
        best[ow] = std::max(best[ow], accp[ow * sW + tw]);
    for (int64_t ow = 0; ow < Wo; ++ow) y[ow] = M(TotalKey<K>(best[ow]));
    return;
  }
  for (int64_t ow = 0; ow < Wo; ++ow) {
    const K* a = accp + ow * sW * e;
    for (int64_t c = 0; c < e; ++c) best[c] = a[c];
    for (int64_t tw = 1; tw < kW; ++tw)
      for (int64_t c = 0; c < e; ++c) best[c] = std::max(best[c], a[tw * e + c]);
    for (int64_t c = 0; c < e; ++c) y[ow * e + c] = M(TotalKey<K>(best[c]));
  }
}

struct RowScratch16 {
  std::vector<int16_t> acc, best;
};
struct RowScratch32 {
  std::vector<int32_t> acc, best;
};

// The row search: planes of D x H x W positions of e lanes each (NCDHW: the
// B * C planes, e = 1; NDHWC: the B batches, e = C).
template <class T>
void ForwardOutputRows(const Geom& g, const typename T::M* x, typename T::M* y,
                       int64_t planes, int64_t e) {
  using M = typename T::M;
  using K = std::make_signed_t<M>;
  using Scratch =
      std::conditional_t<sizeof(M) == 2, RowScratch16, RowScratch32>;
  const int64_t HW = g.H * g.W * e, DHW = g.D * HW, W = g.W * e;
  const int64_t HoWo = g.Ho * g.Wo * e, ODHW = g.Do * HoWo;
  // Padded row: pW positions before, enough after for the last window.
  const int64_t Wp = std::max(g.W + g.pW, (g.Wo - 1) * g.sW + g.kW) * e;
  ParallelFor<Scratch>(
      planes * g.Do, ThreadCount(planes * g.Do, planes * DHW),
      [&](int64_t item, Scratch& s) {
        const int64_t p = item / g.Do, od = item % g.Do;
        const M* xp = x + p * DHW;
        s.acc.assign(Wp, std::numeric_limits<K>::min());
        s.best.resize(std::max(g.Wo, e));
        K* acc = s.acc.data() + g.pW * e;
        ForWindowRows(g, od, [&](WindowRow r) {
          bool nan = false, first = true;
          for (int64_t td = r.td_lo; td < r.td_hi; ++td)
            for (int64_t th = r.th_lo; th < r.th_hi; ++th) {
              nan |= MaxRowInto<T>(xp + (r.d0 + td) * HW + (r.h0 + th) * W,
                                   first, acc, W);
              first = false;
            }
          M* yr = y + p * ODHW + od * HoWo + r.oh * g.Wo * e;
          ReduceW<T>(s.acc.data(), g.kW, g.sW, g.Wo, e, s.best.data(), yr);
          if (!nan) return;
          for (int64_t i = 0; i < g.Wo * e; ++i) {  // patch the NaN windows
            const int64_t ow = i / e, c = i % e, w0 = ow * g.sW - g.pW;
            int64_t tw_lo, tw_hi;
            TapRange(w0, g.kW, g.W, &tw_lo, &tw_hi);
            bool found = false;
            for (int64_t td = r.td_lo; td < r.td_hi && !found; ++td)
              for (int64_t th = r.th_lo; th < r.th_hi && !found; ++th)
                for (int64_t tw = tw_lo; tw < tw_hi && !found; ++tw) {
                  const M v =
                      xp[(r.d0 + td) * HW + (r.h0 + th) * W + (w0 + tw) * e + c];
                  if (IsNan<T>(v)) yr[i] = v, found = true;
                }
          }
        });
      });
}

template <class T>
void Dispatch(const Geom& g, const void* x, void* y) {
  using M = typename T::M;
  auto* xm = static_cast<const M*>(x);
  auto* ym = static_cast<M*>(y);
  if (g.in_cl != g.out_cl) return ForwardOutputGeneric<T>(g, xm, ym);
  // Rows in both layouts: channels-last rows are W * C contiguous lanes.
  // (Measured against the lane search across channels, cold caches, 2
  // threads: 1.4x-1.6x faster at k2 s2, level or faster at k3 s2.)
  if (g.in_cl) return ForwardOutputRows<T>(g, xm, ym, g.B, g.C);
  return ForwardOutputRows<T>(g, xm, ym, g.B * g.C, 1);
}

}  // namespace

void MaxPool3dForwardOutput(const Geom& g, ElementType t, const CallOperands& ops) {
  ForElementType(t, [&](auto tag) {
    Dispatch<decltype(tag)>(g, ops.x, ops.y);
  });
}

}  // namespace pool3d
