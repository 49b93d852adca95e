// Window searches with the lanes running across contiguous elements: the
// channels of one channels-last output pixel (PyTorch's
// cpu_max_pool_channels_last does the same), or a whole stride-1 output row
// flattened to (ow, c) lanes.
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
//
// The rare cases stay out of the hot loop: a NaN anywhere (ORed into one flag
// per vector block), and a maximum that is a zero of the wrong
// sign (-0 first, a +0 later; f32) or any zero (bf16/f16: the key lost the
// sign). Those lanes are redone by a scalar walk over the taps (FixLane):
// output the window's first NaN and index -1, or the zero XLA's max gives
// (+0 when the window holds a +0).
#ifndef POOL3D_KERNELS_COMMON_LANE_SEARCH_H_
#define POOL3D_KERNELS_COMMON_LANE_SEARCH_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "element_types.h"
#include "first_max.h"

namespace pool3d {

// What a chunk's hot loop leaves to FixLane: a NaN somewhere in the chunk
// (every lane is redone), a zero maximum (those lanes are).
constexpr int kAnyNan = 1, kAnyZero = 2;


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

// The hot loops are written with GCC/Clang vector types, 32 bytes (8 f32 or
// 16 int16 lanes; the portable clone splits each into two SSE2 halves):
// lanes go in blocks of U vectors (U = 4, then 1) whose running state stays in
// registers across all taps (one load, one compare and two blends per vector
// and tap); the last n % lanes lanes take the scalar FixLane walk.
typedef float VF32 __attribute__((vector_size(32)));
typedef int32_t VI32 __attribute__((vector_size(32)));
typedef int16_t VI16 __attribute__((vector_size(32)));
typedef int16_t VI16x8 __attribute__((vector_size(16)));
typedef uint64_t VU64 __attribute__((vector_size(32)));

// Whether any lane of v is non-zero: an OR of its four 64-bit quarters.
template <class V>
static inline __attribute__((always_inline)) bool AnyLane(const V& v) {
  const VU64 q = (VU64)v;
  return ((q[0] | q[1]) | (q[2] | q[3])) != 0;
}

#define POOL3D_VLOAD(v, p) std::memcpy(&(v), (p), sizeof(v))
#define POOL3D_VSTORE(p, v) std::memcpy((p), &(v), sizeof(v))

// f32: the first maximum of lanes [j0, j0 + 8U) as float compares; returns
// the kAny* flags of those lanes.
template <int U>
static inline __attribute__((always_inline)) int FirstMaxBlockF32(
    const uint32_t* __restrict base, const int64_t* __restrict off,
    const int16_t* __restrict tap, int64_t ntaps, int64_t j0,
    uint32_t* __restrict y, int16_t* __restrict idx) {
  VF32 m[U];
  VI32 t[U], nan[U];
  for (int u = 0; u < U; ++u) {
    POOL3D_VLOAD(m[u], base + off[0] + j0 + 8 * u);
    t[u] = VI32{} + int32_t(tap[0]);
    nan[u] = m[u] != m[u];
  }
  for (int64_t i = 1; i < ntaps; ++i) {
    const uint32_t* x = base + off[i] + j0;
    const int32_t ti = tap[i];
    for (int u = 0; u < U; ++u) {
      VF32 f;
      POOL3D_VLOAD(f, x + 8 * u);
      const VI32 gt = f > m[u];
      m[u] = gt ? f : m[u];  // vector selects: one blend each
      t[u] = gt ? ti + VI32{} : t[u];
      nan[u] |= f != f;
    }
  }
  VI32 any_nan = VI32{}, neg_zero = VI32{};
  for (int u = 0; u < U; ++u) {
    POOL3D_VSTORE(y + j0 + 8 * u, m[u]);
    const VI16x8 t16 = __builtin_convertvector(t[u], VI16x8);
    POOL3D_VSTORE(idx + j0 + 8 * u, t16);
    any_nan |= nan[u];
    neg_zero |= (VI32)m[u] == int32_t(0x80000000u);
  }
  return (AnyLane(any_nan) ? kAnyNan : 0) | (AnyLane(neg_zero) ? kAnyZero : 0);
}

// bf16/f16: the same with int16 keys (sign-magnitude to two's complement,
// both zeros key 0), 16 lanes a vector.
template <class T, int U>
static inline __attribute__((always_inline)) int FirstMaxBlock16(
    const uint16_t* __restrict base, const int64_t* __restrict off,
    const int16_t* __restrict tap, int64_t ntaps, int64_t j0,
    uint16_t* __restrict y, int16_t* __restrict idx) {
  constexpr int16_t kInf = int16_t(T::kInf);
  VI16 m[U], t[U], nan[U];
  for (int u = 0; u < U; ++u) {
    VI16 b;
      POOL3D_VLOAD(b, base + off[0] + j0 + 16 * u);
    const VI16 mag = b & int16_t(0x7fff), neg = b >> 15;
    m[u] = (mag ^ neg) - neg;
    t[u] = VI16{} + tap[0];
    nan[u] = mag > kInf;
  }
  for (int64_t i = 1; i < ntaps; ++i) {
    const uint16_t* x = base + off[i] + j0;
    const int16_t ti = tap[i];
    for (int u = 0; u < U; ++u) {
      VI16 b;
      POOL3D_VLOAD(b, x + 16 * u);
      const VI16 mag = b & int16_t(0x7fff), neg = b >> 15;
      const VI16 k = (mag ^ neg) - neg;
      const VI16 gt = k > m[u];
      m[u] = gt ? k : m[u];
      t[u] = gt ? ti + VI16{} : t[u];
      nan[u] |= mag > kInf;
    }
  }
  VI16 any_nan = VI16{}, zero = VI16{};
  for (int u = 0; u < U; ++u) {
    const VI16 neg = m[u] >> 15;
    const VI16 bits = ((m[u] ^ neg) - neg) | (neg & int16_t(0x8000));
    POOL3D_VSTORE(y + j0 + 16 * u, bits);
    POOL3D_VSTORE(idx + j0 + 16 * u, t[u]);
    any_nan |= nan[u];
    zero |= m[u] == 0;
  }
  return (AnyLane(any_nan) ? kAnyNan : 0) | (AnyLane(zero) ? kAnyZero : 0);
}

// The first maximum of lanes [0, n): vector blocks, then FixLane for the
// flagged lanes of a block and for the tail.
template <class T>
POOL3D_HOT void FirstMaxLanes(const typename T::M* __restrict base,
                              const int64_t* __restrict off,
                              const int16_t* __restrict tap, int64_t ntaps,
                              int64_t n, typename T::M* __restrict y,
                              int16_t* __restrict idx) {
  constexpr int64_t L = 32 / sizeof(typename T::M);  // lanes per vector
  auto block = [&](auto u_const, int64_t j0) {
    constexpr int U = decltype(u_const)::value;
    int flags;
    if constexpr (sizeof(typename T::M) == 4) {
      flags = FirstMaxBlockF32<U>(base, off, tap, ntaps, j0, y, idx);
    } else {
      flags = FirstMaxBlock16<T, U>(base, off, tap, ntaps, j0, y, idx);
    }
    if (!flags) return;
    for (int64_t j = j0; j < j0 + U * L; ++j)
      if ((flags & kAnyNan) || (y[j] & T::kAbs) == 0)
        FixLane<T>(base, off, tap, ntaps, j, y + j, idx + j);
  };
  int64_t j0 = 0;
  for (; j0 + 4 * L <= n; j0 += 4 * L) block(std::integral_constant<int, 4>{}, j0);
  for (; j0 + L <= n; j0 += L) block(std::integral_constant<int, 1>{}, j0);
  for (; j0 < n; ++j0) FixLane<T>(base, off, tap, ntaps, j0, y + j0, idx + j0);
}

// Total-order keys (forward_output.cc): the float bits with the magnitude
// flipped under a set sign bit (-0 < +0, -inf lowest); an involution, so
// mapping back is the same flip; compared as signed integers.
template <class K>
inline K TotalKey(K bits) {
  constexpr int kBits = int(sizeof(K) * 8);
  using U = std::make_unsigned_t<K>;
  return K(bits ^ K(U(K(bits >> (kBits - 1))) >> 1));
}

// The first maximum (y, idx) of n lanes over the taps (off, tap).
template <class T>
inline void SearchFirstMax(const typename T::M* base, const int64_t* off,
                           const int16_t* tap, int64_t ntaps, int64_t n,
                           typename T::M* y, int16_t* idx) {
  FirstMaxLanes<T>(base, off, tap, ntaps, n, y, idx);
}

}  // namespace pool3d

#endif  // POOL3D_KERNELS_COMMON_LANE_SEARCH_H_
