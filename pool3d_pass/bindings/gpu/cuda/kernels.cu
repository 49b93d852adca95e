// The pool3d custom calls as CUDA kernels behind XLA typed-FFI handlers
// (platform CUDA), registered under the contract's target names
// (docs/contract.md, pool3d_pass.contract.TARGETS) by
// pool3d_pass/bindings/gpu/cuda_library.py.
//
// The structure follows JAX's FFI CUDA example
// (https://github.com/jax-ml/jax/blob/main/examples/ffi/src/jax_ffi_example/cuda_examples.cu):
// each handler takes the CUDA stream from the FFI context
// (PlatformStream<cudaStream_t>), decodes and validates its call with the
// CPU handlers' code (cpu/kernels/common/ffi_calls.h: the same errors), and
// launches on that stream.
//
// Kernels (one thread per result element, grid-stride loops; elements.h):
//   pool3d_window  forward (y and indices), forward_output (y), or the
//                  indices alone (backward_from_input's first half)
//   pool3d_select  backward's selection: the first tap equal to the given y
//   pool3d_gather  the gradient from indices: each input element sums the
//                  windows that cover it (no atomics, deterministic)
// backward and backward_from_input run a window/select kernel into int16
// indices in XLA's scratch memory (2 bytes per window), then the gather.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "common/dispatch.h"
#include "common/ffi_calls.h"
#include "elements.h"
#include "kernels.h"
#include "xla/ffi/api/ffi.h"

