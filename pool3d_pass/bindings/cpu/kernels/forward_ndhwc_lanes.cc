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

#include "common/disjoint_rows.h"
#include "common/lane_search.h"
#include "common/ndhwc_rows.h"
#include "common/prefetch.h"
#include "common/threading.h"
#include "layouts.h"
#include "shared_kernels/element_types.h"
#include "shared_kernels/geometry.h"

namespace pool3d {

// Pixels ahead whose taps a pixel's search prefetches: the search reads
// kD * kH input rows at once (measured 1.2x-1.3x faster at f32 k3 s2 p1,
// C = 64, cold caches; 1 and 4 ahead gain less). Only the tap columns the
// previous pixel's prefetch did not reach (PrefetchNewTaps): at f32 k3 s2 p1
// C = 64 that is 24% fewer instructions in the forward (callgrind, one
// thread), the same time (interleaved processes, a contended memory bus).
constexpr int64_t kPrefetchPixels = 2;

// Pixels of at most a cache line: the input rows of the output row's windows
// are prefetched at its start and its interior pixels searched in one call.
// Measured interleaved from cold caches, 2 threads, against a call and a
// prefetch per pixel (docs/benchmarks.md): k3 s2 p1 f32 C = 8 and 16
// 1.12x-1.27x, bf16 C = 16-32 1.08x-1.23x, f16 C = 16 and 24 1.07x-1.22x,
// f32 k2 s2 p1 C = 16 1.08x-1.4x; 0.8x at f32 C = 32 and 0.55x at 256 bytes
// and more (the lane blocks sweep the pixels in turn, and kD * kH rows of
// them no longer stay in L1).
template <class T>
bool PixelsAtOnce(const Geom& g) {
  return g.C * int64_t(sizeof(typename T::M)) <= kCacheLine;
}

template <class T>
void ForwardRowNdhwc(const Geom& g, const typename T::M* xb, int64_t od,
                  int64_t oh, NdhwcTaps& s, typename T::M* y_row,
                  int16_t* idx_row) {
  constexpr int64_t kSize = int64_t(sizeof(typename T::M));
  const int64_t C = g.C, row = g.W * C;
  const bool at_once = PixelsAtOnce<T>(g);
  if (at_once) {
    ForEachCoveredRow(g, od, oh, [&](int64_t d, int64_t h) {
      PrefetchRange(xb, (d * g.H + h) * row * kSize, row * kSize);
    });
  }
  ForEachRunNdhwc(g, od, oh, s, at_once,
               [&](int64_t base, int64_t step, const int64_t* off,
                   const int16_t* tap, int64_t ntaps, int64_t npix, int64_t n,
                   int64_t ow0) {
                 if (!at_once && n == C)  // one pixel (not a stride-1 row)
                   PrefetchNewTaps(xb + base, kPrefetchPixels * g.sW * C, off,
                                   ntaps, C, g.sW);
                 // All taps real: listed 0 .. ntaps - 1 (ForEachRunNdhwc).
                 FirstMaxPixels<T>(xb + base, step, off, tap, ntaps,
                                   ntaps == g.Taps(), npix, n,
                                   y_row + ow0 * C, idx_row + ow0 * C);
               });
}

namespace {

// Output row r (`row` elements) of y, or, where y is null (indices only), a
// per-thread scratch row for the maxima.
template <class M>
M* OutputRow(M* y, int64_t r, int64_t row, std::vector<M>& scratch) {
  if (y != nullptr) return y + r * row;
  scratch.resize(row);
  return scratch.data();
}

}  // namespace

template <class T>
void ForwardNdhwcLanes(const Geom& g, const typename T::M* x, typename T::M* y,
                       int16_t* idx) {
  const int64_t rows = g.B * g.Do * g.Ho, row = g.Wo * g.C;
  const int64_t in_batch = g.D * g.H * g.W * g.C;
  struct Scratch {
    NdhwcTaps taps;
    std::vector<typename T::M> y;  // OutputRow's scratch
  };
  ParallelFor<Scratch>(
      rows, ThreadCount(rows, g.B * in_batch), [&](int64_t r, Scratch& s) {
        const int64_t oh = r % g.Ho, od = r / g.Ho % g.Do, b = r / (g.Ho * g.Do);
        ForwardRowNdhwc<T>(g, x + b * in_batch, od, oh, s.taps,
                        OutputRow(y, r, row, s.y), idx + r * row);
      });
}

template <class T>
void ForwardNdhwcDisjoint(const Geom& g, const typename T::M* x,
                          typename T::M* y, int16_t* idx) {
  const int64_t rows = g.B * g.Do * g.Ho, WoC = g.Wo * g.C;
  const DisjointRows<T> search(g);
  struct Scratch {
    std::vector<typename T::M> stage, y;  // y: OutputRow's scratch
  };
  ParallelFor<Scratch>(
      rows, ThreadCount(rows, g.B * g.D * g.H * g.W * g.C),
      [&](int64_t r, Scratch& s) {
        search.Row(x, r, s.stage, OutputRow(y, r, WoC, s.y), idx + r * WoC);
      });
}

#define POOL3D_INSTANTIATE(T)                                              \
  template void ForwardRowNdhwc<T>(const Geom&, const T::M*, int64_t, int64_t, \
                                NdhwcTaps&, T::M*, int16_t*);                 \
  template void ForwardNdhwcLanes<T>(const Geom&, const T::M*, T::M*,      \
                                     int16_t*);                            \
  template void ForwardNdhwcDisjoint<T>(const Geom&, const T::M*, T::M*,   \
                                        int16_t*);
POOL3D_INSTANTIATE(F32T)
POOL3D_INSTANTIATE(BF16T)
POOL3D_INSTANTIATE(F16T)
#undef POOL3D_INSTANTIATE

}  // namespace pool3d
