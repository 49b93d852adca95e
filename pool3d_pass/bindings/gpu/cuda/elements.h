// The CUDA kernels' work per element, as __host__ __device__ functions.
//
// Each function computes one element of one result, exactly as
// docs/contract.md defines it, from the selection and window-geometry rules
// the CPU kernels use (cpu/kernels/common: WindowFirstMax, WindowFirstEqual,
// CoveringWindows, TapOf, the element types). kernels.cu runs them one
// thread per element; tests/kernels/test_cuda_elements.py compiles them for
// the host and compares every element with the CPU kernels.
//
// I is the offset type: int32_t where every tensor of the call has fewer than
// 2^31 elements (less the grid's stride, see kernels.cu), else int64_t.
#ifndef POOL3D_GPU_CUDA_ELEMENTS_H_
#define POOL3D_GPU_CUDA_ELEMENTS_H_

#include <cstdint>

#include "common/element_types.h"
#include "common/geometry.h"
#include "common/hd.h"
#include "common/window_scan.h"

namespace pool3d {
namespace gpu {

// One call's geometry in the offset type I, with both layouts' strides.
// Field names follow Geom (the shared rules read kD, D, ... from either).
template <class I>
struct DevGeom {
  I B, C, D, H, W, Do, Ho, Wo;
  I kD, kH, kW, sD, sH, sW, pD, pH, pW;
  bool in_cl, out_cl;
  I xs[5], ys[5];  // element strides (b, c, d, h, w) of input and output
  I in_size, out_size;
};

template <class I>
inline DevGeom<I> MakeDevGeom(const Geom& g) {
  DevGeom<I> d;
  d.B = I(g.B); d.C = I(g.C);
  d.D = I(g.D); d.H = I(g.H); d.W = I(g.W);
  d.Do = I(g.Do); d.Ho = I(g.Ho); d.Wo = I(g.Wo);
  d.kD = I(g.kD); d.kH = I(g.kH); d.kW = I(g.kW);
  d.sD = I(g.sD); d.sH = I(g.sH); d.sW = I(g.sW);
  d.pD = I(g.pD); d.pH = I(g.pH); d.pW = I(g.pW);
  d.in_cl = g.in_cl; d.out_cl = g.out_cl;
  LayoutStrides<I>(g.in_cl, d.C, d.D, d.H, d.W, d.xs);
  LayoutStrides<I>(g.out_cl, d.C, d.Do, d.Ho, d.Wo, d.ys);
  d.in_size = d.B * d.C * d.D * d.H * d.W;
  d.out_size = d.B * d.C * d.Do * d.Ho * d.Wo;
  return d;
}

// (n, c, d, h, w) of flat position i of a tensor in layout cl with C
// channels and spatial extents (sd, sh, sw).
template <class I>
POOL3D_HD inline void Decode(I i, bool cl, I C, I sd, I sh, I sw, I* n, I* c,
                             I* d, I* h, I* w) {
  if (cl) {
    *c = i % C; i /= C;
    *w = i % sw; i /= sw;
    *h = i % sh; i /= sh;
    *d = i % sd; *n = i / sd;
  } else {
    *w = i % sw; i /= sw;
    *h = i % sh; i /= sh;
    *d = i % sd; i /= sd;
    *c = i % C; *n = i / C;
  }
}

// Output element o (output layout order): the window's maximum into y[o]
// and its selected tap into idx[o] (either may be null).
template <class T, class I>
POOL3D_HD inline void ForwardElement(const DevGeom<I>& g,
                                     const typename T::M* x,
                                     typename T::M* y, int16_t* idx, I o) {
  I n, c, od, oh, ow;
  Decode<I>(o, g.out_cl, g.C, g.Do, g.Ho, g.Wo, &n, &c, &od, &oh, &ow);
  typename T::M m;
  int32_t tap;
  WindowFirstMax<T>(g, x + n * g.xs[0] + c * g.xs[1], g.xs + 2,
                    od * g.sD - g.pD, oh * g.sH - g.pH, ow * g.sW - g.pW, &m,
                    &tap);
  if (y != nullptr) y[o] = m;
  if (idx != nullptr) idx[o] = int16_t(tap);
}

// Output element o of the recompute backward's selection: the first real
// tap of window o equal to y[o] (-1: none) into idx[o].
template <class T, class I>
POOL3D_HD inline void SelectElement(const DevGeom<I>& g,
                                    const typename T::M* x,
                                    const typename T::M* y, int16_t* idx,
                                    I o) {
  I n, c, od, oh, ow;
  Decode<I>(o, g.out_cl, g.C, g.Do, g.Ho, g.Wo, &n, &c, &od, &oh, &ow);
  idx[o] = int16_t(WindowFirstEqual<T>(
      g, x + n * g.xs[0] + c * g.xs[1], g.xs + 2, od * g.sD - g.pD,
      oh * g.sH - g.pH, ow * g.sW - g.pW, y[o]));
}

// Input element i (input layout order) of the gradient: the sum, in f32 and
// in ascending (od, oh, ow) order (the scatter's order, so the CPU kernels'
// bits), of grad_output over the windows that cover it and whose index names
// its tap; rounded once into dx[i]. A gather: no atomics, each element
// written once by one thread. An index of -1, out of range or naming a tap in
// the padding equals no element's tap, so it selects nothing.
template <class T, class I>
POOL3D_HD inline void GatherElement(const DevGeom<I>& g,
                                    const typename T::M* go,
                                    const int16_t* idx, typename T::M* dx,
                                    I i) {
  I n, c, d, h, w;
  Decode<I>(i, g.in_cl, g.C, g.D, g.H, g.W, &n, &c, &d, &h, &w);
  const I qd = d + g.pD, qh = h + g.pH, qw = w + g.pW;
  I d_lo, d_hi, h_lo, h_hi, w_lo, w_hi;
  CoveringWindows<I>(qd, g.kD, g.sD, g.Do, &d_lo, &d_hi);
  CoveringWindows<I>(qh, g.kH, g.sH, g.Ho, &h_lo, &h_hi);
  CoveringWindows<I>(qw, g.kW, g.sW, g.Wo, &w_lo, &w_hi);
  const I base = n * g.ys[0] + c * g.ys[1];
  float acc = 0.0f;
  for (I od = d_lo; od <= d_hi; ++od)
    for (I oh = h_lo; oh <= h_hi; ++oh) {
      const I row = base + od * g.ys[2] + oh * g.ys[3];
      const I row_tap = TapOf<I>(g, qd - od * g.sD, qh - oh * g.sH, I(0));
      for (I ow = w_lo; ow <= w_hi; ++ow) {
        const I at = row + ow * g.ys[4];
        if (int32_t(idx[at]) == int32_t(row_tap + (qw - ow * g.sW)))
          acc += T::ToF32(go[at]);
      }
    }
  dx[i] = T::FromF32(acc);
}

}  // namespace gpu
}  // namespace pool3d

#endif  // POOL3D_GPU_CUDA_ELEMENTS_H_