namespace pool3d {
namespace gpu {
namespace {

namespace ffi = xla::ffi;

// Threads per block, and the most blocks one launch uses: the grid-stride
// loops cover any size, and gridDim.x stays far below CUDA's 2^31 - 1.
constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = int64_t{1} << 16;
constexpr int64_t kMaxStride = kThreads * kMaxBlocks;

// int32 offsets where every flat position plus one grid stride stays below
// 2^31 (the loop's last increment must not overflow), else int64.
bool NeedsWideOffsets(const Geom& g) {
  const int64_t in = g.B * g.C * g.D * g.H * g.W;
  const int64_t out = g.B * g.C * g.Do * g.Ho * g.Wo;
  return std::max(in, out) + kMaxStride > int64_t{INT32_MAX};
}

int Blocks(int64_t n) {
  return int(std::min<int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks));
}

// No __launch_bounds__: with it ptxas capped the f16 int32 gather at 32
// registers and spilled; without it every kernel fits 256 threads a block
// (at most 72 registers, reported by `-Xptxas -v`) with no spill.
template <class T, class I>
__global__ void pool3d_window(DevGeom<I> g, const typename T::M* __restrict__ x,
                  typename T::M* __restrict__ y, int16_t* __restrict__ idx) {
  for (I o = I(blockIdx.x) * kThreads + I(threadIdx.x); o < g.out_size;
       o += I(gridDim.x) * kThreads)
    ForwardElement<T, I>(g, x, y, idx, o);
}

template <class T, class I>
__global__ void pool3d_select(DevGeom<I> g, const typename T::M* __restrict__ x,
                  const typename T::M* __restrict__ y,
                  int16_t* __restrict__ idx) {
  for (I o = I(blockIdx.x) * kThreads + I(threadIdx.x); o < g.out_size;
       o += I(gridDim.x) * kThreads)
    SelectElement<T, I>(g, x, y, idx, o);
}

template <class T, class I>
__global__ void pool3d_gather(DevGeom<I> g, const typename T::M* __restrict__ go,
                  const int16_t* __restrict__ idx,
                  typename T::M* __restrict__ dx) {
  for (I i = I(blockIdx.x) * kThreads + I(threadIdx.x); i < g.in_size;
       i += I(gridDim.x) * kThreads)
    GatherElement<T, I>(g, go, idx, dx, i);
}

// Calls fn(T{}, I{}) for the element type t and the offset type g needs
// (one dispatch for every launch).
template <class Fn>
void ForTypes(ElementType t, const Geom& g, Fn fn) {
  ForElementType(t, [&](auto tag) {
    if (NeedsWideOffsets(g)) {
      fn(tag, int64_t{});
    } else {
      fn(tag, int32_t{});
    }
  });
}

// What the launches below left in the stream's error state.
ffi::Error Launched(const char* target) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    return ffi::Error::Internal(std::string(target) + ": CUDA launch failed: " +
                                cudaGetErrorString(e));
  return ffi::Error::Success();
}

void LaunchWindow(cudaStream_t s, const Geom& g, ElementType t, const void* x,
                  void* y, int16_t* idx) {
  ForTypes(t, g, [&](auto tag, auto itag) {
    using T = decltype(tag);
    using I = decltype(itag);
    using M = typename T::M;
    pool3d_window<T, I><<<Blocks(g.B * g.C * g.Do * g.Ho * g.Wo), kThreads, 0,
                          s>>>(MakeDevGeom<I>(g), static_cast<const M*>(x),
                               static_cast<M*>(y), idx);
  });
}

void LaunchSelect(cudaStream_t s, const Geom& g, ElementType t, const void* x,
                  const void* y, int16_t* idx) {
  ForTypes(t, g, [&](auto tag, auto itag) {
    using T = decltype(tag);
    using I = decltype(itag);
    using M = typename T::M;
    pool3d_select<T, I><<<Blocks(g.B * g.C * g.Do * g.Ho * g.Wo), kThreads, 0,
                          s>>>(MakeDevGeom<I>(g), static_cast<const M*>(x),
                               static_cast<const M*>(y), idx);
  });
}

void LaunchGather(cudaStream_t s, const Geom& g, ElementType t, const void* go,
                  const int16_t* idx, void* dx) {
  ForTypes(t, g, [&](auto tag, auto itag) {
    using T = decltype(tag);
    using I = decltype(itag);
    using M = typename T::M;
    pool3d_gather<T, I><<<Blocks(g.B * g.C * g.D * g.H * g.W), kThreads, 0,
                          s>>>(MakeDevGeom<I>(g), static_cast<const M*>(go),
                               idx, static_cast<M*>(dx));
  });
}

// Scratch for one int16 index per window, from XLA's allocator. It is freed
// when the handler returns, before the kernels have run: XLA's device
// allocator is stream-ordered, so work queued later on this stream cannot
// overwrite it early (jaxlib's own GPU solver kernels use their workspace the
// same way). Null: none left.
size_t IndexBytes(const Geom& g);

int16_t* IndexScratch(ffi::ScratchAllocator& scratch, const Geom& g) {
  auto p = scratch.Allocate(IndexBytes(g), 256);
  return p.has_value() ? static_cast<int16_t*>(*p) : nullptr;
}

size_t IndexBytes(const Geom& g) {
  return size_t(g.B * g.C * g.Do * g.Ho * g.Wo) * sizeof(int16_t);
}

ffi::Error NoScratch(const char* target, const Geom& g) {
  return ffi::Error(ffi::ErrorCode::kResourceExhausted,
                    std::string(target) + ": no scratch memory for " +
                        std::to_string(IndexBytes(g)) + " bytes of indices");
}

// std::bad_alloc here is host memory; device scratch is NoScratch.
constexpr const char* kOutOfMemory = "out of host memory";

ffi::Error Backward(cudaStream_t stream, ffi::ScratchAllocator& scratch,
                    ffi::AnyBuffer grad_output, ffi::AnyBuffer input,
                    ffi::AnyBuffer output,
                    ffi::Result<ffi::AnyBuffer> grad_input, PoolAttrs a) {
  Checked c;
  POOL3D_RETURN_IF_FAILED(
      CheckBackward(grad_output, input, output, *grad_input, a, &c));
  if (c.empty) return ffi::Error::Success();
  int16_t* idx = IndexScratch(scratch, c.g);
  if (idx == nullptr) return NoScratch(kBackward, c.g);
  LaunchSelect(stream, c.g, c.t, input.untyped_data(), output.untyped_data(),
               idx);
  LaunchGather(stream, c.g, c.t, grad_output.untyped_data(), idx,
               grad_input->untyped_data());
  return Launched(kBackward);
}

ffi::Error Forward(cudaStream_t stream, ffi::AnyBuffer input,
                   ffi::Result<ffi::AnyBuffer> output,
                   ffi::Result<ffi::AnyBuffer> indices, PoolAttrs a) {
  Checked c;
  POOL3D_RETURN_IF_FAILED(CheckForward(input, *output, *indices, a, &c));
  if (c.empty) return ffi::Error::Success();
  LaunchWindow(stream, c.g, c.t, input.untyped_data(), output->untyped_data(),
               static_cast<int16_t*>(indices->untyped_data()));
  return Launched(kForward);
}

ffi::Error ForwardOutput(cudaStream_t stream, ffi::AnyBuffer input,
                         ffi::Result<ffi::AnyBuffer> output, PoolAttrs a) {
  Checked c;
  POOL3D_RETURN_IF_FAILED(CheckForwardOutput(input, *output, a, &c));
  if (c.empty) return ffi::Error::Success();
  LaunchWindow(stream, c.g, c.t, input.untyped_data(), output->untyped_data(),
               nullptr);
  return Launched(kForwardOutput);
}

ffi::Error FromIndices(cudaStream_t stream, ffi::AnyBuffer grad_output,
                       ffi::AnyBuffer indices,
                       ffi::Result<ffi::AnyBuffer> grad_input, PoolAttrs a) {
  Checked c;
  POOL3D_RETURN_IF_FAILED(
      CheckFromIndices(grad_output, indices, *grad_input, a, &c));
  if (c.empty) return ffi::Error::Success();
  LaunchGather(stream, c.g, c.t, grad_output.untyped_data(),
               static_cast<const int16_t*>(indices.untyped_data()),
               grad_input->untyped_data());
  return Launched(kFromIndices);
}

ffi::Error FromInput(cudaStream_t stream, ffi::ScratchAllocator& scratch,
                     ffi::AnyBuffer grad_output, ffi::AnyBuffer input,
                     ffi::Result<ffi::AnyBuffer> grad_input, PoolAttrs a) {
  Checked c;
  POOL3D_RETURN_IF_FAILED(
      CheckFromInput(grad_output, input, *grad_input, a, &c));
  if (c.empty) return ffi::Error::Success();
  int16_t* idx = IndexScratch(scratch, c.g);
  if (idx == nullptr) return NoScratch(kFromInput, c.g);
  LaunchWindow(stream, c.g, c.t, input.untyped_data(), nullptr, idx);
  LaunchGather(stream, c.g, c.t, grad_output.untyped_data(), idx,
               grad_input->untyped_data());
  return Launched(kFromInput);
}

}  // namespace
}  // namespace gpu
}  // namespace pool3d

