// One window search for every specialised window kernel (window_units.h,
// fused_units.h): V lanes (windows in NCDHW, channels in NDHWC), their taps
// fed last to first, so that `>=` leaves the first tap holding the maximum
// and an overwrite on equality the first tap equal to a value.
//
// Whatever the layout, a caller feeds one tap at a time: the V lanes' element
// bits as 32-bit words (kWords of them: one lane a word, or two 16-bit lanes)
// and the tap index. Padding is never fed: the callers read a
// padded tap at the nearest real position of the same window (clamped
// coordinates) under that position's tap index, a copy of a real tap that
// changes neither the maximum, nor which tap is first, nor any other rule
// (docs/gpu.md, "Windows at the border").
//
// 16-bit types run two lanes a packed word (HSET2 / HMNMX2 / VIMNMX.S16x2),
// the rest one lane at a time as f32: the same rules either way.
#ifndef POOL3D_GPU_CUDA_SEARCH_H_
#define POOL3D_GPU_CUDA_SEARCH_H_

#include <cstdint>

#include "unit_common.h"

namespace pool3d {
namespace gpu {

// Mode kMax, kIndices: the first maximum (NaN propagated by the maximum,
// which then says the window held one); kMax also keeps, per lane, the
// largest element bits as signed integers: where the maximum is a zero that
// is 0 exactly when some tap holds +0 (-0 and every negative value have the
// sign bit set). kSelect: the first tap equal to a target (NaN equals nothing).
template <class T, int V, int Mode, bool kPacked = sizeof(typename T::M) == 2 && V % 2 == 0>
struct WindowSearch;

// One lane at a time, as f32.
template <class T, int V, int Mode>
struct WindowSearch<T, V, Mode, false> {
  using M = typename T::M;
  static constexpr int kWords = V;
  static constexpr bool kSelectOnly = Mode == kSelect;
  static constexpr bool kZeros = Mode == kMax;
  float m[V], want[V];
  int32_t tap[V], zero[V];

  POOL3D_HD explicit WindowSearch(const float* target) {
#pragma unroll
    for (int j = 0; j < V; ++j) {
      m[j] = NegativeInfinity();
      want[j] = kSelectOnly ? target[j] : 0.0f;
      tap[j] = -1;
      zero[j] = INT32_MIN;
    }
  }

  // The V lanes' element bits x (one a word), all at tap t.
  POOL3D_HD void Step(const uint32_t* x, int32_t t) {
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const float v = Wide<T>(M(x[j]));
      if constexpr (kSelectOnly) {
        tap[j] = v == want[j] ? t : tap[j];
      } else {
        tap[j] = v >= m[j] ? t : tap[j];
        m[j] = MaxNan(m[j], v);
        if constexpr (kZeros) {
          const int32_t bits = sizeof(M) == 4 ? int32_t(x[j]) : int32_t(int16_t(uint16_t(x[j])));
          zero[j] = bits > zero[j] ? bits : zero[j];
        }
      }
    }
  }

  POOL3D_HD void Finish(Best* best) const {
#pragma unroll
    for (int j = 0; j < V; ++j) {
      best[j].m = m[j];
      best[j].tap = tap[j];
      best[j].plus_zero = zero[j] == 0;
    }
  }
};

// 16-bit lanes two a packed word: the maxima, the taps (two 16-bit halves
// each) and, for kSelect, the values looked for.
template <class T, int V, int Mode>
struct WindowSearch<T, V, Mode, true> {
  using M = typename T::M;
  static constexpr int N = V / 2;
  static constexpr int kWords = N;
  static constexpr bool kSelectOnly = Mode == kSelect;
  static constexpr bool kZeros = Mode == kMax;
  uint32_t m[N], tap[N], want[N], zero[N];

  POOL3D_HD explicit WindowSearch(const float* target) {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      m[i] = NegInf2<T>();
      tap[i] = 0xffffffffu;  // -1, -1
      zero[i] = 0x80008000u;
      want[i] = 0;
      if constexpr (kSelectOnly)
        want[i] = uint32_t(Narrow<T>(target[2 * i])) | uint32_t(Narrow<T>(target[2 * i + 1])) << 16;
    }
  }

  // The V lanes' element bits, two a word (lane 2i in word i's low half), all at tap t.
  POOL3D_HD void Step(const uint32_t* x, int32_t t) {
    const uint32_t t2 = uint32_t(t) * 0x10001u;
#pragma unroll
    for (int i = 0; i < N; ++i) StepWord(i, x[i], t2);
  }

  // Word i's two lanes w at taps t2 (one per half).
  POOL3D_HD void StepWord(int i, uint32_t w, uint32_t t2) {
    const uint32_t take = kSelectOnly ? EqMask2<T>(w, want[i]) : GeMask2<T>(w, m[i]);
    tap[i] = (t2 & take) | (tap[i] & ~take);
    if constexpr (!kSelectOnly) m[i] = MaxNan2<T>(m[i], w);
    if constexpr (kZeros) zero[i] = MaxS2(zero[i], w);
  }

  POOL3D_HD void Finish(Best* best) const {
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const uint32_t half = (j & 1) ? 16 : 0;
      best[j].m = Wide<T>(uint16_t(m[j / 2] >> half));
      best[j].tap = int32_t(int16_t(uint16_t(tap[j / 2] >> half)));
      best[j].plus_zero = uint16_t(zero[j / 2] >> half) == 0;
    }
  }
};

// The given outputs of V windows as f32 search targets (a NaN equals nothing).
template <class T, int V>
POOL3D_HD inline void LoadTargets(const typename T::M* y, float* target) {
  typename T::M yv[V];
  LoadVec<typename T::M, V>(y, yv);
#pragma unroll
  for (int j = 0; j < V; ++j) target[j] = Wide<T>(yv[j]);
}

}  // namespace gpu
}  // namespace pool3d

#endif  // POOL3D_GPU_CUDA_SEARCH_H_
