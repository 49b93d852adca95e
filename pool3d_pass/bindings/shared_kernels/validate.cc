// Validation shared by every FFI handler (see validate.h).
#include "validate.h"

#include <cstdint>
#include <string>

namespace pool3d {

namespace {

constexpr int64_t kMaxWindowElements = 4096;
// Strides above this bound are rejected: it keeps every index computation far
// away from int64 overflow.
constexpr int64_t kMaxStride = int64_t{1} << 30;
// Dimensions above this bound cannot be real (and are rejected before
// n + 2 * padding is formed).
constexpr int64_t kMaxDim = int64_t{1} << 62;

ffi::Error CheckTriple(const char* target, const char* name,
                       ffi::Span<const int64_t> v, int64_t min_value,
                       int64_t max_value, const char* max_text) {
  if (v.size() != 3) {
    return Invalid(target, std::string(name) +
                               " must have 3 elements (D, H, W), got " +
                               std::to_string(v.size()) + ": " + DimsStr(v));
  }
  for (int64_t e : v) {
    if (e < min_value || e > max_value) {
      return Invalid(target, std::string(name) + " elements must be in [" +
                                 std::to_string(min_value) + ", " + max_text +
                                 "], got " + DimsStr(v));
    }
  }
  return ffi::Error::Success();
}

ffi::Error ParseLayout(const char* target, const char* name,
                       std::string_view s, bool* cl) {
  if (s == "NCDHW") {
    *cl = false;
  } else if (s == "NDHWC") {
    *cl = true;
  } else {
    return Invalid(target, std::string(name) +
                               " must be \"NCDHW\" or \"NDHWC\", got \"" +
                               std::string(s) + "\"");
  }
  return ffi::Error::Success();
}

ffi::Error CheckRank5(const char* target, const Operand& op) {
  if (op.buf->dimensions().size() != 5) {
    return Invalid(target, std::string(op.name) + " must have rank 5, got rank " +
                               std::to_string(op.buf->dimensions().size()) +
                               " with shape " + DimsStr(op.buf->dimensions()));
  }
  return ffi::Error::Success();
}

}  // namespace

std::string DimsStr(ffi::Span<const int64_t> d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(d[i]);
  }
  return s + "]";
}

const char* TypeName(ffi::DataType t) {
  switch (t) {
    case ffi::DataType::F32: return "f32";
    case ffi::DataType::BF16: return "bf16";
    case ffi::DataType::F16: return "f16";
    case ffi::DataType::F64: return "f64";
    case ffi::DataType::S8: return "s8";
    case ffi::DataType::S16: return "s16";
    case ffi::DataType::S32: return "s32";
    case ffi::DataType::S64: return "s64";
    case ffi::DataType::U16: return "u16";
    default: return "an unsupported type";
  }
}

ffi::Error Invalid(const char* target, const std::string& message) {
  return ffi::Error::InvalidArgument(std::string(target) + ": " + message);
}

ffi::DataType FfiType(ElementType t) {
  switch (t) {
    case ElementType::kF32: return ffi::DataType::F32;
    case ElementType::kBF16: return ffi::DataType::BF16;
    case ElementType::kF16: return ffi::DataType::F16;
  }
  return ffi::DataType::F32;
}

ffi::Error CheckFloatOperands(const char* target, const Operand& ref,
                              std::initializer_list<Operand> others,
                              ElementType* t) {
  const ffi::DataType dt = ref.buf->element_type();
  switch (dt) {
    case ffi::DataType::F32: *t = ElementType::kF32; break;
    case ffi::DataType::BF16: *t = ElementType::kBF16; break;
    case ffi::DataType::F16: *t = ElementType::kF16; break;
    default:
      return Invalid(target, std::string(ref.name) +
                                 " element type must be f32, bf16 or f16, got " +
                                 TypeName(dt));
  }
  if (auto e = CheckRank5(target, ref); e.failure()) return e;
  for (const Operand& op : others) {
    if (op.buf->element_type() != dt) {
      return Invalid(target, std::string(op.name) + " element type " +
                                 TypeName(op.buf->element_type()) +
                                 " differs from the " + ref.name +
                                 " element type " + TypeName(dt));
    }
    if (auto e = CheckRank5(target, op); e.failure()) return e;
  }
  return ffi::Error::Success();
}

ffi::Error CheckOperand(const char* target, const Operand& op,
                        ffi::DataType want) {
  if (op.buf->element_type() != want) {
    return Invalid(target, std::string(op.name) + " element type must be " +
                               TypeName(want) + ", got " +
                               TypeName(op.buf->element_type()));
  }
  return CheckRank5(target, op);
}

