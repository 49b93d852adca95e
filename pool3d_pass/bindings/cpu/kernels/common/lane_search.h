// Window searches with the lanes running across contiguous elements: the
// channels of one channels-last output pixel (PyTorch's
// cpu_max_pool_channels_last does the same), or a whole stride-1 output row
// flattened to (ow, c) lanes, or the W positions of a channels-first row.
//
// A search gets n lanes, a base pointer and a list of taps (an element
// offset from the base and a tap number, in ascending row-major tap order,
// padding already left out): lane j of tap i reads base[off[i] + j]. Every
// tap is one compare-and-blend per lane in the element's own type:
//
//   - SearchFirstMax (forward, y and indices): f32 compares as floats
//     (`x > best`: +0 == -0, so the first zero stays; NaN never wins);
//     bf16/f16 as int16 keys (sign-magnitude turned two's complement, +0 and
//     -0 both key 0). The first strictly greater tap wins: the first maximum.
//   - SearchMax (forward_output, y only): a max over total-order keys (the
//     float bits with the magnitude flipped under a set sign bit: -0 < +0,
//     -inf lowest, and mapping back is the same flip), one vector max per tap.
//
// The rare cases stay out of the hot loop: a NaN anywhere (ORed into one flag
// per chunk), and in SearchFirstMax a maximum that is a zero of the wrong
// sign (-0 first, a +0 later; f32) or any zero (bf16/f16: the key lost the
// sign). Those lanes are redone by a scalar walk over the taps (FixLane):
// output the window's first NaN and index -1, or the zero XLA's max gives
// (+0 when the window holds a +0).
#ifndef POOL3D_KERNELS_COMMON_LANE_SEARCH_H_
#define POOL3D_KERNELS_COMMON_LANE_SEARCH_H_

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "element_types.h"
#include "first_max.h"

