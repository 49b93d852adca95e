// The CUDA kernels' work per thread ("unit"), as __host__ __device__ code.
//
// A kernel is a grid-stride loop over units (kernels.cu); what one unit does
// is in this folder's unit headers, so that the host test
// (tests/bindings/gpu/test_cuda_elements.py) compiles exactly this code for
// the CPU, runs every unit of every launch the launch plan (launch_plan.h)
// makes, and compares each result with the CPU kernels bit for bit:
// - unit_common.h: windows, layouts, a launch's parameters, vector access,
//   element values, packed 16-bit operations, the unit decoding;
// - search.h: the one window search every specialised window kernel runs;
// - window_units.h: the window kernel (forward, forward_output, indices,
//   backward's selection) and the taps of a specialised window;
// - fused_units.h: backward / backward_from_input on non-overlapping windows;
// - gather_units.h: the gradient from indices;
// - generic_units.h: what the Generic kernels share (their loads batched).
//
// Two kinds of window:
// - Fixed<kD, kH, kW, sD, sH, sW, pD, pH, pW>: the classes users run (k2 s2,
//   (1,2,2), k3 s2 p1, k3 s1 p1), with the window as compile-time constants.
//   Taps are unrolled, rows of the window are read with 128-bit loads, the
//   candidate windows of a gradient element follow from its position at
//   compile time; a unit is V outputs (or V windows, or V input elements)
//   along the fastest axis: W in NCDHW, channels in NDHWC.
// - Generic<I>: any window and any pair of layouts, one element per unit,
//   through the shared scan rules (shared_kernels/window_scan.h) and the
//   division-free decoding of fast_div.h; I is the offset type (int64_t only
//   for planes of 2^31 elements or more).
//
// The rules are the contract's (docs/contract.md), as the CPU kernels apply
// them: the first maximum in row-major tap order (keys:
// shared_kernels/element_types.h, +0 and -0 equal, a NaN wins and selects no
// tap), the output +0 where the maximum is a zero and some tap is +0, gradients
// summed in f32 in ascending window order and rounded once, each dx element
// written by one thread.
#ifndef POOL3D_GPU_CUDA_UNITS_H_
#define POOL3D_GPU_CUDA_UNITS_H_

#include "fused_units.h"
#include "gather_units.h"
#include "generic_units.h"
#include "search.h"
#include "unit_common.h"
#include "window_units.h"

#endif  // POOL3D_GPU_CUDA_UNITS_H_
