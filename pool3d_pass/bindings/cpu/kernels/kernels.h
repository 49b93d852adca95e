// The pooling kernels as plain C++ routines, one per custom-call target.
//
// Each takes a validated geometry (shared_kernels/validate.h) and raw buffers,
// and computes exactly what docs/contract.md defines for its call. They do not
// know about XLA; they may throw std::bad_alloc (scratch memory), which the FFI
// handlers turn into an error.
#ifndef POOL3D_KERNELS_KERNELS_H_
#define POOL3D_KERNELS_KERNELS_H_

#include <cstdint>

#include "shared_kernels/element_types.h"
#include "shared_kernels/geometry.h"

namespace pool3d {

// pool3d.max_pooling_3d_backward: grad_input from (grad_output, input, output).
void MaxPool3dBackward(const Geom& g, ElementType t, const void* grad_output,
                       const void* input, const void* output,
                       void* grad_input);

// pool3d.max_pooling_3d_forward: (output, indices) from input.
void MaxPool3dForward(const Geom& g, ElementType t, const void* input,
                      void* output, int16_t* indices);

// pool3d.max_pooling_3d_forward_output: output (y) only, from input.
void MaxPool3dForwardOutput(const Geom& g, ElementType t, const void* input,
                            void* output);

// pool3d.max_pooling_3d_backward_from_indices: grad_input from
// (grad_output, indices).
void MaxPool3dBackwardFromIndices(const Geom& g, ElementType t,
                                  const void* grad_output,
                                  const int16_t* indices, void* grad_input);

// pool3d.max_pooling_3d_backward_from_input: grad_input from
// (grad_output, input), without indices in memory.
void MaxPool3dBackwardFromInput(const Geom& g, ElementType t,
                                const void* grad_output, const void* input,
                                void* grad_input);

}  // namespace pool3d

#endif  // POOL3D_KERNELS_KERNELS_H_
