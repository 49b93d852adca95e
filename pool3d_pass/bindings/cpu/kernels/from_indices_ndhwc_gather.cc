// backward_from_indices, channels-last, by gather where it pays
// (FromIndicesGatherPays, OverlapGatherPays: choices.h). One work item is one
// input row (b, d, h): its W * C elements are written once, in the element
// type, with no zeroing pass, no accumulator plane and no rounding pass.
//
// Windows that do not overlap (common/lane_gather.h): each input position
// lies in at most one window along each axis (its window and tap per axis:
// NdhwcOwners, -1 for a position no window covers). An element takes its
// window's grad_output (0 + g: +0 for -0) where the window's index names the
// element's own tap, else +0: a window whose index is -1, out of range or a
// padding tap matches nothing.
//
// Windows that overlap (common/overlap_gather.h): each pixel sums, in f32
// registers, the grad_output of every covering window whose index names its
// tap, in (od, oh, ow) order, the scatter's order, so the same bits.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/lane_gather.h"
#include "common/threading.h"
#include "layouts.h"
#include "shared_kernels/element_types.h"
#include "shared_kernels/geometry.h"
#ifdef POOL3D_OVERLAP_GATHER
#include "common/overlap_gather.h"
#endif

namespace pool3d {

template <class T>
void FromIndicesNdhwcGather(const Geom& g, const typename T::M* go,
                            const int16_t* idx, typename T::M* dx) {
  using M = typename T::M;
  const int64_t C = g.C, rows = g.B * g.D * g.H;
  const NdhwcOwners own(g);
  struct None {};
  ParallelFor<None>(
      rows, ThreadCount(rows, rows * g.W * C), [&](int64_t r, None&) {
        const int64_t h = r % g.H, d = r / g.H % g.D, b = r / (g.H * g.D);
        M* out = dx + r * g.W * C;
        if (!own.Covers(d, h)) {
          std::memset(static_cast<void*>(out), 0, sizeof(M) * g.W * C);
          return;
        }
        const int64_t o =
            ((b * g.Do + own.d.o[d]) * g.Ho + own.h.o[h]) * g.Wo * C;
        GatherRowNdhwc<T>(own.w, own.RowTap(g, d, h), g.W, C, idx + o, go + o,
                          out);
      });
}

#ifdef POOL3D_OVERLAP_GATHER
void FromIndicesNdhwcOverlapGatherBf16(const Geom& g, const uint16_t* go,
                                       const int16_t* idx, uint16_t* dx) {
  const int64_t rows = g.B * g.D * g.H, WC = g.W * g.C;
  const int64_t out_batch = g.Do * g.Ho * g.Wo * g.C;
  const OverlapCovers covers(g);
  struct Rows {
    std::vector<int64_t> off;
    std::vector<int32_t> tap;
  };
  ParallelFor<Rows>(rows, ThreadCount(rows, rows * WC), [&](int64_t r, Rows& s) {
    const int64_t h = r % g.H, d = r / g.H % g.D, b = r / (g.H * g.D);
    GatherOverlapRowBf16(covers.Rows(g, d, h, s.off, s.tap),
                         idx + b * out_batch, go + b * out_batch, g.W,
                         dx + r * WC);
  });
}
#endif  // POOL3D_OVERLAP_GATHER

#define POOL3D_INSTANTIATE(T)                                       \
  template void FromIndicesNdhwcGather<T>(const Geom&, const T::M*, \
                                          const int16_t*, T::M*);
POOL3D_INSTANTIATE(F32T)
POOL3D_INSTANTIATE(BF16T)
POOL3D_INSTANTIATE(F16T)
#undef POOL3D_INSTANTIATE

}  // namespace pool3d