namespace pool3d {

// What a chunk's hot loop leaves to FixLane: a NaN somewhere in the chunk
// (every lane is redone), a zero maximum (those lanes are).
constexpr int kAnyNan = 1, kAnyZero = 2;

// Lanes per chunk: the running state (keys, taps) of one chunk stays in L1.
constexpr int64_t kLaneChunk = 256;

// The scalar redo of one lane: y (and idx) from the taps in order.
template <class T>
inline void FixLane(const typename T::M* base, const int64_t* off,
                    const int16_t* tap, int64_t ntaps, int64_t j,
                    typename T::M* y, int16_t* idx) {
  using M = typename T::M;
  int32_t best = kPadKey;
  int16_t best_tap = -1;
  bool plus_zero = false;
  for (int64_t i = 0; i < ntaps; ++i) {
    const M v = base[off[i] + j];
    if (IsNan<T>(v)) {
      *y = v;
      if (idx) *idx = -1;
      return;
    }
    plus_zero |= v == 0;
    const int32_t k = Key<T>(v);
    if (k > best) best = k, best_tap = tap[i];
  }
  const M sign = M(M(1) << (sizeof(M) * 8 - 1));
  const int32_t neg = best >> 31;
  M bits = M(uint32_t((best ^ neg) - neg) | (uint32_t(sign) & uint32_t(neg)));
  if (best == 0) bits = plus_zero ? M(0) : sign;
  *y = bits;
  if (idx) *idx = best_tap;
}

// f32: the first maximum of n <= kLaneChunk lanes as float compares.
POOL3D_HOT int FirstMaxChunkF32(const uint32_t* __restrict base,
                                const int64_t* __restrict off,
                                const int16_t* __restrict tap, int64_t ntaps,
                                int64_t n, uint32_t* __restrict y,
                                int16_t* __restrict idx) {
  // Blends as bit masks (a conditional store would become a masked store,
  // which stalls the next tap's load of the same state).
  uint32_t m[kLaneChunk];
  int32_t t[kLaneChunk];
  int32_t nan = 0;
  {
    const uint32_t* __restrict x = base + off[0];
    const int32_t t0 = tap[0];
    for (int64_t j = 0; j < n; ++j) {
      const float f = BitsFloat(x[j]);
      m[j] = x[j];
      t[j] = t0;
      nan |= -int32_t(f != f);
    }
  }
  for (int64_t i = 1; i < ntaps; ++i) {
    const uint32_t* __restrict x = base + off[i];
    const int32_t ti = tap[i];
    for (int64_t j = 0; j < n; ++j) {
      const uint32_t u = x[j];
      const float f = BitsFloat(u);
      const int32_t gt = -int32_t(f > BitsFloat(m[j]));
      m[j] = (u & uint32_t(gt)) | (m[j] & ~uint32_t(gt));
      t[j] = (ti & gt) | (t[j] & ~gt);
      nan |= -int32_t(f != f);
    }
  }
  int32_t neg_zero = 0;
  for (int64_t j = 0; j < n; ++j) {
    y[j] = m[j];
    idx[j] = int16_t(t[j]);
    neg_zero |= -int32_t(m[j] == 0x80000000u);
  }
  return (nan != 0 ? kAnyNan : 0) | (neg_zero != 0 ? kAnyZero : 0);
}

// bf16/f16: the first maximum as int16 keys.
template <class T>
POOL3D_HOT int FirstMaxChunk16(const uint16_t* __restrict base,
                                const int64_t* __restrict off,
                                const int16_t* __restrict tap, int64_t ntaps,
                                int64_t n, uint16_t* __restrict y,
                                int16_t* __restrict idx) {
  int16_t m[kLaneChunk];
  int16_t t[kLaneChunk];
  int16_t nan = 0, zero = 0;
  constexpr int16_t kInf = int16_t(T::kInf);
  {
    const uint16_t* __restrict x = base + off[0];
    const int16_t t0 = tap[0];
    for (int64_t j = 0; j < n; ++j) {
      const int16_t mag = int16_t(x[j] & 0x7fff);
      const int16_t neg = int16_t(int16_t(x[j]) >> 15);
      m[j] = int16_t((mag ^ neg) - neg);
      t[j] = t0;
      nan |= int16_t(-int16_t(mag > kInf));
    }
  }
  for (int64_t i = 1; i < ntaps; ++i) {
    const uint16_t* __restrict x = base + off[i];
    const int16_t ti = tap[i];
    for (int64_t j = 0; j < n; ++j) {
      const int16_t mag = int16_t(x[j] & 0x7fff);
      const int16_t neg = int16_t(int16_t(x[j]) >> 15);
      const int16_t k = int16_t((mag ^ neg) - neg);
      const int16_t gt = int16_t(-int16_t(k > m[j]));
      m[j] = int16_t((k & gt) | (m[j] & ~gt));
      t[j] = int16_t((ti & gt) | (t[j] & ~gt));
      nan |= int16_t(-int16_t(mag > kInf));
    }
  }
  for (int64_t j = 0; j < n; ++j) {
    const int16_t k = m[j];
    const int16_t neg = int16_t(k >> 15);
    y[j] = uint16_t(uint16_t((k ^ neg) - neg) | (uint16_t(neg) & 0x8000u));
    idx[j] = t[j];
    zero |= int16_t(-int16_t(k == 0));
  }
  return (nan != 0 ? kAnyNan : 0) | (zero != 0 ? kAnyZero : 0);
}

// Total-order keys: an involution on the bits (signed compare afterwards).
template <class K>
inline K TotalKey(K bits) {
  constexpr int kBits = int(sizeof(K) * 8);
  using U = std::make_unsigned_t<K>;
  return K(bits ^ K(U(K(bits >> (kBits - 1))) >> 1));
}

// y only: the max over total-order keys in the element's width.
template <class T>
POOL3D_HOT bool MaxChunk(const typename T::M* __restrict base,
                         const int64_t* __restrict off, int64_t ntaps,
                         int64_t n, typename T::M* __restrict y) {
  using M = typename T::M;
  using K = std::make_signed_t<M>;
  constexpr K kInf = K(T::kInf);
  constexpr K kAbs = K(T::kAbs);
  K m[kLaneChunk];
  K nan = 0;
  {
    const M* __restrict x = base + off[0];
    for (int64_t j = 0; j < n; ++j) {
      const K b = K(x[j]);
      m[j] = TotalKey<K>(b);
      nan |= K(-K(K(b & kAbs) > kInf));
    }
  }
  for (int64_t i = 1; i < ntaps; ++i) {
    const M* __restrict x = base + off[i];
    for (int64_t j = 0; j < n; ++j) {
      const K b = K(x[j]);
      m[j] = std::max(m[j], TotalKey<K>(b));
      nan |= K(-K(K(b & kAbs) > kInf));
    }
  }
  for (int64_t j = 0; j < n; ++j) y[j] = M(TotalKey<K>(m[j]));
  return nan != 0;
}

// The first maximum (y, idx) of n lanes over the taps (off, tap).
template <class T>
inline void SearchFirstMax(const typename T::M* base, const int64_t* off,
                           const int16_t* tap, int64_t ntaps, int64_t n,
                           typename T::M* y, int16_t* idx) {
  for (int64_t j0 = 0; j0 < n; j0 += kLaneChunk) {
    const int64_t nn = std::min(kLaneChunk, n - j0);
    int special;
    if constexpr (sizeof(typename T::M) == 4) {
      special = FirstMaxChunkF32(base + j0, off, tap, ntaps, nn, y + j0,
                                 idx + j0);
    } else {
      special = FirstMaxChunk16<T>(base + j0, off, tap, ntaps, nn, y + j0,
                                   idx + j0);
    }
    if (!special) continue;
    for (int64_t j = j0; j < j0 + nn; ++j) {
      if ((special & kAnyNan) || (y[j] & T::kAbs) == 0)
        FixLane<T>(base, off, tap, ntaps, j, y + j, idx + j);
    }
  }
}

// The maximum y (XLA's reduce_window max) of n lanes over the taps off.
template <class T>
inline void SearchMax(const typename T::M* base, const int64_t* off,
                      int64_t ntaps, int64_t n, typename T::M* y) {
  using M = typename T::M;
  for (int64_t j0 = 0; j0 < n; j0 += kLaneChunk) {
    const int64_t nn = std::min(kLaneChunk, n - j0);
    if (!MaxChunk<T>(base + j0, off, ntaps, nn, y + j0)) continue;
    for (int64_t j = j0; j < j0 + nn; ++j) {  // a NaN somewhere: find it
      for (int64_t i = 0; i < ntaps; ++i) {
        const M v = base[off[i] + j];
        if (IsNan<T>(v)) {
          y[j] = v;
          break;
        }
      }
    }
  }
}

}  // namespace pool3d

#endif  // POOL3D_KERNELS_COMMON_LANE_SEARCH_H_
