// The pool3d custom calls as CUDA kernels behind XLA typed-FFI handlers
// (platform CUDA), registered under the contract's target names
// (docs/contract.md, pool3d_pass.contract.TARGETS) by
// pool3d_pass/bindings/gpu/cuda/library.py.
//
// The structure follows JAX's FFI CUDA example
// (https://github.com/jax-ml/jax/blob/main/examples/ffi/src/jax_ffi_example/cuda_examples.cu):
// each handler takes the CUDA stream from the FFI context
// (PlatformStream<cudaStream_t>). The handler is the one the CPU handlers use
// too (shared_kernels/ffi_calls.h's Handler: the same decoding, validation and
// errors); this platform's run (Cuda::Run) plans the call's launches
// (launch_plan.h) and runs them on that stream (run_plan.h).
//
// Kernels: one grid-stride loop over units each, the unit's work in units.h:
//   WindowKernel<T, Win, L, V, Mode>  forward, forward_output, the indices of
//                                     backward_from_input (Mode kMax), or
//                                     backward's selection (kSelect)
//   GatherKernel<T, Win, L, V>        the gradient from indices (no atomics)
//   FusedKernel<T, Win, L, V, Mode>   backward_from_input / backward on
//                                     non-overlapping windows: select and
//                                     write dx in one pass
// Where a call needs indices between two kernels (overlapping windows), they
// live in scratch memory from XLA's allocator (the FFI's ScratchAllocator),
// which XLA frees when the handler returns, in order on the call's stream.
// Handlers that never need scratch declare themselves command-buffer
// compatible (XLA may capture them in its CUDA graphs).
//
// Two settings, read at each call (for the device check's variants):
// POOL3D_CUDA_THREADS (threads per block: 64 to 1024, a multiple of 32;
// default 256) and POOL3D_CUDA_VECTOR=0 (the Generic, scalar kernels only).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <mutex>
#include <optional>
#include <string>

#include "launch_plan.h"
#include "run_plan.h"
#include "shared_kernels/dispatch.h"
#include "shared_kernels/ffi_calls.h"
#include "units.h"
#include "xla/ffi/api/ffi.h"

namespace pool3d {
namespace gpu {

template <class Unit, class I, class M>
__device__ __forceinline__ void GridStride(const Launch<I>& g,
                                           const Operands<M>& p) {
  using U = typename std::make_unsigned<I>::type;
  const U stride = U(gridDim.x) * U(blockDim.x);
  for (U u = U(blockIdx.x) * U(blockDim.x) + U(threadIdx.x); u < g.units;
       u += stride)
    Unit::Run(g, p, u);
}

// One kernel name per kind, its unit's template arguments in the name (the
// static model, checks/gpu_model.py, reads them from the machine code).
// Every kernel launches with up to kMaxThreads threads a block: ptxas keeps
// each to 65,536 / kMaxThreads = 128 registers (then two blocks of 256 fit an
// SM) and, with that room, issues a unit's loads before their first use.
constexpr int kMaxThreads = 512;

template <class T, class Win, int L, int V, int Mode>
__global__ void __launch_bounds__(kMaxThreads, 1) WindowKernel(Launch<typename Win::Offset> g,
                             Operands<typename T::M> p) {
  GridStride<WindowUnit<T, Win, L, V, Mode>>(g, p);
}

template <class T, class Win, int L, int V>
__global__ void __launch_bounds__(kMaxThreads, 1) GatherKernel(Launch<typename Win::Offset> g,
                             Operands<typename T::M> p) {
  GridStride<GatherUnit<T, Win, L, V>>(g, p);
}

template <class T, class Win, int L, int V, int Mode>
__global__ void __launch_bounds__(kMaxThreads, 1) FusedKernel(Launch<typename Win::Offset> g,
                            Operands<typename T::M> p) {
  GridStride<FusedUnit<T, Win, L, V, Mode>>(g, p);
}

template <class Unit>
struct KernelOf;
template <class T, class Win, int L, int V, int Mode>
struct KernelOf<WindowUnit<T, Win, L, V, Mode>> {
  static constexpr auto kFn = &WindowKernel<T, Win, L, V, Mode>;
};
template <class T, class Win, int L, int V>
struct KernelOf<GatherUnit<T, Win, L, V>> {
  static constexpr auto kFn = &GatherKernel<T, Win, L, V>;
};
template <class T, class Win, int L, int V, int Mode>
struct KernelOf<FusedUnit<T, Win, L, V, Mode>> {
  static constexpr auto kFn = &FusedKernel<T, Win, L, V, Mode>;
};

// The most threads a block of Unit's kernel can launch with, from its
// attributes (its registers and __launch_bounds__), read once per kernel.
template <class Unit>
cudaError_t MaxThreads(int* max_threads) {
  static cudaFuncAttributes attributes = {};
  static const cudaError_t error = cudaFuncGetAttributes(&attributes, KernelOf<Unit>::kFn);
  *max_threads = attributes.maxThreadsPerBlock;
  return error;
}

// Launches on one stream; the first failed launch's error is kept. A block
// larger than a kernel can launch (POOL3D_CUDA_THREADS above its limit) is
// fitted to the limit (launch_plan.h's FitThreads), with one remark per
// kernel on stderr, so no configuration fails the program for a kernel's
// limits.
struct CudaExec {
  cudaStream_t stream;
  cudaError_t error = cudaSuccess;

