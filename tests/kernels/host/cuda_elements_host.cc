// The CUDA kernels' per-element work (pool3d_pass/bindings/gpu/cuda/elements.h)
// compiled for the host: tests/kernels/test_cuda_elements.py runs it over
// every element and compares with the CPU kernels. POOL3D_HD is empty here,
// so this is the same source the device code is compiled from.
#include <cstdint>

#include "elements.h"

namespace {

using pool3d::Geom;
using pool3d::gpu::DevGeom;

template <class T, class I>
void Run(int kind, const DevGeom<I>& g, const void* a, const void* b,
         void* out0, void* out1) {
  using M = typename T::M;
  switch (kind) {
    case 0:  // forward: x -> (y, indices)
    case 1:  // forward_output: x -> y
      for (I o = 0; o < g.out_size; ++o)
        pool3d::gpu::ForwardElement<T, I>(g, static_cast<const M*>(a),
                                          static_cast<M*>(out0),
                                          kind == 0 ? static_cast<int16_t*>(out1)
                                                    : nullptr,
                                          o);
      break;
    case 2:  // indices only: x -> indices (backward_from_input's first half)
      for (I o = 0; o < g.out_size; ++o)
        pool3d::gpu::ForwardElement<T, I>(g, static_cast<const M*>(a), nullptr,
                                          static_cast<int16_t*>(out1), o);
      break;
    case 3:  // select: (x, y) -> indices
      for (I o = 0; o < g.out_size; ++o)
        pool3d::gpu::SelectElement<T, I>(g, static_cast<const M*>(a),
                                         static_cast<const M*>(b),
                                         static_cast<int16_t*>(out1), o);
      break;
    case 4:  // gather: (grad_output, indices) -> grad_input
      for (I i = 0; i < g.in_size; ++i)
        pool3d::gpu::GatherElement<T, I>(g, static_cast<const M*>(a),
                                         static_cast<const int16_t*>(b),
                                         static_cast<M*>(out0), i);
      break;
  }
}

template <class I>
void Dispatch(int kind, int dtype, const Geom& g, const void* a, const void* b,
              void* out0, void* out1) {
  const DevGeom<I> d = pool3d::gpu::MakeDevGeom<I>(g);
  if (dtype == 0) Run<pool3d::F32T, I>(kind, d, a, b, out0, out1);
  if (dtype == 1) Run<pool3d::BF16T, I>(kind, d, a, b, out0, out1);
  if (dtype == 2) Run<pool3d::F16T, I>(kind, d, a, b, out0, out1);
}

}  // namespace

// dims: B, C, D, H, W; ksp: kernel_size, stride, padding (3 each);
// dtype 0 f32, 1 bf16, 2 f16; wide: int64 offsets instead of int32.
extern "C" void pool3d_elements_run(int kind, int dtype, int wide,
                                    const int64_t* dims, const int64_t* ksp,
                                    int in_cl, int out_cl, const void* a,
                                    const void* b, void* out0, void* out1) {
  Geom g{};
  g.B = dims[0]; g.C = dims[1]; g.D = dims[2]; g.H = dims[3]; g.W = dims[4];
  g.kD = ksp[0]; g.kH = ksp[1]; g.kW = ksp[2];
  g.sD = ksp[3]; g.sH = ksp[4]; g.sW = ksp[5];
  g.pD = ksp[6]; g.pH = ksp[7]; g.pW = ksp[8];
  g.Do = (g.D + 2 * g.pD - g.kD) / g.sD + 1;
  g.Ho = (g.H + 2 * g.pH - g.kH) / g.sH + 1;
  g.Wo = (g.W + 2 * g.pW - g.kW) / g.sW + 1;
  g.in_cl = in_cl != 0;
  g.out_cl = out_cl != 0;
  if (wide) {
    Dispatch<int64_t>(kind, dtype, g, a, b, out0, out1);
  } else {
    Dispatch<int32_t>(kind, dtype, g, a, b, out0, out1);
  }
}
