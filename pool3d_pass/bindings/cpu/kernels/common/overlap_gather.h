// The gather formulation of backward_from_indices where windows overlap,
// channels-last bf16 in vectors of 16 channels (and one of 8), with AVX2:
// each input pixel reads every window that covers it, in ascending (od, oh,
// ow) order (the order the scatter adds in, so the sums are the same bits),
// and adds that window's grad_output, lane by lane, where the window's index
// names the pixel's own tap. Up to 64 lanes are summed in f32 registers
// across all covering windows and rounded once into dx: no zeroing pass, no
// accumulator plane, no rounding pass.
//
// A non-matching window adds +0.0, which leaves an f32 sum that started at
// +0 unchanged (such a sum is never -0). A window whose index is -1, out of
// range or a padding tap matches no real pixel's tap. bf16 halves widen to
// f32 by interleaving with zeros (lanes 0-3, 8-11 and 4-7, 12-15), and the
// rounded sums pack back in lane order.
#ifndef POOL3D_KERNELS_COMMON_OVERLAP_GATHER_H_
#define POOL3D_KERNELS_COMMON_OVERLAP_GATHER_H_

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "shared_kernels/geometry.h"

namespace pool3d {

// The windows covering each position of one axis, o ascending: position i
// lies in windows o[start[i]] .. o[start[i + 1] - 1], as their tap t.
struct AxisCover {
  std::vector<int32_t> start, o, t;
  std::vector<int64_t> scaled;  // o * scale: the window's offset
  AxisCover(int64_t n, int64_t k, int64_t s, int64_t p, int64_t n_out,
            int64_t scale = 1) {
    start.push_back(0);
    for (int64_t i = 0; i < n; ++i) {
      int64_t lo, hi;
      CoveringWindows<int64_t>(i + p, k, s, n_out, &lo, &hi);
      for (int64_t oo = lo; oo <= hi; ++oo) {
        o.push_back(int32_t(oo));
        t.push_back(int32_t(i + p - oo * s));
        scaled.push_back(oo * scale);
      }
      start.push_back(int32_t(o.size()));
    }
  }
};

// One input row's covering windows: the (od, oh) output rows that cover it
// (ascending; the offset of each in idx and go, which share one layout of
// Do x Ho x Wo pixels of C lanes, and its first tap (td * kH + th) * kW),
// and the W axis's cover. Pixel w's windows are, for each row p, the windows
// cw.o[i] at tap row_tap[p] + cw.t[i], i in [cw.start[w], cw.start[w + 1]).
struct CoverRows {
  const int64_t* row_off;
  const int32_t* row_tap;
  int64_t nrows;
  const AxisCover& cw;
  int64_t C;  // lanes per pixel (the channels)
};

// The covers of a geometry along D, H and W (cw's offsets scaled by C).
struct OverlapCovers {
  AxisCover cd, ch, cw;
  explicit OverlapCovers(const Geom& g)
      : cd(g.D, g.kD, g.sD, g.pD, g.Do), ch(g.H, g.kH, g.sH, g.pH, g.Ho),
        cw(g.W, g.kW, g.sW, g.pW, g.Wo, g.C) {}

  // Input row (d, h)'s covering output rows, their offsets within one batch.
  CoverRows Rows(const Geom& g, int64_t d, int64_t h, std::vector<int64_t>& off,
                 std::vector<int32_t>& tap) const {
    off.clear();
    tap.clear();
    for (int32_t i = cd.start[d]; i < cd.start[d + 1]; ++i)
      for (int32_t j = ch.start[h]; j < ch.start[h + 1]; ++j) {
        off.push_back((int64_t(cd.o[i]) * g.Ho + ch.o[j]) * g.Wo * g.C);
        tap.push_back(int32_t((cd.t[i] * g.kH + ch.t[j]) * g.kW));
      }
    return CoverRows{off.data(), tap.data(), int64_t(off.size()), cw, g.C};
  }
};

// f32 to bf16 bits, round to nearest even, for lanes that are not NaN.
inline __attribute__((target("avx2"))) __m256i RoundNumberToBf16Bits(__m256 v) {
  const __m256i u = _mm256_castps_si256(v);
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16),
                                       _mm256_set1_epi32(1));
  return _mm256_srli_epi32(
      _mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), odd)),
      16);
}

// The same for any lane: a NaN keeps its sign and top payload, made quiet.
inline __attribute__((target("avx2"))) __m256i RoundToBf16Bits(__m256 v) {
  const __m256i u = _mm256_castps_si256(v);
  const __m256i r = RoundNumberToBf16Bits(v);
  const __m256i nan = _mm256_cmpgt_epi32(
      _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
      _mm256_set1_epi32(0x7f800000));
  const __m256i quiet =
      _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
  return _mm256_blendv_epi8(r, quiet, nan);
}

// 16 f32 sums (lo: lanes 0-3 and 8-11, hi: 4-7 and 12-15, as the bf16
// halves were widened) rounded to bf16 and stored in lane order; kAnyNan:
// some lane may be NaN (RoundToBf16Bits), else RoundNumberToBf16Bits.
template <bool kAnyNan>
__attribute__((target("avx2"))) inline void StoreRoundedBf16(__m256 lo,
                                                             __m256 hi,
                                                             uint16_t* out) {
  const __m256i l = kAnyNan ? RoundToBf16Bits(lo) : RoundNumberToBf16Bits(lo);
  const __m256i h = kAnyNan ? RoundToBf16Bits(hi) : RoundNumberToBf16Bits(hi);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out),
                      _mm256_packus_epi32(l, h));
}

