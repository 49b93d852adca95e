// The channels-last forward (y and indices) by lane search
// (common/lane_search.h), in the element's own type.
//
// ForwardNdhwcLanes: one work item is one output row (b, od, oh), its
// pixels' channels (or, at stride 1 along W, the whole interior of the row)
// searched as lanes, tap by tap. No staging copy, no key pass: every input
// element is read where a window needs it.
//
// ForwardNdhwcDisjoint: windows that neither overlap nor reach into padding,
// row by row (common/disjoint_rows.h).
//
// Both take y == nullptr for indices only (backward_from_input.cc).
#include <cstdint>
#include <vector>

#include "common/cl_rows.h"
#include "common/disjoint_rows.h"
#include "common/element_types.h"
#include "common/geometry.h"
#include "common/lane_search.h"
#include "common/prefetch.h"
#include "common/threading.h"
#include "layouts.h"

namespace pool3d {

// Pixels ahead whose taps a pixel's search prefetches: the search reads
// kD * kH input rows at once (measured 1.2x-1.3x faster at f32 k3 s2 p1,
// C = 64, cold caches; 1 and 4 ahead gain less).
constexpr int64_t kPrefetchPixels = 2;

template <class T>
void ForwardRowCl(const Geom& g, const typename T::M* xb, int64_t od,
                  int64_t oh, ClTaps& s, typename T::M* y_row,
                  int16_t* idx_row) {
  const int64_t C = g.C;
  ForEachRunCl(g, od, oh, s,
               [&](int64_t base, const int64_t* off, const int16_t* tap,
                   int64_t ntaps, int64_t n, int64_t ow0) {
                 if (n == C)  // one pixel (a stride-1 run is a whole row)
                   PrefetchTaps(xb + base, kPrefetchPixels * g.sW * C, off,
                                ntaps, n);
                 SearchFirstMax<T>(xb + base, off, tap, ntaps, n,
                                   y_row + ow0 * C, idx_row + ow0 * C);
               });
}

template <class T>
void ForwardNdhwcLanes(const Geom& g, const typename T::M* x, typename T::M* y,
                       int16_t* idx) {
  const int64_t rows = g.B * g.Do * g.Ho, row = g.Wo * g.C;
  const int64_t in_batch = g.D * g.H * g.W * g.C;
  struct Scratch {
    ClTaps taps;
    std::vector<typename T::M> y;  // the row's maxima where y is null
  };
  ParallelFor<Scratch>(
      rows, ThreadCount(rows, g.B * in_batch), [&](int64_t r, Scratch& s) {
        const int64_t oh = r % g.Ho, od = r / g.Ho % g.Do, b = r / (g.Ho * g.Do);
        typename T::M* y_row = y + r * row;
        if (y == nullptr) {
          s.y.resize(row);
          y_row = s.y.data();
        }
        ForwardRowCl<T>(g, x + b * in_batch, od, oh, s.taps, y_row,
                        idx + r * row);
      });
}

template <class T>
void ForwardNdhwcDisjoint(const Geom& g, const typename T::M* x,
                          typename T::M* y, int16_t* idx) {
  const int64_t rows = g.B * g.Do * g.Ho, WoC = g.Wo * g.C;
  const DisjointRows<T> search(g);
  struct Scratch {
    std::vector<typename T::M> stage, y;  // y: the row's maxima where y is null
  };
  ParallelFor<Scratch>(
      rows, ThreadCount(rows, g.B * g.D * g.H * g.W * g.C),
      [&](int64_t r, Scratch& s) {
        typename T::M* y_row = y + r * WoC;
        if (y == nullptr) {
          s.y.resize(WoC);
          y_row = s.y.data();
        }
        search.Row(x, r, s.stage, y_row, idx + r * WoC);
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
