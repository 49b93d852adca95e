// All four kernels for any pair of layouts, by direct tap-by-tap search.
//
// Used when output_format != data_format (the pass never emits that) and for
// geometries whose plane or row offsets do not fit the fast paths' int32.
// One (b, c) plane per work item, f32 accumulator per plane: correct rather
// than fast.
#include <cstdint>
#include <vector>

#include "common/threading.h"
#include "layouts.h"
#include "shared_kernels/element_types.h"
#include "shared_kernels/geometry.h"
#include "shared_kernels/window_scan.h"

namespace pool3d {
namespace {

struct PlaneScratch {
  std::vector<float> acc;
};

// Runs body(p, xs, ys, acc) over the B * C planes, where xs / ys are the
// element strides (b, c, d, h, w) of the input and output layouts and acc is
// a zeroed f32 plane (D * H * W, row-major) when `with_acc`.
template <class Body>
void ForEachPlane(const Geom& g, bool with_acc, Body body) {
  int64_t xs[5], ys[5];
  LayoutStrides(g.in_cl, g.C, g.D, g.H, g.W, xs);
  LayoutStrides(g.out_cl, g.C, g.Do, g.Ho, g.Wo, ys);
  const int64_t planes = g.B * g.C, DHW = g.D * g.H * g.W;
  ParallelFor<PlaneScratch>(
      planes, ThreadCount(planes, planes * DHW),
      [&](int64_t p, PlaneScratch& s) {
        if (with_acc) s.acc.assign(DHW, 0.0f);
        body(p / g.C * xs[0] + p % g.C * xs[1],
             p / g.C * ys[0] + p % g.C * ys[1], xs, ys, s.acc.data());
      });
}

// Visits the windows of a plane in (od, oh, ow) order: fn(d0, h0, w0, oo)
// with the window's origin and its output offset oo within the plane.
template <class Fn>
void ForEachWindow(const Geom& g, const int64_t* ys, Fn fn) {
  for (int64_t od = 0; od < g.Do; ++od)
    for (int64_t oh = 0; oh < g.Ho; ++oh)
      for (int64_t ow = 0; ow < g.Wo; ++ow)
        fn(od * g.sD - g.pD, oh * g.sH - g.pH, ow * g.sW - g.pW,
           od * ys[2] + oh * ys[3] + ow * ys[4]);
}

// Rounds the f32 plane acc into dp (strides xs).
template <class T>
void StorePlane(const Geom& g, const float* acc, const int64_t* xs,
                typename T::M* dp) {
  for (int64_t d = 0; d < g.D; ++d)
    for (int64_t h = 0; h < g.H; ++h)
      for (int64_t w = 0; w < g.W; ++w)
        dp[d * xs[2] + h * xs[3] + w * xs[4]] =
            T::FromF32(acc[(d * g.H + h) * g.W + w]);
}

}  // namespace

template <class T>
void BackwardGeneric(const Geom& g, const typename T::M* x,
                     const typename T::M* y, const typename T::M* go,
                     typename T::M* dx) {
  ForEachPlane(g, true, [&](int64_t xo, int64_t yo, const int64_t* xs,
                            const int64_t* ys, float* acc) {
    ForEachWindow(g, ys, [&](int64_t d0, int64_t h0, int64_t w0, int64_t oo) {
      const int32_t t =
          WindowFirstEqual<T>(g, x + xo, xs + 2, d0, h0, w0, y[yo + oo]);
      int64_t d, h, w;
      if (!SelectedPosition<int64_t>(g, t, d0, h0, w0, &d, &h, &w)) return;
      acc[(d * g.H + h) * g.W + w] += T::ToF32(go[yo + oo]);
    });
    StorePlane<T>(g, acc, xs, dx + xo);
  });
}

template <class T>
void ForwardGeneric(const Geom& g, const typename T::M* x, typename T::M* y,
                    int16_t* idx) {
  ForEachPlane(g, false, [&](int64_t xo, int64_t yo, const int64_t* xs,
                             const int64_t* ys, float*) {
    ForEachWindow(g, ys, [&](int64_t d0, int64_t h0, int64_t w0, int64_t oo) {
      int32_t tap;
      WindowFirstMax<T>(g, x + xo, xs + 2, d0, h0, w0, &y[yo + oo], &tap);
      idx[yo + oo] = int16_t(tap);
    });
  });
}

template <class T>
void ForwardOutputGeneric(const Geom& g, const typename T::M* x,
                          typename T::M* y) {
  ForEachPlane(g, false, [&](int64_t xo, int64_t yo, const int64_t* xs,
                             const int64_t* ys, float*) {
    ForEachWindow(g, ys, [&](int64_t d0, int64_t h0, int64_t w0, int64_t oo) {
      int32_t tap;
      WindowFirstMax<T>(g, x + xo, xs + 2, d0, h0, w0, &y[yo + oo], &tap);
    });
  });
}

template <class T>
void FromIndicesGeneric(const Geom& g, const typename T::M* go,
                        const int16_t* idx, typename T::M* dx) {
  ForEachPlane(g, true, [&](int64_t xo, int64_t yo, const int64_t* xs,
                            const int64_t* ys, float* acc) {
    ForEachWindow(g, ys, [&](int64_t d0, int64_t h0, int64_t w0, int64_t oo) {
      int64_t d, h, w;  // none: no selection (-1), not a tap, or padding
      if (!SelectedPosition<int64_t>(g, idx[yo + oo], d0, h0, w0, &d, &h, &w))
        return;
      acc[(d * g.H + h) * g.W + w] += T::ToF32(go[yo + oo]);
    });
    StorePlane<T>(g, acc, xs, dx + xo);
  });
}

template <class T>
void FromInputGeneric(const Geom& g, const typename T::M* go,
                      const typename T::M* x, typename T::M* dx) {
  ForEachPlane(g, true, [&](int64_t xo, int64_t yo, const int64_t* xs,
                            const int64_t* ys, float* acc) {
    ForEachWindow(g, ys, [&](int64_t d0, int64_t h0, int64_t w0, int64_t oo) {
      typename T::M m;
      int32_t t;
      WindowFirstMax<T>(g, x + xo, xs + 2, d0, h0, w0, &m, &t);
      int64_t d, h, w;
      if (!SelectedPosition<int64_t>(g, t, d0, h0, w0, &d, &h, &w)) return;
      acc[(d * g.H + h) * g.W + w] += T::ToF32(go[yo + oo]);
    });
    StorePlane<T>(g, acc, xs, dx + xo);
  });
}

#define POOL3D_INSTANTIATE(T)                                                 \
  template void BackwardGeneric<T>(const Geom&, const T::M*, const T::M*,     \
                                   const T::M*, T::M*);                       \
  template void ForwardGeneric<T>(const Geom&, const T::M*, T::M*, int16_t*); \
  template void ForwardOutputGeneric<T>(const Geom&, const T::M*, T::M*);     \
  template void FromIndicesGeneric<T>(const Geom&, const T::M*,               \
                                      const int16_t*, T::M*);                 \
  template void FromInputGeneric<T>(const Geom&, const T::M*, const T::M*,    \
                                    T::M*);
POOL3D_INSTANTIATE(F32T)
POOL3D_INSTANTIATE(BF16T)
POOL3D_INSTANTIATE(F16T)
#undef POOL3D_INSTANTIATE

}  // namespace pool3d
