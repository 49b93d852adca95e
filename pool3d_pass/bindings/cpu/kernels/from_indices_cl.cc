// backward_from_indices, channels-last, windows that do not overlap, where
// the gather pays (FromIndicesGatherPays, backward_from_indices.cc): by
// gather (common/lane_gather.h). One work item is one input row (b, d, h):
// its W * C elements are written once, in the element type, with no zeroing
// pass, no accumulator and no rounding pass.
//
// Each input position lies in at most one window along each axis (its
// window and tap per axis: ClOwners, -1 for a position no window covers).
// An element takes its window's grad_output (0 + g: +0 for -0) where the
// window's index names the element's own tap, else +0: a window whose index
// is -1, out of range or a padding tap matches nothing.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/element_types.h"
#include "common/geometry.h"
#include "common/lane_gather.h"
#include "common/threading.h"
#include "layouts.h"

namespace pool3d {

template <class T>
void FromIndicesNdhwcGather(const Geom& g, const typename T::M* go,
                            const int16_t* idx, typename T::M* dx) {
  using M = typename T::M;
  const int64_t C = g.C, rows = g.B * g.D * g.H;
  const ClOwners own(g);
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
        GatherRowCl<T>(own.w, own.RowTap(g, d, h), g.W, C, idx + o, go + o, out);
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