#define POOL3D_STREAM \
  xla::ffi::Ffi::Bind().Ctx<xla::ffi::PlatformStream<cudaStream_t>>()
#define POOL3D_HANDLER(call) \
  pool3d::Entry(pool3d::k##call, pool3d::gpu::kOutOfMemory, pool3d::gpu::call)

// The handler symbols are the library's only exports (it is built with
// -fvisibility=hidden; cuda_library.py looks them up with ctypes).
#pragma GCC visibility push(default)

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    Pool3dCudaMaxPooling3dBackward, POOL3D_HANDLER(Backward),
    POOL3D_BIND_BACKWARD(POOL3D_STREAM.Ctx<xla::ffi::ScratchAllocator>()));

XLA_FFI_DEFINE_HANDLER_SYMBOL(Pool3dCudaMaxPooling3dForward,
                              POOL3D_HANDLER(Forward),
                              POOL3D_BIND_FORWARD(POOL3D_STREAM));

XLA_FFI_DEFINE_HANDLER_SYMBOL(Pool3dCudaMaxPooling3dForwardOutput,
                              POOL3D_HANDLER(ForwardOutput),
                              POOL3D_BIND_FORWARD_OUTPUT(POOL3D_STREAM));

XLA_FFI_DEFINE_HANDLER_SYMBOL(Pool3dCudaMaxPooling3dBackwardFromIndices,
                              POOL3D_HANDLER(FromIndices),
                              POOL3D_BIND_FROM_INDICES(POOL3D_STREAM));

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    Pool3dCudaMaxPooling3dBackwardFromInput, POOL3D_HANDLER(FromInput),
    POOL3D_BIND_FROM_INPUT(POOL3D_STREAM.Ctx<xla::ffi::ScratchAllocator>()));

#pragma GCC visibility pop