ffi::Error CheckAttributes(const char* target, const PoolAttrs& a, Geom* g) {
  // Each kernel entry is bounded before any product is formed.
  if (auto e = CheckTriple(target, "kernel_size", a.kernel_size, 1,
                           kMaxWindowElements, "4096");
      e.failure())
    return e;
  if (auto e = CheckTriple(target, "stride", a.stride, 1, kMaxStride,
                           "2^30");
      e.failure())
    return e;
  if (auto e = CheckTriple(target, "padding", a.padding, 0,
                           kMaxWindowElements - 1, "kernel_size - 1");
      e.failure())
    return e;
  const auto& k = a.kernel_size;
  if (k[0] * k[1] * k[2] > kMaxWindowElements) {
    return Invalid(target, "kernel_size " + DimsStr(k) + " has " +
                               std::to_string(k[0] * k[1] * k[2]) +
                               " elements, more than the maximum of 4096");
  }
  for (int i = 0; i < 3; ++i) {
    if (a.padding[i] >= k[i]) {
      return Invalid(
          target, "padding[" + std::to_string(i) + "] = " +
                      std::to_string(a.padding[i]) +
                      " must be smaller than kernel_size[" +
                      std::to_string(i) + "] = " + std::to_string(k[i]) +
                      " (else a window lies wholly in padding), got padding " +
                      DimsStr(a.padding) + " with kernel_size " + DimsStr(k));
    }
  }
  if (auto e = ParseLayout(target, "data_format", a.data_format, &g->in_cl);
      e.failure())
    return e;
  if (auto e =
          ParseLayout(target, "output_format", a.output_format, &g->out_cl);
      e.failure())
    return e;
  g->kD = k[0]; g->kH = k[1]; g->kW = k[2];
  g->sD = a.stride[0]; g->sH = a.stride[1]; g->sW = a.stride[2];
  g->pD = a.padding[0]; g->pH = a.padding[1]; g->pW = a.padding[2];
  return ffi::Error::Success();
}

ffi::Error SetInputShape(const char* target, const char* name,
                         ffi::Span<const int64_t> in, const PoolAttrs& a,
                         Geom* g) {
  for (int64_t v : in) {
    if (v < 0 || v > kMaxDim)
      return Invalid(target, std::string("bad ") + name + " shape " + DimsStr(in));
  }
  g->B = in[0];
  g->C = g->in_cl ? in[4] : in[1];
  const int64_t sp0 = g->in_cl ? 1 : 2;
  g->D = in[sp0];
  g->H = in[sp0 + 1];
  g->W = in[sp0 + 2];
  const char* axes = "DHW";
  int64_t out_ext[3];
  const int64_t n_in[3] = {g->D, g->H, g->W};
  for (int i = 0; i < 3; ++i) {
    // Zero batch or channels: an empty result. A zero spatial extent: every
    // window would lie wholly in padding.
    if (n_in[i] == 0) {
      return Invalid(target, std::string(name) + " shape " + DimsStr(in) +
                                 " (" + std::string(a.data_format) +
                                 ") has a zero " + axes[i] +
                                 " extent: every window would lie wholly in "
                                 "padding");
    }
    const int64_t span = n_in[i] + 2 * a.padding[i];
    if (span < a.kernel_size[i]) {
      return Invalid(
          target, "kernel_size[" + std::to_string(i) + "] = " +
                      std::to_string(a.kernel_size[i]) +
                      " is larger than the padded " + axes[i] + " extent " +
                      std::to_string(n_in[i]) + " + 2*" +
                      std::to_string(a.padding[i]) + " of the " + name +
                      " shape " + DimsStr(in) + " (" +
                      std::string(a.data_format) + ")");
    }
    out_ext[i] = (span - a.kernel_size[i]) / a.stride[i] + 1;
  }
  g->Do = out_ext[0]; g->Ho = out_ext[1]; g->Wo = out_ext[2];
  g->overlap = g->sD < g->kD || g->sH < g->kH || g->sW < g->kW;
  auto covers = [](int64_t n, int64_t no, int64_t k, int64_t s, int64_t p) {
    return s == k && (no - 1) * s - p + k >= n;
  };
  g->full_cover = covers(g->D, g->Do, g->kD, g->sD, g->pD) &&
                  covers(g->H, g->Ho, g->kH, g->sH, g->pH) &&
                  covers(g->W, g->Wo, g->kW, g->sW, g->pW);
  return ffi::Error::Success();
}

ffi::Error CheckOutputShape(const char* target, const Operand& op,
                            ffi::Span<const int64_t> in, const PoolAttrs& a,
                            const Geom& g) {
  const int64_t expect[5] = {
      g.B, g.out_cl ? g.Do : g.C, g.out_cl ? g.Ho : g.Do,
      g.out_cl ? g.Wo : g.Ho, g.out_cl ? g.C : g.Wo};
  auto od = op.buf->dimensions();
  for (int i = 0; i < 5; ++i) {
    if (od[i] != expect[i]) {
      return Invalid(
          target, std::string(op.name) + " shape " + DimsStr(od) + " (" +
                      std::string(a.output_format) +
                      ") disagrees with the input shape " + DimsStr(in) +
                      " (" + std::string(a.data_format) + "), kernel_size " +
                      DimsStr(a.kernel_size) + ", stride " +
                      DimsStr(a.stride) + ", padding " + DimsStr(a.padding) +
                      ": expected " +
                      DimsStr(ffi::Span<const int64_t>(expect, 5)));
    }
  }
  return ffi::Error::Success();
}

ffi::Error CheckSameShape(const char* target, const Operand& op,
                          ffi::Span<const int64_t> want,
                          const char* want_name) {
  if (DimsStr(op.buf->dimensions()) != DimsStr(want)) {
    return Invalid(target, std::string(op.name) + " shape " +
                               DimsStr(op.buf->dimensions()) +
                               " differs from the " + want_name + " shape " +
                               DimsStr(want));
  }
  return ffi::Error::Success();
}

}  // namespace pool3d
