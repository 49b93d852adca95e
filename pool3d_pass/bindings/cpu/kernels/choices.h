// The measured predicates by which the CPU kernels choose between their
// variants, in one place: each says where one variant beats another, and
// why. The figures that set them: CHANGELOG.md (2026-12-05, "The CPU
// kernels' variant choices in one header").
//
// Used by the dispatch of forward.cc (LanesPay), backward_from_indices.cc
// (OverlapGatherPays, FromIndicesGatherPays) and backward_from_input.cc
// (ViaIndicesPays, LanesPay).
#ifndef POOL3D_KERNELS_CHOICES_H_
#define POOL3D_KERNELS_CHOICES_H_

#include <cstdint>
#include <type_traits>

#include "layouts.h"
#include "ndhwc_accumulator.h"
#include "shared_kernels/element_types.h"
#include "shared_kernels/geometry.h"

namespace pool3d {

// The channels-last lane search (ForwardNdhwcLanes) over the separable one:
// a full vector of channels, and windows that overlap little (at most 8 taps
// per window and stride cell), since the separable search shares the work
// between overlapping windows.
inline bool LanesPay(const Geom& g, int64_t lanes) {
  return g.C >= lanes && g.Taps() <= 8 * g.sD * g.sH * g.sW;
}

#ifdef POOL3D_OVERLAP_GATHER
// Channels-last bf16 windows that overlap: the AVX2 gather
// (FromIndicesNdhwcOverlapGatherBf16) over the scatter, which needs an f32
// accumulator, a zeroing pass and a rounding pass; from 32 channels, and at
// 24 (slower at 16). f32 accumulates in dx itself, and f16 has no assumed
// conversion instructions: both keep the scatter.
inline bool OverlapGatherPays(const Geom& g) {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  return avx2 && g.overlap && (g.C >= 32 || g.C == 24);
}
#endif

// Channels-last windows that do not overlap: the gather
// (FromIndicesNdhwcGather) over the scatter, which zeroes dx and adds one
// lane at a time (f32: from a vector of 8 channels) or needs an f32
// accumulator and a rounding pass (bf16/f16: from a full vector, or wherever
// that accumulator would pass 8 MiB; the gather needs none).
template <class M>
bool FromIndicesGatherPays(const Geom& g) {
  if (sizeof(M) == 4) return LanesPay(g, 8);
  const int64_t accumulator_bytes =
      HalfAccumulatorSlices(g) * g.H * g.W * g.C * int64_t(sizeof(float));
  return LanesPay(g, 32 / sizeof(M)) || accumulator_bytes > (int64_t{8} << 20);
}

// Channels-last from_input as what it equals, from_indices(grad_output,
// forward(input).indices), over the fused search: where the forward's own
// fast search and from_indices' gather or scatter do better than the fused
// search and its accumulator (windows without padding and fewer channels
// than a vector; overlapping windows where the lanes pay, f32 from 32
// channels, bf16 where the overlapping gather pays too). Elsewhere, and with
// disjoint windows and a full vector (FromInputNdhwcGather), the fused call
// is level or ahead.
template <class T>
bool ViaIndicesPays(const Geom& g) {
  constexpr int64_t kLanes = 32 / sizeof(typename T::M);
  if (WindowsDisjoint(g)) return g.C < kLanes;
  if (!g.overlap || !LanesPay(g, kLanes)) return false;
  if constexpr (std::is_same_v<T, F32T>) return g.C >= 32;
#ifdef POOL3D_OVERLAP_GATHER
  if constexpr (std::is_same_v<T, BF16T>) return OverlapGatherPays(g);
#endif
  return false;
}

}  // namespace pool3d

#endif  // POOL3D_KERNELS_CHOICES_H_