  template <Kernel K, class Unit, class I, class M>
  bool Launch(const gpu::Launch<I>& l, const Operands<M>& p, int64_t blocks,
              int threads) {
    if (l.units == 0) return true;
    int max_threads = 0;
    error = MaxThreads<Unit>(&max_threads);
    if (error != cudaSuccess) return false;
    const int fitted = FitThreads(threads, max_threads);
    if (fitted != threads) {
      static std::once_flag said;
      std::call_once(said, [&] {
        std::fprintf(stderr,
                     "pool3d_pass: a CUDA kernel of this call launches at most %d threads a block; "
                     "%d asked (POOL3D_CUDA_THREADS): it runs with %d\n",
                     max_threads, threads, fitted);
      });
      blocks = std::min<int64_t>((int64_t(l.units) + fitted - 1) / fitted, kMaxBlocks);
    }
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(unsigned(blocks));
    cfg.blockDim = dim3(unsigned(fitted));
    cfg.stream = stream;
    // cudaLaunchKernelEx returns this launch's own error (a bad
    // configuration), not one left behind by someone else's kernel.
    error = cudaLaunchKernelEx(&cfg, KernelOf<Unit>::kFn, l, p);
    return error == cudaSuccess;
  }
};

// What the handler knows beyond the Geom (launch_plan.h's PlanOptions): the
// element size, whether every buffer of the call is 16-byte aligned, and the
// two settings.
PlanOptions Options(ElementType t, const CallOperands& ops) {
  PlanOptions o;
  o.elem_bytes = ElementBytes(t);
  const std::initializer_list<const void*> buffers = {ops.x, ops.y_in, ops.go, ops.idx_in, ops.y, ops.idx, ops.dx};
  for (const void* p : buffers)
    if (p != nullptr && reinterpret_cast<uintptr_t>(p) % 16 != 0) o.aligned = false;
  if (const char* v = std::getenv("POOL3D_CUDA_THREADS")) {
    const int n = std::atoi(v);
    if (n >= 64 && n <= 1024 && n % 32 == 0) o.threads = n;
  }
  if (const char* v = std::getenv("POOL3D_CUDA_VECTOR")) o.vector = std::string(v) != "0";
  return o;
}

ffi::Error Failed(const char* target, const char* what, cudaError_t e) {
  return ffi::Error::Internal(std::string(target) + ": " + what + ": " +
                              cudaGetErrorString(e));
}

// Plans a call and runs it on `stream`; the indices between two steps in
// scratch memory from XLA's allocator (the FFI's ScratchAllocator: XLA sees
// it, can plan around it, and frees it when the handler returns, ordered on
// the stream behind these launches; null: a call whose plan never needs any).
ffi::Error Run(cudaStream_t stream, ffi::ScratchAllocator* scratch, Call call, const Checked& c,
               const CallOperands& ops) {
  const char* target = TargetOf(call);
  const CallPlan plan = PlanCall(c.g, call, Options(c.t, ops));
  CudaExec exec{stream};
  auto alloc = [&](size_t bytes) -> void* {
    if (scratch == nullptr) return nullptr;
    const std::optional<void*> memory = scratch->Allocate(bytes, 16);
    return memory.has_value() ? *memory : nullptr;
  };
  switch (RunPlan(exec, alloc, c.g, c.t, plan, ops)) {
    case RunStatus::kOk:
      return ffi::Error::Success();
    case RunStatus::kNoScratch:
      return ffi::Error(ffi::ErrorCode::kResourceExhausted,
                        std::string(target) + ": no device memory from XLA's allocator for " +
                            std::to_string(plan.scratch_bytes) + " bytes of indices");
    case RunStatus::kLaunchFailed:
      break;
  }
  return exec.error != cudaSuccess ? Failed(target, "CUDA launch failed", exec.error)
                                   : ffi::Error::Internal(std::string(target) + ": no kernel for this plan");
}

// The CUDA platform of the shared handler (shared_kernels/ffi_calls.h): the
// call's stream, and XLA's scratch allocator where the binding names it.
struct Cuda {
  // std::bad_alloc here is host memory.
  static constexpr const char* kOutOfMemory = "out of host memory";

