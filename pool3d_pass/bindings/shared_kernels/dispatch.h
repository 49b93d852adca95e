// Shared by the CPU and the CUDA kernels (bindings/shared_kernels/): both
// platforms dispatch on ElementType through this one switch.
//
// The one mapping from ElementType to its element-type struct
// (element_types.h), for the CPU routines and the CUDA launches.
#ifndef POOL3D_SHARED_KERNELS_DISPATCH_H_
#define POOL3D_SHARED_KERNELS_DISPATCH_H_

#include "element_types.h"

namespace pool3d {

// Calls fn(T{}) with T = F32T, BF16T or F16T for t.
template <class Fn>
void ForElementType(ElementType t, Fn&& fn) {
  switch (t) {
    case ElementType::kF32: fn(F32T{}); return;
    case ElementType::kBF16: fn(BF16T{}); return;
    case ElementType::kF16: fn(F16T{}); return;
  }
}

}  // namespace pool3d

#endif  // POOL3D_SHARED_KERNELS_DISPATCH_H_
