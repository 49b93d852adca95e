// The pooling kernels as plain C++ routines, one per custom-call target.
//
// Each takes a validated geometry (shared_kernels/validate.h) and raw buffers,
// and computes exactly what docs/contract.md defines for its call. They do not
// know about XLA; they may throw std::bad_alloc (scratch memory), which the FFI
// handlers turn into an error.
#ifndef POOL3D_KERNELS_KERNELS_H_
#define POOL3D_KERNELS_KERNELS_H_

#include <cstdint>

#include "shared_kernels/calls.h"
#include "shared_kernels/element_types.h"
#include "shared_kernels/geometry.h"

namespace pool3d {

// Each reads and writes the call's buffers of `ops` (shared_kernels/calls.h),
// typed by t; a buffer the call does not name is null.

// pool3d.max_pooling_3d_backward: dx from (go, x, y_in).
void MaxPool3dBackward(const Geom& g, ElementType t, const CallOperands& ops);

// pool3d.max_pooling_3d_forward: (y, idx) from x.
void MaxPool3dForward(const Geom& g, ElementType t, const CallOperands& ops);

// pool3d.max_pooling_3d_forward_output: y only, from x.
void MaxPool3dForwardOutput(const Geom& g, ElementType t, const CallOperands& ops);

// pool3d.max_pooling_3d_backward_from_indices: dx from (go, idx_in).
void MaxPool3dBackwardFromIndices(const Geom& g, ElementType t, const CallOperands& ops);

// pool3d.max_pooling_3d_backward_from_input: dx from (go, x), without indices
// in memory.
void MaxPool3dBackwardFromInput(const Geom& g, ElementType t, const CallOperands& ops);

}  // namespace pool3d

#endif  // POOL3D_KERNELS_KERNELS_H_
