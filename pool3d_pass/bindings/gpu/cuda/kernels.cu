// The pool3d custom calls as CUDA kernels behind XLA typed-FFI handlers
// (platform CUDA), registered under the contract's target names
// (docs/contract.md, pool3d_pass.contract.TARGETS) by
// pool3d_pass/bindings/gpu/cuda_library.py.
//
// The structure follows JAX's FFI CUDA example
// (https://github.com/jax-ml/jax/blob/main/examples/ffi/src/jax_ffi_example/cuda_examples.cu):
// each handler takes the CUDA stream from the FFI context
// (PlatformStream<cudaStream_t>), validates its operands and attributes with
// the CPU binding's checks (cpu/kernels/common/validate.h: the same errors),
// and launches on that stream.
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
#include <exception>
#include <new>
#include <string>
#include <string_view>

#include "common/validate.h"
#include "elements.h"
#include "kernels.h"
#include "xla/ffi/api/ffi.h"

namespace pool3d {
namespace gpu {
namespace {

namespace ffi = xla::ffi;

constexpr const char* kBackward = "pool3d.max_pooling_3d_backward";
constexpr const char* kForward = "pool3d.max_pooling_3d_forward";
constexpr const char* kForwardOutput = "pool3d.max_pooling_3d_forward_output";
constexpr const char* kFromIndices =
    "pool3d.max_pooling_3d_backward_from_indices";
constexpr const char* kFromInput = "pool3d.max_pooling_3d_backward_from_input";

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

// Calls fn(T{}) for the element type t (one dispatch for every handler).
template <class Fn>
void ForElementType(ElementType t, Fn fn) {
  switch (t) {
    case ElementType::kF32: fn(F32T{}); break;
    case ElementType::kBF16: fn(BF16T{}); break;
    case ElementType::kF16: fn(F16T{}); break;
  }
}

// Calls fn(I{}) with the offset type g needs.
template <class Fn>
void ForOffsetType(const Geom& g, Fn fn) {
  if (NeedsWideOffsets(g)) {
    fn(int64_t{});
  } else {
    fn(int32_t{});
  }
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
  ForElementType(t, [&](auto tag) {
    using T = decltype(tag);
    using M = typename T::M;
    ForOffsetType(g, [&](auto itag) {
      using I = decltype(itag);
      const DevGeom<I> d = MakeDevGeom<I>(g);
      pool3d_window<T, I><<<Blocks(g.B * g.C * g.Do * g.Ho * g.Wo), kThreads,
                            0, s>>>(d, static_cast<const M*>(x),
                                    static_cast<M*>(y), idx);
    });
  });
}

void LaunchSelect(cudaStream_t s, const Geom& g, ElementType t, const void* x,
                  const void* y, int16_t* idx) {
  ForElementType(t, [&](auto tag) {
    using T = decltype(tag);
    using M = typename T::M;
    ForOffsetType(g, [&](auto itag) {
      using I = decltype(itag);
      const DevGeom<I> d = MakeDevGeom<I>(g);
      pool3d_select<T, I><<<Blocks(g.B * g.C * g.Do * g.Ho * g.Wo), kThreads,
                            0, s>>>(d, static_cast<const M*>(x),
                                    static_cast<const M*>(y), idx);
    });
  });
}

void LaunchGather(cudaStream_t s, const Geom& g, ElementType t, const void* go,
                  const int16_t* idx, void* dx) {
  ForElementType(t, [&](auto tag) {
    using T = decltype(tag);
    using M = typename T::M;
    ForOffsetType(g, [&](auto itag) {
      using I = decltype(itag);
      const DevGeom<I> d = MakeDevGeom<I>(g);
      pool3d_gather<T, I><<<Blocks(g.B * g.C * g.D * g.H * g.W), kThreads, 0,
                            s>>>(d, static_cast<const M*>(go), idx,
                                 static_cast<M*>(dx));
    });
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

// Runs fn(), turning any C++ exception into an error naming the target.
template <class Fn>
ffi::Error Guarded(const char* target, Fn fn) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return ffi::Error::Internal(std::string(target) + ": out of host memory");
  } catch (const std::exception& e) {
    return ffi::Error::Internal(std::string(target) + ": " + e.what());
  } catch (...) {
    return ffi::Error::Internal(std::string(target) + ": unknown C++ exception");
  }
}

ffi::Error Backward(cudaStream_t stream, ffi::ScratchAllocator& scratch,
                    ffi::AnyBuffer grad_output, ffi::AnyBuffer input,
                    ffi::AnyBuffer output,
                    ffi::Result<ffi::AnyBuffer> grad_input, PoolAttrs a) {
  const char* tg = kBackward;
  ElementType t;
  if (auto e = CheckFloatOperands(tg, {"input", &input},
                                  {{"grad_output", &grad_output},
                                   {"output", &output},
                                   {"result (grad_input)", &*grad_input}},
                                  &t);
      e.failure())
    return e;
  Geom g{};
  if (auto e = CheckAttributes(tg, a, &g); e.failure()) return e;
  auto in = input.dimensions();
  if (auto e = CheckSameShape(tg, {"result", &*grad_input}, in, "input");
      e.failure())
    return e;
  if (auto e = CheckSameShape(tg, {"output", &output},
                              grad_output.dimensions(), "grad_output");
      e.failure())
    return e;
  if (auto e = SetInputShape(tg, "input", in, a, &g); e.failure()) return e;
  if (auto e = CheckOutputShape(tg, {"grad_output", &grad_output}, in, a, g);
      e.failure())
    return e;
  if (input.element_count() == 0) return ffi::Error::Success();
  int16_t* idx = IndexScratch(scratch, g);
  if (idx == nullptr) return NoScratch(tg, g);
  LaunchSelect(stream, g, t, input.untyped_data(), output.untyped_data(),
               idx);
  LaunchGather(stream, g, t, grad_output.untyped_data(), idx,
               grad_input->untyped_data());
  return Launched(tg);
}

ffi::Error Forward(cudaStream_t stream, ffi::AnyBuffer input,
                   ffi::Result<ffi::AnyBuffer> output,
                   ffi::Result<ffi::AnyBuffer> indices, PoolAttrs a) {
  const char* tg = kForward;
  ElementType t;
  if (auto e = CheckFloatOperands(tg, {"input", &input},
                                  {{"result 0 (output)", &*output}}, &t);
      e.failure())
    return e;
  if (auto e = CheckOperand(tg, {"result 1 (indices)", &*indices},
                            ffi::DataType::S16);
      e.failure())
    return e;
  Geom g{};
  if (auto e = CheckAttributes(tg, a, &g); e.failure()) return e;
  auto in = input.dimensions();
  if (auto e = SetInputShape(tg, "input", in, a, &g); e.failure()) return e;
  if (auto e = CheckOutputShape(tg, {"result 0 (output)", &*output}, in, a, g);
      e.failure())
    return e;
  if (auto e =
          CheckOutputShape(tg, {"result 1 (indices)", &*indices}, in, a, g);
      e.failure())
    return e;
  if (input.element_count() == 0) return ffi::Error::Success();
  LaunchWindow(stream, g, t, input.untyped_data(), output->untyped_data(),
               static_cast<int16_t*>(indices->untyped_data()));
  return Launched(tg);
}

ffi::Error ForwardOutput(cudaStream_t stream, ffi::AnyBuffer input,
                         ffi::Result<ffi::AnyBuffer> output, PoolAttrs a) {
  const char* tg = kForwardOutput;
  ElementType t;
  if (auto e = CheckFloatOperands(tg, {"input", &input},
                                  {{"result (output)", &*output}}, &t);
      e.failure())
    return e;
  Geom g{};
  if (auto e = CheckAttributes(tg, a, &g); e.failure()) return e;
  auto in = input.dimensions();
  if (auto e = SetInputShape(tg, "input", in, a, &g); e.failure()) return e;
  if (auto e = CheckOutputShape(tg, {"result (output)", &*output}, in, a, g);
      e.failure())
    return e;
  if (input.element_count() == 0) return ffi::Error::Success();
  LaunchWindow(stream, g, t, input.untyped_data(), output->untyped_data(),
               nullptr);
  return Launched(tg);
}

ffi::Error FromIndices(cudaStream_t stream, ffi::AnyBuffer grad_output,
                       ffi::AnyBuffer indices,
                       ffi::Result<ffi::AnyBuffer> grad_input, PoolAttrs a) {
  const char* tg = kFromIndices;
  ElementType t;
  if (auto e = CheckFloatOperands(tg, {"grad_output", &grad_output},
                                  {{"result (grad_input)", &*grad_input}}, &t);
      e.failure())
    return e;
  if (auto e = CheckOperand(tg, {"indices", &indices}, ffi::DataType::S16);
      e.failure())
    return e;
  Geom g{};
  if (auto e = CheckAttributes(tg, a, &g); e.failure()) return e;
  auto in = grad_input->dimensions();
  if (auto e = SetInputShape(tg, "result (grad_input)", in, a, &g);
      e.failure())
    return e;
  if (auto e = CheckOutputShape(tg, {"grad_output", &grad_output}, in, a, g);
      e.failure())
    return e;
  if (auto e = CheckSameShape(tg, {"indices", &indices},
                              grad_output.dimensions(), "grad_output");
      e.failure())
    return e;
  if (grad_input->element_count() == 0) return ffi::Error::Success();
  LaunchGather(stream, g, t, grad_output.untyped_data(),
               static_cast<const int16_t*>(indices.untyped_data()),
               grad_input->untyped_data());
  return Launched(tg);
}

ffi::Error FromInput(cudaStream_t stream, ffi::ScratchAllocator& scratch,
                     ffi::AnyBuffer grad_output, ffi::AnyBuffer input,
                     ffi::Result<ffi::AnyBuffer> grad_input, PoolAttrs a) {
  const char* tg = kFromInput;
  ElementType t;
  if (auto e = CheckFloatOperands(tg, {"input", &input},
                                  {{"grad_output", &grad_output},
                                   {"result (grad_input)", &*grad_input}},
                                  &t);
      e.failure())
    return e;
  Geom g{};
  if (auto e = CheckAttributes(tg, a, &g); e.failure()) return e;
  auto in = input.dimensions();
  if (auto e = CheckSameShape(tg, {"result", &*grad_input}, in, "input");
      e.failure())
    return e;
  if (auto e = SetInputShape(tg, "input", in, a, &g); e.failure()) return e;
  if (auto e = CheckOutputShape(tg, {"grad_output", &grad_output}, in, a, g);
      e.failure())
    return e;
  if (input.element_count() == 0) return ffi::Error::Success();
  int16_t* idx = IndexScratch(scratch, g);
  if (idx == nullptr) return NoScratch(tg, g);
  LaunchWindow(stream, g, t, input.untyped_data(), nullptr, idx);
  LaunchGather(stream, g, t, grad_output.untyped_data(), idx,
               grad_input->untyped_data());
  return Launched(tg);
}

#define POOL3D_ATTR_PARAMS                                               \
  ffi::Span<const int64_t> kernel_size, ffi::Span<const int64_t> stride, \
      ffi::Span<const int64_t> padding, std::string_view data_format,    \
      std::string_view output_format
#define POOL3D_ATTR_ARGS \
  PoolAttrs { kernel_size, stride, padding, data_format, output_format }

}  // namespace

ffi::Error BackwardImpl(cudaStream_t stream, ffi::ScratchAllocator scratch,
                        ffi::AnyBuffer grad_output, ffi::AnyBuffer input,
                        ffi::AnyBuffer output,
                        ffi::Result<ffi::AnyBuffer> grad_input,
                        POOL3D_ATTR_PARAMS) {
  return Guarded(kBackward, [&] {
    return Backward(stream, scratch, grad_output, input, output, grad_input,
                    POOL3D_ATTR_ARGS);
  });
}

ffi::Error ForwardImpl(cudaStream_t stream, ffi::AnyBuffer input,
                       ffi::Result<ffi::AnyBuffer> output,
                       ffi::Result<ffi::AnyBuffer> indices,
                       POOL3D_ATTR_PARAMS) {
  return Guarded(kForward, [&] {
    return Forward(stream, input, output, indices, POOL3D_ATTR_ARGS);
  });
}

ffi::Error ForwardOutputImpl(cudaStream_t stream, ffi::AnyBuffer input,
                             ffi::Result<ffi::AnyBuffer> output,
                             POOL3D_ATTR_PARAMS) {
  return Guarded(kForwardOutput, [&] {
    return ForwardOutput(stream, input, output, POOL3D_ATTR_ARGS);
  });
}

ffi::Error FromIndicesImpl(cudaStream_t stream, ffi::AnyBuffer grad_output,
                           ffi::AnyBuffer indices,
                           ffi::Result<ffi::AnyBuffer> grad_input,
                           POOL3D_ATTR_PARAMS) {
  return Guarded(kFromIndices, [&] {
    return FromIndices(stream, grad_output, indices, grad_input,
                       POOL3D_ATTR_ARGS);
  });
}

ffi::Error FromInputImpl(cudaStream_t stream, ffi::ScratchAllocator scratch,
                         ffi::AnyBuffer grad_output, ffi::AnyBuffer input,
                         ffi::Result<ffi::AnyBuffer> grad_input,
                         POOL3D_ATTR_PARAMS) {
  return Guarded(kFromInput, [&] {
    return FromInput(stream, scratch, grad_output, input, grad_input,
                     POOL3D_ATTR_ARGS);
  });
}

}  // namespace gpu
}  // namespace pool3d

// Every target takes the same five attributes.
#define POOL3D_ATTRS(binding)                                \
  binding.Attr<xla::ffi::Span<const int64_t>>("kernel_size") \
      .Attr<xla::ffi::Span<const int64_t>>("stride")         \
      .Attr<xla::ffi::Span<const int64_t>>("padding")        \
      .Attr<std::string_view>("data_format")                 \
      .Attr<std::string_view>("output_format")
#define POOL3D_STREAM \
  xla::ffi::Ffi::Bind().Ctx<xla::ffi::PlatformStream<cudaStream_t>>()

// The handler symbols are the library's only exports (it is built with
// -fvisibility=hidden; cuda_library.py looks them up with ctypes).
#pragma GCC visibility push(default)

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    Pool3dCudaMaxPooling3dBackward, pool3d::gpu::BackwardImpl,
    POOL3D_ATTRS(POOL3D_STREAM.Ctx<xla::ffi::ScratchAllocator>()
                     .Arg<xla::ffi::AnyBuffer>()     // grad_output
                     .Arg<xla::ffi::AnyBuffer>()     // input
                     .Arg<xla::ffi::AnyBuffer>()     // output
                     .Ret<xla::ffi::AnyBuffer>()));  // grad_input

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    Pool3dCudaMaxPooling3dForward, pool3d::gpu::ForwardImpl,
    POOL3D_ATTRS(POOL3D_STREAM.Arg<xla::ffi::AnyBuffer>()  // input
                     .Ret<xla::ffi::AnyBuffer>()           // output
                     .Ret<xla::ffi::AnyBuffer>()));        // indices

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    Pool3dCudaMaxPooling3dForwardOutput, pool3d::gpu::ForwardOutputImpl,
    POOL3D_ATTRS(POOL3D_STREAM.Arg<xla::ffi::AnyBuffer>()  // input
                     .Ret<xla::ffi::AnyBuffer>()));        // output

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    Pool3dCudaMaxPooling3dBackwardFromIndices, pool3d::gpu::FromIndicesImpl,
    POOL3D_ATTRS(POOL3D_STREAM.Arg<xla::ffi::AnyBuffer>()  // grad_output
                     .Arg<xla::ffi::AnyBuffer>()           // indices
                     .Ret<xla::ffi::AnyBuffer>()));        // grad_input

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    Pool3dCudaMaxPooling3dBackwardFromInput, pool3d::gpu::FromInputImpl,
    POOL3D_ATTRS(POOL3D_STREAM.Ctx<xla::ffi::ScratchAllocator>()
                     .Arg<xla::ffi::AnyBuffer>()     // grad_output
                     .Arg<xla::ffi::AnyBuffer>()     // input
                     .Ret<xla::ffi::AnyBuffer>()));  // grad_input

#pragma GCC visibility pop