// 8 f32 sums in lane order rounded to bf16 and stored (kAnyNan as above).
template <bool kAnyNan>
__attribute__((target("avx2"))) inline void StoreRoundedBf16x8(__m256 v,
                                                               uint16_t* out) {
  const __m256i r = kAnyNan ? RoundToBf16Bits(v) : RoundNumberToBf16Bits(v);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out),
                   _mm_packus_epi32(_mm256_castsi256_si128(r),
                                    _mm256_extracti128_si256(r, 1)));
}

// Lanes [c0, c0 + 16 * NV) of pixel w (out: the pixel's first lane), and,
// with kHalf, lanes [c8, c8 + 8) in the same walk over the covering windows.
template <int NV, bool kHalf>
__attribute__((target("avx2"))) inline void SumPixelBlock(
    const CoverRows& cr, const int16_t* idx, const uint16_t* go, int64_t w,
    int64_t c0, int64_t c8, uint16_t* out) {
  __m256 lo[NV > 0 ? NV : 1], hi[NV > 0 ? NV : 1];
  for (int v = 0; v < NV; ++v) lo[v] = hi[v] = _mm256_setzero_ps();
  __m256 half = _mm256_setzero_ps();
  const __m256i zero = _mm256_setzero_si256();
  const int32_t i0 = cr.cw.start[w], i1 = cr.cw.start[w + 1];
  for (int64_t p = 0; p < cr.nrows; ++p) {
    for (int32_t i = i0; i < i1; ++i) {
      const int64_t pixel = cr.row_off[p] + cr.cw.scaled[i];
      const int64_t base = pixel + c0;
      const __m256i tap =
          _mm256_set1_epi16(int16_t(cr.row_tap[p] + cr.cw.t[i]));
      const __m256i* id = reinterpret_cast<const __m256i*>(idx + base);
      const __m256i* g = reinterpret_cast<const __m256i*>(go + base);
      for (int v = 0; v < NV; ++v) {
        const __m256i m = _mm256_cmpeq_epi16(_mm256_loadu_si256(id + v), tap);
        const __m256i x = _mm256_and_si256(_mm256_loadu_si256(g + v), m);
        lo[v] = _mm256_add_ps(
            lo[v], _mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, x)));
        hi[v] = _mm256_add_ps(
            hi[v], _mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, x)));
      }
      if constexpr (kHalf) {
        const __m128i m = _mm_cmpeq_epi16(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(idx + pixel + c8)),
            _mm256_castsi256_si128(tap));
        const __m128i x = _mm_and_si128(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(go + pixel + c8)),
            m);
        half = _mm256_add_ps(
            half, _mm256_castsi256_ps(
                      _mm256_slli_epi32(_mm256_cvtepu16_epi32(x), 16)));
      }
    }
  }
  // A NaN sum needs RoundToBf16Bits's quieting; it is rare (a NaN or
  // infinite gradient), so one unordered test per pixel block picks the
  // shorter rounding for the rest.
  __m256 unordered = _mm256_cmp_ps(half, half, _CMP_UNORD_Q);
  for (int v = 0; v < NV; ++v)
    unordered = _mm256_or_ps(unordered,
                             _mm256_cmp_ps(lo[v], hi[v], _CMP_UNORD_Q));
  if (_mm256_testz_ps(unordered, unordered)) {
    for (int v = 0; v < NV; ++v)
      StoreRoundedBf16<false>(lo[v], hi[v], out + c0 + 16 * v);
    if constexpr (kHalf) StoreRoundedBf16x8<false>(half, out + c8);
  } else {
    for (int v = 0; v < NV; ++v)
      StoreRoundedBf16<true>(lo[v], hi[v], out + c0 + 16 * v);
    if constexpr (kHalf) StoreRoundedBf16x8<true>(half, out + c8);
  }
}

// Lanes [c0, C) of a pixel, 16 * NV + r of them, r < 16: NV whole vectors,
// then the last r lanes as one 8-lane vector ending at lane C (r <= 8) or a
// 16-lane one (r > 8), its first lanes summed again to the same bits.
template <int NV>
__attribute__((target("avx2"))) inline void SumPixelTail(
    const CoverRows& cr, const int16_t* idx, const uint16_t* go, int64_t w,
    int64_t c0, uint16_t* out) {
  const int64_t r = cr.C - c0 - 16 * NV;
  if (r == 0) {
    if constexpr (NV > 0) SumPixelBlock<NV, false>(cr, idx, go, w, c0, 0, out);
  } else if (r <= 8) {
    SumPixelBlock<NV, true>(cr, idx, go, w, c0, cr.C - 8, out);
  } else {
    if constexpr (NV > 0) SumPixelBlock<NV, false>(cr, idx, go, w, c0, 0, out);
    SumPixelBlock<1, false>(cr, idx, go, w, cr.C - 16, 0, out);
  }
}

// One bf16 input row of W pixels of C >= 16 lanes (out: its first
// element); idx and go: the batch's indices and grad_output.
__attribute__((target("avx2"))) inline void GatherOverlapRowBf16(
    const CoverRows& cr, const int16_t* idx, const uint16_t* go, int64_t W,
    uint16_t* out) {
  for (int64_t w = 0; w < W; ++w, out += cr.C) {
    int64_t c0 = 0;
    for (; c0 + 64 <= cr.C; c0 += 64)
      SumPixelBlock<4, false>(cr, idx, go, w, c0, 0, out);
    switch ((cr.C - c0) / 16) {
      case 3: SumPixelTail<3>(cr, idx, go, w, c0, out); break;
      case 2: SumPixelTail<2>(cr, idx, go, w, c0, out); break;
      case 1: SumPixelTail<1>(cr, idx, go, w, c0, out); break;
      default: SumPixelTail<0>(cr, idx, go, w, c0, out); break;
    }
  }
}

}  // namespace pool3d

#endif  // POOL3D_KERNELS_COMMON_OVERLAP_GATHER_H_
