// Shared by the CPU and the CUDA kernels (bindings/shared_kernels/): both
// platforms' FFI handlers bind and check each call with it, so both accept and
// reject the same calls.
//
// What the CPU handlers (cpu/handlers.cc) and the CUDA handlers
// (gpu/cuda/kernels.cu) share: the five targets, their FFI bindings'
// operands and attributes, and the handler itself (Handler<Call, Platform>):
// the exception guard, the decoding and validation of the call's operands
// (validate.h) into a Checked and a CallOperands, and then the platform's run,
// Platform::Run(context..., call, checked, operands), which is all a
// platform writes.
#ifndef POOL3D_SHARED_KERNELS_FFI_CALLS_H_
#define POOL3D_SHARED_KERNELS_FFI_CALLS_H_

#include <cstddef>
#include <cstdint>
#include <exception>
#include <new>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>

#include "calls.h"
#include "validate.h"
#include "xla/ffi/api/ffi.h"

namespace pool3d {

constexpr const char* kBackward = "pool3d.max_pooling_3d_backward";
constexpr const char* kForward = "pool3d.max_pooling_3d_forward";
constexpr const char* kForwardOutput = "pool3d.max_pooling_3d_forward_output";
constexpr const char* kFromIndices =
    "pool3d.max_pooling_3d_backward_from_indices";
constexpr const char* kFromInput = "pool3d.max_pooling_3d_backward_from_input";

// The target of a call.
inline const char* TargetOf(Call c) {
  switch (c) {
    case Call::kForward: return kForward;
    case Call::kForwardOutput: return kForwardOutput;
    case Call::kFromIndices: return kFromIndices;
    case Call::kBackward: return kBackward;
    case Call::kFromInput: return kFromInput;
  }
  return "pool3d";
}

// Every target takes the same five attributes, bound last in this order
// (Handler gathers them into a PoolAttrs).
#define POOL3D_ATTRS(binding)                                \
  binding.Attr<xla::ffi::Span<const int64_t>>("kernel_size") \
      .Attr<xla::ffi::Span<const int64_t>>("stride")         \
      .Attr<xla::ffi::Span<const int64_t>>("padding")        \
      .Attr<std::string_view>("data_format")                 \
      .Attr<std::string_view>("output_format")
constexpr size_t kNumAttrs = 5;

// Each call's operands and attributes, after whatever context a platform
// binds first (`binding`).
#define POOL3D_BIND_BACKWARD(binding)                               \
  POOL3D_ATTRS(binding.Arg<xla::ffi::AnyBuffer>() /* grad_output */ \
                   .Arg<xla::ffi::AnyBuffer>()    /* input */       \
                   .Arg<xla::ffi::AnyBuffer>()    /* output */      \
                   .Ret<xla::ffi::AnyBuffer>())   /* grad_input */
#define POOL3D_BIND_FORWARD(binding)                                \
  POOL3D_ATTRS(binding.Arg<xla::ffi::AnyBuffer>() /* input */       \
                   .Ret<xla::ffi::AnyBuffer>()    /* output */      \
                   .Ret<xla::ffi::AnyBuffer>())   /* indices */
#define POOL3D_BIND_FORWARD_OUTPUT(binding)                         \
  POOL3D_ATTRS(binding.Arg<xla::ffi::AnyBuffer>() /* input */       \
                   .Ret<xla::ffi::AnyBuffer>())   /* output */
#define POOL3D_BIND_FROM_INDICES(binding)                           \
  POOL3D_ATTRS(binding.Arg<xla::ffi::AnyBuffer>() /* grad_output */ \
                   .Arg<xla::ffi::AnyBuffer>()    /* indices */     \
                   .Ret<xla::ffi::AnyBuffer>())   /* grad_input */
#define POOL3D_BIND_FROM_INPUT(binding)                             \
  POOL3D_ATTRS(binding.Arg<xla::ffi::AnyBuffer>() /* grad_output */ \
                   .Arg<xla::ffi::AnyBuffer>()    /* input */       \
                   .Ret<xla::ffi::AnyBuffer>())   /* grad_input */

// Returns the error of `expr` if it failed.
#define POOL3D_RETURN_IF_FAILED(expr)              \
  do {                                             \
    if (auto e_ = (expr); e_.failure()) return e_; \
  } while (0)

// Runs fn(), turning any exception into an error naming the target;
// std::bad_alloc says `out_of_memory` (what a platform allocates on the host).
template <class Fn>
ffi::Error Guarded(const char* target, const char* out_of_memory, Fn fn) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return ffi::Error::Internal(std::string(target) + ": " + out_of_memory);
  } catch (const std::exception& e) {
    return ffi::Error::Internal(std::string(target) + ": " + e.what());
  } catch (...) {
    return ffi::Error::Internal(std::string(target) + ": unknown C++ exception");
  }
}

