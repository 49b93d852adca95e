// backward_from_input, channels-last, windows that do not overlap, with a full
// vector of channels (LanesPay, choices.h): one work item is one output row
// (b, od, oh), searched as the forward searches it (common/disjoint_rows.h
// where no window reaches into padding, else ForwardRowNdhwc) into a scratch
// row of indices; the input rows its windows cover are then written by the gather of
// from_indices_ndhwc_gather.cc (common/lane_gather.h). So the result is
// backward_from_indices(grad_output, forward(input).indices) bit for bit, and
// every input element is written once, in the element type: no accumulator, no
// zeroing pass, no indices in memory. (Measured: with fewer channels than a
// vector the per-element gather loses to the scatter, 0.78 ms against 0.35 ms
// at f32 (4,16,48,48,3) k2 s2; ViaIndicesPays, choices.h, says where those go.)
#include <cstdint>
#include <vector>

#include "common/disjoint_rows.h"
#include "common/lane_gather.h"
#include "common/ndhwc_rows.h"
#include "common/threading.h"
#include "layouts.h"
#include "shared_kernels/element_types.h"
#include "shared_kernels/geometry.h"

namespace pool3d {
namespace {

// Each output row searched by search(r, y_row, idx_row), then its input
// rows gathered.
template <class T, class Search>
void SearchAndGather(const Geom& g, const typename T::M* go,
                     typename T::M* dx, const NdhwcOwners& own,
                     Search&& search) {
  using M = typename T::M;
  const int64_t C = g.C, HW = g.H * g.W, in_batch = g.D * HW * C;
  const int64_t out_rows = g.B * g.Do * g.Ho, row = g.Wo * C;
  struct Scratch {
    NdhwcTaps taps;
    std::vector<M> y, stage;
    std::vector<int16_t> idx;
  };
  ParallelFor<Scratch>(
      out_rows, ThreadCount(out_rows, g.B * in_batch),
      [&](int64_t r, Scratch& s) {
        const int64_t oh = r % g.Ho, od = r / g.Ho % g.Do, b = r / (g.Ho * g.Do);
        s.y.resize(row);
        s.idx.resize(row);
        search(r, s, s.y.data(), s.idx.data());
        ForEachCoveredRow(g, od, oh, [&](int64_t d, int64_t h) {
          GatherRowNdhwc<T>(own.w, own.RowTap(g, d, h), g.W, C, s.idx.data(),
                         go + r * row,
                         dx + b * in_batch + (d * HW + h * g.W) * C);
        });
      });
}

}  // namespace

template <class T>
void FromInputNdhwcGather(const Geom& g, const typename T::M* go,
                          const typename T::M* x, typename T::M* dx) {
  const NdhwcOwners own(g);
  if (WindowsDisjoint(g)) {
    const DisjointRows<T> rows(g);
    SearchAndGather<T>(g, go, dx, own, [&](int64_t r, auto& s, auto* y, int16_t* idx) {
      rows.Row(x, r, s.stage, y, idx);
    });
  } else {
    const int64_t in_batch = g.D * g.H * g.W * g.C;
    SearchAndGather<T>(g, go, dx, own, [&](int64_t r, auto& s, auto* y, int16_t* idx) {
      const int64_t oh = r % g.Ho, od = r / g.Ho % g.Do, b = r / (g.Ho * g.Do);
      ForwardRowNdhwc<T>(g, x + b * in_batch, od, oh, s.taps, y, idx);
    });
  }
  ZeroUncoveredRowsNdhwc<T>(g, own, dx);
}

#define POOL3D_INSTANTIATE(T)                                              \
  template void FromInputNdhwcGather<T>(const Geom&, const T::M*,          \
                                        const T::M*, T::M*);
POOL3D_INSTANTIATE(F32T)
POOL3D_INSTANTIATE(BF16T)
POOL3D_INSTANTIATE(F16T)
#undef POOL3D_INSTANTIATE

}  // namespace pool3d
