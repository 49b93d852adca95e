// Shared by the CPU and the CUDA kernels (bindings/shared_kernels/): the five
// calls and the buffers of one, as both platforms' handlers (ffi_calls.h) hand
// them to their kernels. Plain C++: the kernels know nothing of XLA.
#ifndef POOL3D_SHARED_KERNELS_CALLS_H_
#define POOL3D_SHARED_KERNELS_CALLS_H_

#include <cstdint>

namespace pool3d {

// The calls (docs/contract.md), as the handlers and the platforms' runs name
// them.
enum class Call : int {
  kForward = 0, kForwardOutput = 1, kFromIndices = 2, kBackward = 3,
  kFromInput = 4,
};

// The buffers of one call, as its kernels read and write them (null: not an
// operand of the call).
struct CallOperands {
  const void* x = nullptr;        // input
  const void* y_in = nullptr;     // output given (backward)
  const void* go = nullptr;       // grad_output
  const int16_t* idx_in = nullptr;
  void* y = nullptr;              // output written
  int16_t* idx = nullptr;         // indices written
  void* dx = nullptr;             // grad_input written
};

}  // namespace pool3d

#endif  // POOL3D_SHARED_KERNELS_CALLS_H_