// What a call's checks establish: the element type of its float operands,
// the geometry, and whether the result is empty (zero batch or channels, the
// only zero extents validation lets through: nothing to compute).
struct Checked {
  ElementType t{};
  Geom g{};
  bool empty = false;
};

inline ffi::Error CheckBackward(const ffi::AnyBuffer& grad_output,
                                const ffi::AnyBuffer& input,
                                const ffi::AnyBuffer& output,
                                const ffi::AnyBuffer& grad_input,
                                const PoolAttrs& a, Checked* c) {
  const char* tg = kBackward;
  POOL3D_RETURN_IF_FAILED(CheckFloatOperands(
      tg, {"input", &input},
      {{"grad_output", &grad_output},
       {"output", &output},
       {"result (grad_input)", &grad_input}},
      &c->t));
  POOL3D_RETURN_IF_FAILED(CheckAttributes(tg, a, &c->g));
  auto in = input.dimensions();
  POOL3D_RETURN_IF_FAILED(
      CheckSameShape(tg, {"result", &grad_input}, in, "input"));
  POOL3D_RETURN_IF_FAILED(CheckSameShape(
      tg, {"output", &output}, grad_output.dimensions(), "grad_output"));
  POOL3D_RETURN_IF_FAILED(SetInputShape(tg, "input", in, a, &c->g));
  POOL3D_RETURN_IF_FAILED(
      CheckOutputShape(tg, {"grad_output", &grad_output}, in, a, c->g));
  c->empty = input.element_count() == 0;
  return ffi::Error::Success();
}

inline ffi::Error CheckForward(const ffi::AnyBuffer& input,
                               const ffi::AnyBuffer& output,
                               const ffi::AnyBuffer& indices,
                               const PoolAttrs& a, Checked* c) {
  const char* tg = kForward;
  POOL3D_RETURN_IF_FAILED(CheckFloatOperands(
      tg, {"input", &input}, {{"result 0 (output)", &output}}, &c->t));
  POOL3D_RETURN_IF_FAILED(CheckOperand(tg, {"result 1 (indices)", &indices},
                                       ffi::DataType::S16));
  POOL3D_RETURN_IF_FAILED(CheckAttributes(tg, a, &c->g));
  auto in = input.dimensions();
  POOL3D_RETURN_IF_FAILED(SetInputShape(tg, "input", in, a, &c->g));
  POOL3D_RETURN_IF_FAILED(
      CheckOutputShape(tg, {"result 0 (output)", &output}, in, a, c->g));
  POOL3D_RETURN_IF_FAILED(
      CheckOutputShape(tg, {"result 1 (indices)", &indices}, in, a, c->g));
  c->empty = input.element_count() == 0;
  return ffi::Error::Success();
}

inline ffi::Error CheckForwardOutput(const ffi::AnyBuffer& input,
                                     const ffi::AnyBuffer& output,
                                     const PoolAttrs& a, Checked* c) {
  const char* tg = kForwardOutput;
  POOL3D_RETURN_IF_FAILED(CheckFloatOperands(
      tg, {"input", &input}, {{"result (output)", &output}}, &c->t));
  POOL3D_RETURN_IF_FAILED(CheckAttributes(tg, a, &c->g));
  auto in = input.dimensions();
  POOL3D_RETURN_IF_FAILED(SetInputShape(tg, "input", in, a, &c->g));
  POOL3D_RETURN_IF_FAILED(
      CheckOutputShape(tg, {"result (output)", &output}, in, a, c->g));
  c->empty = input.element_count() == 0;
  return ffi::Error::Success();
}

