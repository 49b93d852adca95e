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
constexpr const char* kForward = "pool3d.max_pooling_3d_forward";
constexpr const char* kForwardOutput = "pool3d.max_pooling_3d_forward_output";
constexpr const char* kFromIndices =
    "pool3d.max_pooling_3d_backward_from_indices";
constexpr const char* kFromInput = "pool3d.max_pooling_3d_backward_from_input";

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

ffi::Error Forward(ffi::AnyBuffer input, ffi::Result<ffi::AnyBuffer> output,
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
  // Zero batch or channels: empty results.
  if (input.element_count() == 0) return ffi::Error::Success();
  MaxPool3dForward(g, t, input.untyped_data(), output->untyped_data(),
                   static_cast<int16_t*>(indices->untyped_data()));
  return ffi::Error::Success();
}

ffi::Error ForwardOutput(ffi::AnyBuffer input,
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
  // Zero batch or channels: an empty result.
  if (input.element_count() == 0) return ffi::Error::Success();
  MaxPool3dForwardOutput(g, t, input.untyped_data(), output->untyped_data());
  return ffi::Error::Success();
}

ffi::Error FromIndices(ffi::AnyBuffer grad_output, ffi::AnyBuffer indices,
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
  // The result's shape is the forward input's.
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
  // Zero batch or channels: an empty result.
  if (grad_input->element_count() == 0) return ffi::Error::Success();
  AdviseHugePages(grad_input->untyped_data(), grad_input->size_bytes());
  MaxPool3dBackwardFromIndices(
      g, t, grad_output.untyped_data(),
      static_cast<const int16_t*>(indices.untyped_data()),
      grad_input->untyped_data());
  return ffi::Error::Success();
}

ffi::Error FromInput(ffi::AnyBuffer grad_output, ffi::AnyBuffer input,
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
  // Zero batch or channels: an empty result.
  if (input.element_count() == 0) return ffi::Error::Success();
  AdviseHugePages(grad_input->untyped_data(), grad_input->size_bytes());
  MaxPool3dBackwardFromInput(g, t, grad_output.untyped_data(),
                             input.untyped_data(), grad_input->untyped_data());
  return ffi::Error::Success();
}

#define POOL3D_ATTR_PARAMS                                       \
  ffi::Span<const int64_t> kernel_size, ffi::Span<const int64_t> stride, \
      ffi::Span<const int64_t> padding, std::string_view data_format,    \
      std::string_view output_format
#define POOL3D_ATTR_ARGS \
  PoolAttrs { kernel_size, stride, padding, data_format, output_format }

ffi::Error BackwardImpl(ffi::AnyBuffer grad_output, ffi::AnyBuffer input,
                        ffi::AnyBuffer output,
                        ffi::Result<ffi::AnyBuffer> grad_input,
                        POOL3D_ATTR_PARAMS) {
  return Guarded(kBackward, [&] {
    return Backward(grad_output, input, output, grad_input, POOL3D_ATTR_ARGS);
  });
}

ffi::Error ForwardImpl(ffi::AnyBuffer input, ffi::Result<ffi::AnyBuffer> output,
                       ffi::Result<ffi::AnyBuffer> indices,
                       POOL3D_ATTR_PARAMS) {
  return Guarded(kForward, [&] {
    return Forward(input, output, indices, POOL3D_ATTR_ARGS);
  });
}

ffi::Error ForwardOutputImpl(ffi::AnyBuffer input,
                             ffi::Result<ffi::AnyBuffer> output,
                             POOL3D_ATTR_PARAMS) {
  return Guarded(kForwardOutput,
                 [&] { return ForwardOutput(input, output, POOL3D_ATTR_ARGS); });
}

ffi::Error FromIndicesImpl(ffi::AnyBuffer grad_output, ffi::AnyBuffer indices,
                           ffi::Result<ffi::AnyBuffer> grad_input,
                           POOL3D_ATTR_PARAMS) {
  return Guarded(kFromIndices, [&] {
    return FromIndices(grad_output, indices, grad_input, POOL3D_ATTR_ARGS);
  });
}

ffi::Error FromInputImpl(ffi::AnyBuffer grad_output, ffi::AnyBuffer input,
                         ffi::Result<ffi::AnyBuffer> grad_input,
                         POOL3D_ATTR_PARAMS) {
  return Guarded(kFromInput, [&] {
    return FromInput(grad_output, input, grad_input, POOL3D_ATTR_ARGS);
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

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    Pool3dMaxPooling3dForward, pool3d::ForwardImpl,
    POOL3D_ATTRS(xla::ffi::Ffi::Bind()
                     .Arg<xla::ffi::AnyBuffer>()     // input
                     .Ret<xla::ffi::AnyBuffer>()     // output
                     .Ret<xla::ffi::AnyBuffer>()));  // indices

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    Pool3dMaxPooling3dForwardOutput, pool3d::ForwardOutputImpl,
    POOL3D_ATTRS(xla::ffi::Ffi::Bind()
                     .Arg<xla::ffi::AnyBuffer>()     // input
                     .Ret<xla::ffi::AnyBuffer>()));  // output

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    Pool3dMaxPooling3dBackwardFromIndices, pool3d::FromIndicesImpl,
    POOL3D_ATTRS(xla::ffi::Ffi::Bind()
                     .Arg<xla::ffi::AnyBuffer>()     // grad_output
                     .Arg<xla::ffi::AnyBuffer>()     // indices
                     .Ret<xla::ffi::AnyBuffer>()));  // grad_input

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    Pool3dMaxPooling3dBackwardFromInput, pool3d::FromInputImpl,
    POOL3D_ATTRS(xla::ffi::Ffi::Bind()
                     .Arg<xla::ffi::AnyBuffer>()     // grad_output
                     .Arg<xla::ffi::AnyBuffer>()     // input
                     .Ret<xla::ffi::AnyBuffer>()));  // grad_input
