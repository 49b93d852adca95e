// Shared by the CPU and the CUDA kernels (bindings/shared_kernels/): compiled
// into the CPU extension and the CUDA library (validate.cc) alike, so both
// reject a bad call with the same message.
//
// Validation shared by every FFI handler: operands, attributes and shapes.
//
// Every violation of docs/contract.md becomes ffi::Error::InvalidArgument,
// "<target>: <what>, got <value>". On success the handler holds a Geom that
// every kernel can take as is: extents >= 1, every window holding a real
// element, and no product of attributes or extents that can overflow int64.
#ifndef POOL3D_SHARED_KERNELS_VALIDATE_H_
#define POOL3D_SHARED_KERNELS_VALIDATE_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "element_types.h"
#include "geometry.h"
#include "xla/ffi/api/ffi.h"

namespace pool3d {

namespace ffi = xla::ffi;

struct PoolAttrs {
  ffi::Span<const int64_t> kernel_size, stride, padding;
  std::string_view data_format, output_format;
};

struct Operand {
  const char* name;
  const ffi::AnyBuffer* buf;
};

std::string DimsStr(ffi::Span<const int64_t> d);
const char* TypeName(ffi::DataType t);
ffi::Error Invalid(const char* target, const std::string& message);

// `ref` has element type f32, bf16 or f16 (returned in *t), and it and
// `others` have rank 5 and that element type.
ffi::Error CheckFloatOperands(const char* target, const Operand& ref,
                              std::initializer_list<Operand> others,
                              ElementType* t);

// `op` has rank 5 and element type `want`.
ffi::Error CheckOperand(const char* target, const Operand& op,
                        ffi::DataType want);

// The attributes (kernel_size, stride, padding, layouts) into g.
ffi::Error CheckAttributes(const char* target, const PoolAttrs& a, Geom* g);

// The forward-input shape `in` (data_format), named `name`, into g: B, C,
// spatial extents, output extents, overlap. Call after CheckAttributes.
ffi::Error SetInputShape(const char* target, const char* name,
                         ffi::Span<const int64_t> in, const PoolAttrs& a,
                         Geom* g);

// `op`'s shape is the output shape of g in output_format.
ffi::Error CheckOutputShape(const char* target, const Operand& op,
                            ffi::Span<const int64_t> in, const PoolAttrs& a,
                            const Geom& g);

// `op`'s shape equals `want` (the shape of `want_name`).
ffi::Error CheckSameShape(const char* target, const Operand& op,
                          ffi::Span<const int64_t> want,
                          const char* want_name);

// The XLA element type of ElementType t.
ffi::DataType FfiType(ElementType t);

}  // namespace pool3d

#endif  // POOL3D_SHARED_KERNELS_VALIDATE_H_
