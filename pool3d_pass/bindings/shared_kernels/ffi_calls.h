// Shared by the CPU and the CUDA kernels (bindings/shared_kernels/): both
// platforms' FFI handlers bind and check each call with it, so both accept and
// reject the same calls.
//
// What the CPU handlers (cpu/handlers.cc) and the CUDA handlers
// (gpu/cuda/kernels.cu) share: the five targets, their FFI bindings'
// operands and attributes, the exception guard, and per call the decoding
// and validation of its operands (validate.h) into a Checked. A handler is
// its call's Check* and then its platform's run.
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

#include "validate.h"
#include "xla/ffi/api/ffi.h"

namespace pool3d {

constexpr const char* kBackward = "pool3d.max_pooling_3d_backward";
constexpr const char* kForward = "pool3d.max_pooling_3d_forward";
constexpr const char* kForwardOutput = "pool3d.max_pooling_3d_forward_output";
constexpr const char* kFromIndices =
    "pool3d.max_pooling_3d_backward_from_indices";
constexpr const char* kFromInput = "pool3d.max_pooling_3d_backward_from_input";

// Every target takes the same five attributes, bound last in this order
// (Entry gathers them into a PoolAttrs).
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

// The handler XLA calls for `target`: run(context and operands..., PoolAttrs)
// under Guarded, the five attributes (bound last) gathered into PoolAttrs.
template <class Run>
class Entry {
 public:
  Entry(const char* target, const char* out_of_memory, Run run)
      : target_(target), out_of_memory_(out_of_memory), run_(run) {}

  template <class... Args>
  ffi::Error operator()(Args&&... args) const {
    static_assert(sizeof...(Args) >= kNumAttrs);
    return Guarded(target_, out_of_memory_, [&] {
      return RunWithAttrs(
          std::forward_as_tuple(args...),
          std::make_index_sequence<sizeof...(Args) - kNumAttrs>{});
    });
  }

 private:
  template <class Args, size_t... I>
  ffi::Error RunWithAttrs(Args args, std::index_sequence<I...>) const {
    constexpr size_t n = sizeof...(I);
    return run_(std::get<I>(args)...,
                PoolAttrs{std::get<n>(args), std::get<n + 1>(args),
                          std::get<n + 2>(args), std::get<n + 3>(args),
                          std::get<n + 4>(args)});
  }

  const char* target_;
  const char* out_of_memory_;
  Run run_;
};

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

}  // namespace pool3d

#endif  // POOL3D_SHARED_KERNELS_FFI_CALLS_H_
