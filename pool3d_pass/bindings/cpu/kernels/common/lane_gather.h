// The gather formulation of backward_from_indices where windows do not
// overlap, with lanes across contiguous elements (the channels of one
// channels-last input pixel): each input element reads the one window that
// covers it and takes that window's grad_output where the window's index
// names the element's own tap, else +0. A window whose index is -1, out of
// range or a padding tap matches no real element: it selects nothing, and no
// write can go out of bounds. Every input element is written exactly once,
// in the element type: no zeroing pass, no accumulator plane, no rounding.
// Windows that overlap: common/overlap_gather.h.
#ifndef POOL3D_KERNELS_COMMON_LANE_GATHER_H_
#define POOL3D_KERNELS_COMMON_LANE_GATHER_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "first_max.h"
#include "shared_kernels/element_types.h"
#include "shared_kernels/geometry.h"

namespace pool3d {

// Per position of one axis: the window covering it and its tap, or -1 (no
// window covers it).
struct AxisOwner {
  std::vector<int64_t> o, t;
  AxisOwner(int64_t n, int64_t k, int64_t s, int64_t p, int64_t n_out)
      : o(n, -1), t(n, -1) {
    for (int64_t oo = 0; oo < n_out; ++oo)
      for (int64_t tt = 0; tt < k; ++tt) {
        const int64_t i = oo * s - p + tt;
        if (i >= 0 && i < n) o[i] = oo, t[i] = tt;
      }
  }
};

// The owners along D, H and W of a geometry whose windows do not overlap.
struct NdhwcOwners {
  AxisOwner d, h, w;
  explicit NdhwcOwners(const Geom& g)
      : d(g.D, g.kD, g.sD, g.pD, g.Do), h(g.H, g.kH, g.sH, g.pH, g.Ho),
        w(g.W, g.kW, g.sW, g.pW, g.Wo) {}
  // Whether some window covers input row (d, h).
  bool Covers(int64_t d_, int64_t h_) const { return d.o[d_] >= 0 && h.o[h_] >= 0; }
  // The first tap number of row (d, h) in its window: (td * kH + th) * kW.
  int64_t RowTap(const Geom& g, int64_t d_, int64_t h_) const {
    return (d.t[d_] * g.kH + h.t[h_]) * g.kW;
  }
};

// One input row of W pixels of n lanes: pixel w takes lane c of window
// o[w] (idx and go: that output row) where its index is tap t0 + t[w], else
// +0 (0 + g: +0 for -0); pixels with o[w] < 0 get +0. Lanes go in 32-byte
// vectors (8 f32 or 16 half lanes; the portable clone splits each into two
// SSE2 halves); when n is not a multiple of a vector, one more vector ends
// at lane n, overlapping the one before and writing the same values there;
// fewer lanes than a vector take the scalar loop.
template <class T>
POOL3D_HOT void GatherRowLanes(const int64_t* __restrict o,
                               const int64_t* __restrict t, int64_t W,
                               int64_t n, int64_t t0,
                               const int16_t* __restrict idx,
                               const typename T::M* __restrict go,
                               typename T::M* __restrict out) {
  using M = typename T::M;
  constexpr int64_t L = 32 / sizeof(M);
  typedef M VM __attribute__((vector_size(32)));
  typedef int16_t VIdx __attribute__((vector_size(2 * L)));
  typedef std::make_signed_t<M> SM;
  typedef SM VS __attribute__((vector_size(32)));
  for (int64_t w = 0; w < W; ++w, out += n) {
    if (o[w] < 0) {
      std::memset(static_cast<void*>(out), 0, sizeof(M) * n);
      continue;
    }
    const int16_t tap = int16_t(t0 + t[w]);
    const int16_t* __restrict id = idx + o[w] * n;
    const M* __restrict g = go + o[w] * n;
    if (n < L) {
      for (int64_t c = 0; c < n; ++c) {
        const M v = g[c];
        const M keep = M(-M(id[c] == tap)) & M(-M((v & T::kAbs) != 0));
        out[c] = M(v & keep);
      }
      continue;
    }
    auto lanes = [&](int64_t c) {
      VIdx iv;
      VM v;
      std::memcpy(&iv, id + c, sizeof iv);
      std::memcpy(&v, g + c, sizeof v);
      const VS match = __builtin_convertvector(iv == tap, VS);
      const VM r = v & VM(match) & VM((v & T::kAbs) != 0);
      std::memcpy(out + c, &r, sizeof r);
    };
    int64_t c = 0;
    for (; c + L <= n; c += L) lanes(c);
    if (c < n) lanes(n - L);
  }
}

// Input row (d, h): W pixels of C lanes from the output row of the windows
// that cover it (idx: that row's indices; go: its gradients); t0 is
// NdhwcOwners::RowTap. Positions no window covers along W get +0.
template <class T>
void GatherRowNdhwc(const AxisOwner& ow, int64_t t0, int64_t W, int64_t C,
                 const int16_t* idx, const typename T::M* go,
                 typename T::M* out) {
  GatherRowLanes<T>(ow.o.data(), ow.t.data(), W, C, t0, idx, go, out);
}

// dx's input rows (b, d, h) that no window covers (k < s, or past the last
// window): +0. Rows are W * C elements.
template <class T>
void ZeroUncoveredRowsNdhwc(const Geom& g, const NdhwcOwners& own,
                         typename T::M* dx) {
  const int64_t row = g.W * g.C;
  for (int64_t b = 0; b < g.B; ++b)
    for (int64_t d = 0; d < g.D; ++d)
      for (int64_t h = 0; h < g.H; ++h)
        if (!own.Covers(d, h))
          std::memset(static_cast<void*>(dx + ((b * g.D + d) * g.H + h) * row),
                      0, sizeof(typename T::M) * row);
}

}  // namespace pool3d

#endif  // POOL3D_KERNELS_COMMON_LANE_GATHER_H_
