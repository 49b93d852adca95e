// The XLA typed-FFI handlers (api_version 4) of the pool3d custom calls.
//
// Each handler decodes and validates its call (shared_kernels/ffi_calls.h,
// shared with the CUDA handlers) and calls the plain C++ routine of
// kernels/kernels.h. No C++ exception leaves a handler: std::bad_alloc (or
// anything else) becomes an error naming the call.
#include <cstdint>

#include "kernels/common/pages.h"
#include "kernels/kernels.h"
#include "shared_kernels/ffi_calls.h"
#include "xla/ffi/api/ffi.h"

namespace pool3d {
namespace {

// The host memory the routines allocate is their scratch.
constexpr const char* kOutOfMemory = "out of memory for scratch space";

ffi::Error Backward(ffi::AnyBuffer grad_output, ffi::AnyBuffer input,
                    ffi::AnyBuffer output,
                    ffi::Result<ffi::AnyBuffer> grad_input, PoolAttrs a) {
  Checked c;
  POOL3D_RETURN_IF_FAILED(
      CheckBackward(grad_output, input, output, *grad_input, a, &c));
  if (c.empty) return ffi::Error::Success();
  AdviseHugePages(grad_input->untyped_data(), grad_input->size_bytes());
  MaxPool3dBackward(c.g, c.t, grad_output.untyped_data(), input.untyped_data(),
                    output.untyped_data(), grad_input->untyped_data());
  return ffi::Error::Success();
}

ffi::Error Forward(ffi::AnyBuffer input, ffi::Result<ffi::AnyBuffer> output,
                   ffi::Result<ffi::AnyBuffer> indices, PoolAttrs a) {
  Checked c;
  POOL3D_RETURN_IF_FAILED(CheckForward(input, *output, *indices, a, &c));
  if (c.empty) return ffi::Error::Success();
  MaxPool3dForward(c.g, c.t, input.untyped_data(), output->untyped_data(),
                   static_cast<int16_t*>(indices->untyped_data()));
  return ffi::Error::Success();
}

ffi::Error ForwardOutput(ffi::AnyBuffer input,
                         ffi::Result<ffi::AnyBuffer> output, PoolAttrs a) {
  Checked c;
  POOL3D_RETURN_IF_FAILED(CheckForwardOutput(input, *output, a, &c));
  if (c.empty) return ffi::Error::Success();
  MaxPool3dForwardOutput(c.g, c.t, input.untyped_data(),
                         output->untyped_data());
  return ffi::Error::Success();
}

ffi::Error FromIndices(ffi::AnyBuffer grad_output, ffi::AnyBuffer indices,
                       ffi::Result<ffi::AnyBuffer> grad_input, PoolAttrs a) {
  Checked c;
  POOL3D_RETURN_IF_FAILED(
      CheckFromIndices(grad_output, indices, *grad_input, a, &c));
  if (c.empty) return ffi::Error::Success();
  AdviseHugePages(grad_input->untyped_data(), grad_input->size_bytes());
  MaxPool3dBackwardFromIndices(
      c.g, c.t, grad_output.untyped_data(),
      static_cast<const int16_t*>(indices.untyped_data()),
      grad_input->untyped_data());
  return ffi::Error::Success();
}

ffi::Error FromInput(ffi::AnyBuffer grad_output, ffi::AnyBuffer input,
                     ffi::Result<ffi::AnyBuffer> grad_input, PoolAttrs a) {
  Checked c;
  POOL3D_RETURN_IF_FAILED(
      CheckFromInput(grad_output, input, *grad_input, a, &c));
  if (c.empty) return ffi::Error::Success();
  AdviseHugePages(grad_input->untyped_data(), grad_input->size_bytes());
  MaxPool3dBackwardFromInput(c.g, c.t, grad_output.untyped_data(),
                             input.untyped_data(), grad_input->untyped_data());
  return ffi::Error::Success();
}

}  // namespace
}  // namespace pool3d

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    Pool3dMaxPooling3dBackward,
    pool3d::Entry(pool3d::kBackward, pool3d::kOutOfMemory, pool3d::Backward),
    POOL3D_BIND_BACKWARD(xla::ffi::Ffi::Bind()));

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    Pool3dMaxPooling3dForward,
    pool3d::Entry(pool3d::kForward, pool3d::kOutOfMemory, pool3d::Forward),
    POOL3D_BIND_FORWARD(xla::ffi::Ffi::Bind()));

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    Pool3dMaxPooling3dForwardOutput,
    pool3d::Entry(pool3d::kForwardOutput, pool3d::kOutOfMemory,
                  pool3d::ForwardOutput),
    POOL3D_BIND_FORWARD_OUTPUT(xla::ffi::Ffi::Bind()));

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    Pool3dMaxPooling3dBackwardFromIndices,
    pool3d::Entry(pool3d::kFromIndices, pool3d::kOutOfMemory,
                  pool3d::FromIndices),
    POOL3D_BIND_FROM_INDICES(xla::ffi::Ffi::Bind()));

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    Pool3dMaxPooling3dBackwardFromInput,
    pool3d::Entry(pool3d::kFromInput, pool3d::kOutOfMemory, pool3d::FromInput),
    POOL3D_BIND_FROM_INPUT(xla::ffi::Ffi::Bind()));