  static ffi::Error Run(cudaStream_t stream, Call call, const Checked& c, const CallOperands& ops) {
    return gpu::Run(stream, nullptr, call, c, ops);
  }
  static ffi::Error Run(cudaStream_t stream, ffi::ScratchAllocator& scratch, Call call, const Checked& c,
                        const CallOperands& ops) {
    return gpu::Run(stream, &scratch, call, c, ops);
  }
};

template <Call C>
using CudaHandler = Handler<C, Cuda>;

}  // namespace gpu
}  // namespace pool3d

#define POOL3D_STREAM \
  xla::ffi::Ffi::Bind().Ctx<xla::ffi::PlatformStream<cudaStream_t>>()
// Calls whose plans may hold two steps take scratch for the indices between them.
#define POOL3D_STREAM_SCRATCH \
  POOL3D_STREAM.Ctx<xla::ffi::ScratchAllocator>()
// Handlers that only launch kernels on the stream, on XLA's buffers, may be
// captured in XLA's command buffers (CUDA graphs). Those with scratch may not:
// XLA's scratch is freed when the handler returns, and a graph replay would
// reach memory handed on since (XLA's Traits::kCmdBufferCompatible, api.h).
#define POOL3D_GRAPHABLE {xla::ffi::Traits::kCmdBufferCompatible}

// The handler symbols are the library's only exports (it is built with
// -fvisibility=hidden; library.py looks them up with ctypes).
#pragma GCC visibility push(default)

XLA_FFI_DEFINE_HANDLER_SYMBOL(Pool3dCudaMaxPooling3dBackward,
                              pool3d::gpu::CudaHandler<pool3d::Call::kBackward>{},
                              POOL3D_BIND_BACKWARD(POOL3D_STREAM_SCRATCH));

XLA_FFI_DEFINE_HANDLER_SYMBOL(Pool3dCudaMaxPooling3dForward,
                              pool3d::gpu::CudaHandler<pool3d::Call::kForward>{},
                              POOL3D_BIND_FORWARD(POOL3D_STREAM), POOL3D_GRAPHABLE);

XLA_FFI_DEFINE_HANDLER_SYMBOL(Pool3dCudaMaxPooling3dForwardOutput,
                              pool3d::gpu::CudaHandler<pool3d::Call::kForwardOutput>{},
                              POOL3D_BIND_FORWARD_OUTPUT(POOL3D_STREAM), POOL3D_GRAPHABLE);

XLA_FFI_DEFINE_HANDLER_SYMBOL(Pool3dCudaMaxPooling3dBackwardFromIndices,
                              pool3d::gpu::CudaHandler<pool3d::Call::kFromIndices>{},
                              POOL3D_BIND_FROM_INDICES(POOL3D_STREAM), POOL3D_GRAPHABLE);

XLA_FFI_DEFINE_HANDLER_SYMBOL(Pool3dCudaMaxPooling3dBackwardFromInput,
                              pool3d::gpu::CudaHandler<pool3d::Call::kFromInput>{},
                              POOL3D_BIND_FROM_INPUT(POOL3D_STREAM_SCRATCH));

#pragma GCC visibility pop
