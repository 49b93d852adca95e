// The separable first-max search over one NCDHW (b, c) plane.
//
// Per plane: for each padded depth slice, stage W (each input row -> first
// maximum over tw of every window, per stride phase so that every tap reads a
// contiguous run) and stage H (-> first maximum over th) leave one Ho x Wo
// slice of (key, index); stage D then reduces kD such slices per output
// depth, all in long contiguous runs, and hands the Ho x Wo winners of that
// depth to a sink. O(kD + kH + kW) vectorised compare-selects per window
// instead of kD * kH * kW.
//
// The index a winner carries is tw + th * step_h + td * step_d: with steps
// (W, H * W) its offset in the plane from the window's origin (what a
// scatter needs), with steps (kW, kH * kW) its tap number (what the forward
// writes). The key order KP decides what wins (see element_types.h).
#ifndef POOL3D_KERNELS_COMMON_SEPARABLE_NCDHW_H_
#define POOL3D_KERNELS_COMMON_SEPARABLE_NCDHW_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "first_max.h"
#include "scratch_buffer.h"
#include "shared_kernels/element_types.h"
#include "shared_kernels/geometry.h"

namespace pool3d {

struct SepScratch {
  ScratchBuffer<float> acc;
  std::vector<int32_t> keyrow, phases, rk, ri, hk, hi, dk, di;
  std::vector<int32_t> pos, sel;
};

// The f32 accumulator of one (b, c) plane of DHW elements, zeroed: the
// result plane itself for f32 (rounded nowhere), else the scratch's.
template <bool kF32, class M>
inline float* ZeroedPlaneAccumulator(SepScratch& s, M* dp, int64_t DHW) {
  float* acc;
  if constexpr (kF32) {
    acc = reinterpret_cast<float*>(dp);
  } else {
    acc = s.acc.Reserve(DHW);
  }
  std::fill(acc, acc + DHW, 0.0f);
  return acc;
}

// Length of one stride phase of a padded key row: positions r + j * sW,
// j < PhaseLength, hold every tap of every window of the row.
inline int64_t PhaseLength(const Geom& g) {
  return g.Wo + (g.kW - 1) / g.sW;
}

// Sizes the scratch for planes of geometry g.
inline void PrepareSeparable(const Geom& g, SepScratch& s) {
  const int64_t Wp = g.W + 2 * g.pW, L = PhaseLength(g);
  const int64_t Dp = g.D + 2 * g.pD, Hp = g.H + 2 * g.pH;
  const int64_t HoWo = g.Ho * g.Wo;
  // Stage W reads padded positions below Wp + min(sW, kW) - 1.
  s.keyrow.assign(Wp + g.kW, kPadKey);
  s.phases.resize(std::min(g.sW, g.kW) * L);
  s.rk.resize(Hp * g.Wo);
  s.ri.resize(Hp * g.Wo);
  s.hk.resize(Dp * HoWo);
  s.hi.resize(Dp * HoWo);
  s.dk.resize(HoWo);
  s.di.resize(HoWo);
  s.pos.resize(g.Wo);
}

// Stage W for one input row `xr` (W elements): rk/ri[ow] = first maximum of
// window ow over tw and its tap tw. For sW > 1 the padded key row is first
// split into sW phases so that every tap reads a contiguous run.
template <class T, class KP>
void StageW(const Geom& g, const typename T::M* xr, SepScratch& s,
            int32_t* rk, int32_t* ri) {
  const int64_t Wo = g.Wo;
  const int64_t L = PhaseLength(g);
  int32_t* keyrow = s.keyrow.data();  // padding already holds kPadKey
  Keys<T, KP>(xr, keyrow + g.pW, g.W);
  auto tap_row = [&](int64_t tw) -> const int32_t* {
    if (g.sW == 1) return keyrow + tw;
    return s.phases.data() + (tw % g.sW) * L + tw / g.sW;
  };
  if (g.sW == 2 && g.kW >= 2) {
    SplitPhases2(keyrow, s.phases.data(), s.phases.data() + L, L);
  } else if (g.sW > 1) {
    const int64_t phases = std::min(g.sW, g.kW);  // taps never reach the rest
    for (int64_t r = 0; r < phases; ++r) {
      int32_t* __restrict ph = s.phases.data() + r * L;
      const int32_t* __restrict kr = keyrow + r;
      for (int64_t j = 0; j < L; ++j) ph[j] = kr[j * g.sW];
    }
  }
  ReduceTaps(tap_row, g.kW, rk, ri, Wo);
}

// Stages W and H for padded depth slice d: hk/hi (Ho x Wo) = first maximum
// over (th, tw) and its index th * step_h + tw.
template <class T, class KP>
void StageWH(const Geom& g, const typename T::M* xp, int64_t d,
             SepScratch& s, int32_t step_h, int32_t* hk, int32_t* hi) {
  const int64_t Wo = g.Wo, Hp = g.H + 2 * g.pH, HoWo = g.Ho * Wo;
  const int64_t rd = d - g.pD;
  if (rd < 0 || rd >= g.D) {  // a padding slice: nothing can win here
    std::fill(hk, hk + HoWo, kPadKey);
    std::fill(hi, hi + HoWo, 0);
    return;
  }
  int32_t* rk = s.rk.data();
  int32_t* ri = s.ri.data();
  for (int64_t h = 0; h < Hp; ++h) {
    const int64_t rh = h - g.pH;
    if (rh < 0 || rh >= g.H) {
      std::fill(rk + h * Wo, rk + (h + 1) * Wo, kPadKey);
      std::fill(ri + h * Wo, ri + (h + 1) * Wo, 0);
    } else {
      StageW<T, KP>(g, xp + (rd * g.H + rh) * g.W, s, rk + h * Wo,
                    ri + h * Wo);
    }
  }
  // With sH == 1 the rows of all oh are one contiguous run per th.
  const int64_t runs = g.sH == 1 ? 1 : g.Ho;
  const int64_t len = g.sH == 1 ? HoWo : Wo;
  for (int64_t r = 0; r < runs; ++r) {
    const int64_t src = r * g.sH * Wo, dst = r * Wo;
    ReduceRows(rk + src, ri + src, Wo, g.kH, step_h, hk + dst, hi + dst, len);
  }
}

// The search over plane xp (scratch prepared by PrepareSeparable): calls
// sink(od, dk, di) for od = 0 .. Do - 1 in order, dk/di holding the Ho x Wo
// winners' keys and indices of output depth od.
template <class T, class KP, class Sink>
void SearchPlane(const Geom& g, const typename T::M* xp, SepScratch& s,
                 int32_t step_h, int32_t step_d, Sink&& sink) {
  const int64_t Dp = g.D + 2 * g.pD, HoWo = g.Ho * g.Wo;
  for (int64_t d = 0; d < Dp; ++d)
    StageWH<T, KP>(g, xp, d, s, step_h, s.hk.data() + d * HoWo,
                   s.hi.data() + d * HoWo);
  int32_t* dk = s.dk.data();
  int32_t* di = s.di.data();
  for (int64_t od = 0; od < g.Do; ++od) {
    const int32_t* hk0 = s.hk.data() + od * g.sD * HoWo;
    const int32_t* hi0 = s.hi.data() + od * g.sD * HoWo;
    ReduceRows(hk0, hi0, HoWo, g.kD, step_d, dk, di, HoWo);
    sink(od, static_cast<const int32_t*>(dk), static_cast<const int32_t*>(di));
  }
}

}  // namespace pool3d

#endif  // POOL3D_KERNELS_COMMON_SEPARABLE_NCDHW_H_