inline ffi::Error CheckFromIndices(const ffi::AnyBuffer& grad_output,
                                   const ffi::AnyBuffer& indices,
                                   const ffi::AnyBuffer& grad_input,
                                   const PoolAttrs& a, Checked* c) {
  const char* tg = kFromIndices;
  POOL3D_RETURN_IF_FAILED(CheckFloatOperands(
      tg, {"grad_output", &grad_output},
      {{"result (grad_input)", &grad_input}}, &c->t));
  POOL3D_RETURN_IF_FAILED(
      CheckOperand(tg, {"indices", &indices}, ffi::DataType::S16));
  POOL3D_RETURN_IF_FAILED(CheckAttributes(tg, a, &c->g));
  // The result's shape is the forward input's.
  auto in = grad_input.dimensions();
  POOL3D_RETURN_IF_FAILED(
      SetInputShape(tg, "result (grad_input)", in, a, &c->g));
  POOL3D_RETURN_IF_FAILED(
      CheckOutputShape(tg, {"grad_output", &grad_output}, in, a, c->g));
  POOL3D_RETURN_IF_FAILED(CheckSameShape(
      tg, {"indices", &indices}, grad_output.dimensions(), "grad_output"));
  c->empty = grad_input.element_count() == 0;
  return ffi::Error::Success();
}

inline ffi::Error CheckFromInput(const ffi::AnyBuffer& grad_output,
                                 const ffi::AnyBuffer& input,
                                 const ffi::AnyBuffer& grad_input,
                                 const PoolAttrs& a, Checked* c) {
  const char* tg = kFromInput;
  POOL3D_RETURN_IF_FAILED(CheckFloatOperands(
      tg, {"input", &input},
      {{"grad_output", &grad_output}, {"result (grad_input)", &grad_input}},
      &c->t));
  POOL3D_RETURN_IF_FAILED(CheckAttributes(tg, a, &c->g));
  auto in = input.dimensions();
  POOL3D_RETURN_IF_FAILED(
      CheckSameShape(tg, {"result", &grad_input}, in, "input"));
  POOL3D_RETURN_IF_FAILED(SetInputShape(tg, "input", in, a, &c->g));
  POOL3D_RETURN_IF_FAILED(
      CheckOutputShape(tg, {"grad_output", &grad_output}, in, a, c->g));
  c->empty = input.element_count() == 0;
  return ffi::Error::Success();
}

// One call's buffers as the FFI binds them (operands, then results: the
// POOL3D_BIND_* order): its target, how many there are, and Check, which
// decodes and validates them (the Check* above) and names its CallOperands.
template <Call C>
struct CallSpec;

template <>
struct CallSpec<Call::kBackward> {
  static constexpr const char* kTarget = kBackward;
  static constexpr size_t kBuffers = 4;
  static ffi::Error Check(const ffi::AnyBuffer& grad_output, const ffi::AnyBuffer& input,
                          const ffi::AnyBuffer& output, ffi::Result<ffi::AnyBuffer>& grad_input,
                          const PoolAttrs& a, Checked* c, CallOperands* ops) {
    POOL3D_RETURN_IF_FAILED(CheckBackward(grad_output, input, output, *grad_input, a, c));
    ops->x = input.untyped_data();
    ops->y_in = output.untyped_data();
    ops->go = grad_output.untyped_data();
    ops->dx = grad_input->untyped_data();
    return ffi::Error::Success();
  }
};

template <>
struct CallSpec<Call::kForward> {
  static constexpr const char* kTarget = kForward;
  static constexpr size_t kBuffers = 3;
  static ffi::Error Check(const ffi::AnyBuffer& input, ffi::Result<ffi::AnyBuffer>& output,
                          ffi::Result<ffi::AnyBuffer>& indices, const PoolAttrs& a, Checked* c,
                          CallOperands* ops) {
    POOL3D_RETURN_IF_FAILED(CheckForward(input, *output, *indices, a, c));
    ops->x = input.untyped_data();
    ops->y = output->untyped_data();
    ops->idx = static_cast<int16_t*>(indices->untyped_data());
    return ffi::Error::Success();
  }
};

