// backward_from_indices, channels-last, windows that do not overlap: by
// gather (common/lane_gather.h). One work item is one input row (b, d, h):
// its W * C elements are written once, in the element type, with no
// zeroing pass, no accumulator and no rounding pass.
//
// Each input position lies in at most one window along each axis (its
// window o and tap t per axis come from a per-call table, -1 for a position
// no window covers). An element takes its window's grad_output (0 + g: +0 for
// -0) where the window's index names the element's own tap, else +0: a
// window whose index is -1, out of range or a padding tap matches nothing.
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
namespace {

// Per position of one axis: the window covering it and its tap, or -1.
struct Owner {
  std::vector<int64_t> o, t;
  Owner(int64_t n, int64_t k, int64_t s, int64_t p, int64_t n_out)
      : o(n, -1), t(n, -1) {
    for (int64_t oo = 0; oo < n_out; ++oo)
      for (int64_t tt = 0; tt < k; ++tt) {
        const int64_t i = oo * s - p + tt;
        if (i >= 0 && i < n) o[i] = oo, t[i] = tt;
      }
  }
};

// A row's pixels with few channels: plain loops (no per-pixel call).
template <class T>
void RowSmallC(const int16_t* __restrict idx, const typename T::M* __restrict go,
               const Owner& ow, int64_t t0, int64_t W, int64_t C,
               typename T::M* __restrict out) {
  using M = typename T::M;
  for (int64_t w = 0; w < W; ++w) {
    M* o = out + w * C;
    if (ow.o[w] < 0) {
      for (int64_t c = 0; c < C; ++c) o[c] = 0;
      continue;
    }
    const int16_t t = int16_t(t0 + ow.t[w]);
    const int16_t* id = idx + ow.o[w] * C;
    const M* g = go + ow.o[w] * C;
    for (int64_t c = 0; c < C; ++c) {
      const M v = g[c];
      o[c] = (id[c] == t && (v & T::kAbs) != 0) ? v : M(0);
    }
  }
}

}  // namespace

template <class T>
void FromIndicesNdhwcGather(const Geom& g, const typename T::M* go,
                            const int16_t* idx, typename T::M* dx) {
  using M = typename T::M;
  const int64_t C = g.C, rows = g.B * g.D * g.H;
  const Owner od(g.D, g.kD, g.sD, g.pD, g.Do), oh(g.H, g.kH, g.sH, g.pH, g.Ho),
      ow(g.W, g.kW, g.sW, g.pW, g.Wo);
  struct None {};
  ParallelFor<None>(
      rows, ThreadCount(rows, rows * g.W * C), [&](int64_t r, None&) {
        const int64_t h = r % g.H, d = r / g.H % g.D, b = r / (g.H * g.D);
        M* out = dx + r * g.W * C;
        if (od.o[d] < 0 || oh.o[h] < 0) {  // a row no window covers
          std::memset(static_cast<void*>(out), 0, sizeof(M) * g.W * C);
          return;
        }
        const int64_t o = ((b * g.Do + od.o[d]) * g.Ho + oh.o[h]) * g.Wo * C;
        const int64_t t0 = (od.t[d] * g.kH + oh.t[h]) * g.kW;
        if (C < 16) return RowSmallC<T>(idx + o, go + o, ow, t0, g.W, C, out);
        for (int64_t w = 0; w < g.W; ++w) {
          if (ow.o[w] < 0) {
            std::memset(static_cast<void*>(out + w * C), 0, sizeof(M) * C);
            continue;
          }
          const int64_t oo = o + ow.o[w] * C;
          GatherOne<T>(idx + oo, go + oo, int16_t(t0 + ow.t[w]), C,
                       out + w * C);
        }
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
