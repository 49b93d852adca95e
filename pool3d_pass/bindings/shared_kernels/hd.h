// Shared by the CPU and the CUDA kernels (bindings/shared_kernels/): the marker
// that lets one inline function compile for the host and the device; every
// shared header uses it.
//
// POOL3D_HD marks the rules shared by the CPU kernels and the CUDA kernels
// (pool3d_pass/bindings/gpu/cuda/): the selection (element_types.h,
// window_scan.h) and the window geometry (geometry.h). Compiled by nvcc they
// are __host__ __device__; for the host compiler the macro is empty, so the
// CPU build sees exactly the inline functions it had.
#ifndef POOL3D_SHARED_KERNELS_HD_H_
#define POOL3D_SHARED_KERNELS_HD_H_

#if defined(__CUDACC__)
#define POOL3D_HD __host__ __device__
#else
#define POOL3D_HD
#endif

#endif  // POOL3D_SHARED_KERNELS_HD_H_