template <>
struct CallSpec<Call::kForwardOutput> {
  static constexpr const char* kTarget = kForwardOutput;
  static constexpr size_t kBuffers = 2;
  static ffi::Error Check(const ffi::AnyBuffer& input, ffi::Result<ffi::AnyBuffer>& output,
                          const PoolAttrs& a, Checked* c, CallOperands* ops) {
    POOL3D_RETURN_IF_FAILED(CheckForwardOutput(input, *output, a, c));
    ops->x = input.untyped_data();
    ops->y = output->untyped_data();
    return ffi::Error::Success();
  }
};

template <>
struct CallSpec<Call::kFromIndices> {
  static constexpr const char* kTarget = kFromIndices;
  static constexpr size_t kBuffers = 3;
  static ffi::Error Check(const ffi::AnyBuffer& grad_output, const ffi::AnyBuffer& indices,
                          ffi::Result<ffi::AnyBuffer>& grad_input, const PoolAttrs& a, Checked* c,
                          CallOperands* ops) {
    POOL3D_RETURN_IF_FAILED(CheckFromIndices(grad_output, indices, *grad_input, a, c));
    ops->go = grad_output.untyped_data();
    ops->idx_in = static_cast<const int16_t*>(indices.untyped_data());
    ops->dx = grad_input->untyped_data();
    return ffi::Error::Success();
  }
};

template <>
struct CallSpec<Call::kFromInput> {
  static constexpr const char* kTarget = kFromInput;
  static constexpr size_t kBuffers = 3;
  static ffi::Error Check(const ffi::AnyBuffer& grad_output, const ffi::AnyBuffer& input,
                          ffi::Result<ffi::AnyBuffer>& grad_input, const PoolAttrs& a, Checked* c,
                          CallOperands* ops) {
    POOL3D_RETURN_IF_FAILED(CheckFromInput(grad_output, input, *grad_input, a, c));
    ops->x = input.untyped_data();
    ops->go = grad_output.untyped_data();
    ops->dx = grad_input->untyped_data();
    return ffi::Error::Success();
  }
};

// The handler XLA calls for call C on a platform, one template for the CPU and
// the CUDA handlers. XLA passes what the binding names, in its order: the
// platform's context (a CUDA stream, XLA's scratch allocator; nothing on the
// CPU), the call's buffers, the five attributes. The handler checks the call
// (CallSpec<C>) and, unless its result is empty (zero batch or channels),
// returns Platform::Run(context..., C, checked, operands); any C++ exception
// becomes an error naming the target (std::bad_alloc: Platform::kOutOfMemory,
// what the platform allocates on the host).
template <Call C, class Platform>
struct Handler {
  template <class... Args>
  ffi::Error operator()(Args&&... args) const {
    constexpr size_t n = sizeof...(Args), buffers = CallSpec<C>::kBuffers;
    static_assert(n >= buffers + kNumAttrs, "a binding's buffers and attributes come last");
    return Guarded(CallSpec<C>::kTarget, Platform::kOutOfMemory, [&] {
      return Run(std::forward_as_tuple(args...), std::make_index_sequence<n - buffers - kNumAttrs>{},
                 std::make_index_sequence<buffers>{});
    });
  }

 private:
  template <class Args, size_t... Context, size_t... Buffer>
  static ffi::Error Run(Args args, std::index_sequence<Context...>, std::index_sequence<Buffer...>) {
    constexpr size_t first = sizeof...(Context), attrs = first + sizeof...(Buffer);
    const PoolAttrs a{std::get<attrs>(args), std::get<attrs + 1>(args), std::get<attrs + 2>(args),
                      std::get<attrs + 3>(args), std::get<attrs + 4>(args)};
    Checked c;
    CallOperands ops;
    POOL3D_RETURN_IF_FAILED(CallSpec<C>::Check(std::get<first + Buffer>(args)..., a, &c, &ops));
    if (c.empty) return ffi::Error::Success();
    return Platform::Run(std::get<Context>(args)..., C, c, ops);
  }
};

}  // namespace pool3d

#endif  // POOL3D_SHARED_KERNELS_FFI_CALLS_H_
