// The XLA typed-FFI handlers (api_version 4) of the pool3d custom calls.
//
// Each handler decodes its buffers and attributes, validates them with
// kernels/common/validate.h and calls the plain C++ routine of
// kernels/kernels.h. No C++ exception leaves a handler: std::bad_alloc (or
// anything else) becomes an error naming the call.
#include <cstdint>
#include <exception>
#include <new>
#include <string>
#include <string_view>

#include "kernels/common/pages.h"
#include "kernels/common/validate.h"
#include "kernels/kernels.h"
#include "xla/ffi/api/ffi.h"

namespace pool3d {
namespace {

constexpr const char* kBackward = "pool3d.max_pooling_3d_backward";

// Runs fn(), turning any exception into an error naming the target.
template <class Fn>
ffi::Error Guarded(const char* target, Fn fn) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return ffi::Error::Internal(std::string(target) +
                                ": out of memory for scratch space");
  } catch (const std::exception& e) {
    return ffi::Error::Internal(std::string(target) + ": " + e.what());
  } catch (...) {
    return ffi::Error::Internal(std::string(target) + ": unknown C++ exception");
  }
}

ffi::Error Backward(ffi::AnyBuffer grad_output, ffi::AnyBuffer input,
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
  // Zero batch or channels (the only zero extents validation lets through):
  // the result is empty, there is nothing to compute.
  if (input.element_count() == 0) return ffi::Error::Success();
  AdviseHugePages(grad_input->untyped_data(), grad_input->size_bytes());
  MaxPool3dBackward(g, t, grad_output.untyped_data(), input.untyped_data(),
                    output.untyped_data(), grad_input->untyped_data());
  return ffi::Error::Success();
}

ffi::Error BackwardImpl(ffi::AnyBuffer grad_output, ffi::AnyBuffer input,
                        ffi::AnyBuffer output,
                        ffi::Result<ffi::AnyBuffer> grad_input,
                        ffi::Span<const int64_t> kernel_size,
                        ffi::Span<const int64_t> stride,
                        ffi::Span<const int64_t> padding,
                        std::string_view data_format,
                        std::string_view output_format) {
  return Guarded(kBackward, [&] {
    return Backward(grad_output, input, output, grad_input,
                    {kernel_size, stride, padding, data_format, output_format});
  });
}

}  // namespace
}  // namespace pool3d

// Every target takes the same five attributes.
#define POOL3D_ATTRS(binding)                                  \
  binding.Attr<xla::ffi::Span<const int64_t>>("kernel_size")   \
      .Attr<xla::ffi::Span<const int64_t>>("stride")           \
      .Attr<xla::ffi::Span<const int64_t>>("padding")          \
      .Attr<std::string_view>("data_format")                   \
      .Attr<std::string_view>("output_format")

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    Pool3dMaxPooling3dBackward, pool3d::BackwardImpl,
    POOL3D_ATTRS(xla::ffi::Ffi::Bind()
                     .Arg<xla::ffi::AnyBuffer>()     // grad_output
                     .Arg<xla::ffi::AnyBuffer>()     // input
                     .Arg<xla::ffi::AnyBuffer>()     // output
                     .Ret<xla::ffi::AnyBuffer>()));  // grad_input
