// The XLA typed-FFI handlers (api_version 4) of the pool3d custom calls.
//
// The handler is the one both platforms share (shared_kernels/ffi_calls.h's
// Handler: the call decoded and validated, its exceptions turned into
// errors); what is the CPU's own is its run: the plain C++ routine of
// kernels/kernels.h for the call.
#include <cstddef>

#include "kernels/common/pages.h"
#include "kernels/kernels.h"
#include "shared_kernels/ffi_calls.h"
#include "xla/ffi/api/ffi.h"

namespace pool3d {
namespace {

// The CPU: no context, the call's routine on the calling thread (its own
// thread pool inside).
struct Cpu {
  // The host memory the routines allocate is their scratch.
  static constexpr const char* kOutOfMemory = "out of memory for scratch space";

  static ffi::Error Run(Call call, const Checked& c, const CallOperands& ops) {
    if (ops.dx != nullptr)  // a gradient: the largest result, often a fresh mapping
      AdviseHugePages(ops.dx, size_t(c.g.B * c.g.C * c.g.InputPlane()) * ElementBytes(c.t));
    switch (call) {
      case Call::kBackward: MaxPool3dBackward(c.g, c.t, ops); break;
      case Call::kForward: MaxPool3dForward(c.g, c.t, ops); break;
      case Call::kForwardOutput: MaxPool3dForwardOutput(c.g, c.t, ops); break;
      case Call::kFromIndices: MaxPool3dBackwardFromIndices(c.g, c.t, ops); break;
      case Call::kFromInput: MaxPool3dBackwardFromInput(c.g, c.t, ops); break;
    }
    return ffi::Error::Success();
  }
};

template <Call C>
using CpuHandler = Handler<C, Cpu>;

}  // namespace
}  // namespace pool3d

XLA_FFI_DEFINE_HANDLER_SYMBOL(Pool3dMaxPooling3dBackward, pool3d::CpuHandler<pool3d::Call::kBackward>{},
                              POOL3D_BIND_BACKWARD(xla::ffi::Ffi::Bind()));

XLA_FFI_DEFINE_HANDLER_SYMBOL(Pool3dMaxPooling3dForward, pool3d::CpuHandler<pool3d::Call::kForward>{},
                              POOL3D_BIND_FORWARD(xla::ffi::Ffi::Bind()));

XLA_FFI_DEFINE_HANDLER_SYMBOL(Pool3dMaxPooling3dForwardOutput, pool3d::CpuHandler<pool3d::Call::kForwardOutput>{},
                              POOL3D_BIND_FORWARD_OUTPUT(xla::ffi::Ffi::Bind()));

XLA_FFI_DEFINE_HANDLER_SYMBOL(Pool3dMaxPooling3dBackwardFromIndices,
                              pool3d::CpuHandler<pool3d::Call::kFromIndices>{},
                              POOL3D_BIND_FROM_INDICES(xla::ffi::Ffi::Bind()));

XLA_FFI_DEFINE_HANDLER_SYMBOL(Pool3dMaxPooling3dBackwardFromInput, pool3d::CpuHandler<pool3d::Call::kFromInput>{},
                              POOL3D_BIND_FROM_INPUT(xla::ffi::Ffi::Bind()));
