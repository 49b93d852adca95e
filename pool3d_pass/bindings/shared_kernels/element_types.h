// Shared by the CPU and the CUDA kernels (bindings/shared_kernels/): both
// platforms move, compare and convert elements (and name their type,
// ElementType) with these definitions, so both select the same maximum.
//
// Element types of the pooling kernels, handled as raw bit patterns.
//
// f32, bf16 and f16 are moved and compared as uint32/uint16 bits: no
// conversion outside the paths that accumulate in f32, and comparisons that
// vectorise. Key() maps a value to an int32 that orders like the float, which
// is what the separable first-max searches compare.
#ifndef POOL3D_SHARED_KERNELS_ELEMENT_TYPES_H_
#define POOL3D_SHARED_KERNELS_ELEMENT_TYPES_H_

#include <climits>
#include <cstdint>
#include <cstring>

#include "hd.h"

namespace pool3d {

// The element types of every call's floating-point operands.
enum class ElementType { kF32, kBF16, kF16 };

// Bytes an element of type t takes.
POOL3D_HD constexpr int ElementBytes(ElementType t) { return t == ElementType::kF32 ? 4 : 2; }

POOL3D_HD inline uint32_t FloatBits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
#endif
}
POOL3D_HD inline float BitsFloat(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
#endif
}

struct F32T {
  using M = uint32_t;
  static constexpr M kAbs = 0x7fffffffu;
  static constexpr M kInf = 0x7f800000u;
  POOL3D_HD static inline float ToF32(M v) { return BitsFloat(v); }
  POOL3D_HD static inline M FromF32(float f) { return FloatBits(f); }
};

struct BF16T {
  using M = uint16_t;
  static constexpr M kAbs = 0x7fff;
  static constexpr M kInf = 0x7f80;
  POOL3D_HD static inline float ToF32(M v) { return BitsFloat(uint32_t{v} << 16); }
  POOL3D_HD static inline M FromF32(float f) {  // round to nearest even
    uint32_t u = FloatBits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return M((u >> 16) | 0x40);  // NaN
    return M((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
};

struct F16T {
  using M = uint16_t;
  static constexpr M kAbs = 0x7fff;
  static constexpr M kInf = 0x7c00;
  POOL3D_HD static inline float ToF32(M h) {
    uint32_t sign = uint32_t(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0) {  // zero or subnormal: mant * 2^-24, exact in f32
      float f = float(mant) * 5.9604644775390625e-8f;
      return BitsFloat(sign | FloatBits(f));
    }
    if (exp == 31) return BitsFloat(sign | 0x7f800000u | (mant << 13));
    return BitsFloat(sign | ((exp + 112u) << 23) | (mant << 13));
  }
  POOL3D_HD static inline M FromF32(float f) {  // round to nearest even
    uint32_t x = FloatBits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    x &= 0x7fffffffu;
    if (x >= 0x7f800000u)  // inf or NaN (NaN stays quiet NaN)
      return M(sign | (x > 0x7f800000u ? 0x7e00u | ((x >> 13) & 0x3ffu)
                                        : 0x7c00u));
    if (x >= 0x477ff000u) return M(sign | 0x7c00u);  // rounds to inf
    if (x < 0x38800000u) {  // result subnormal or zero: let the FPU round
      float v = BitsFloat(x) + 0.5f;
      return M(sign | (FloatBits(v) - 0x3f000000u));
    }
    uint32_t odd = (x >> 13) & 1u;
    x += 0xc8000fffu + odd;  // rebias exponent, round to nearest even
    return M(sign | (x >> 13));
  }
};

// All-ones when `a` equals `b` as floating-point numbers (NaN equals nothing,
// +0 equals -0), else 0. Written as selects, without && or ||, so that the
// loops using it if-convert and vectorise.
template <class T>
POOL3D_HD inline typename T::M EqMask(typename T::M a, typename T::M b) {
  using M = typename T::M;
  if constexpr (sizeof(M) == 4) {
    return BitsFloat(a) == BitsFloat(b) ? M(~M(0)) : M(0);
  } else {
    M same = a == b ? M(~M(0)) : M(0);
    M real = M(a & T::kAbs) <= T::kInf ? M(~M(0)) : M(0);
    M zeros = M((a | b) & T::kAbs) == 0 ? M(~M(0)) : M(0);
    return M((same & real) | zeros);
  }
}

template <class T>
POOL3D_HD inline bool IsNan(typename T::M a) {
  return (a & T::kAbs) > T::kInf;
}

// The value 0 + g in the element type: -0 becomes +0 (XLA's scatter starts
// from +0), everything else is unchanged.
template <class T>
POOL3D_HD inline typename T::M Normalise(typename T::M g) {
  using M = typename T::M;
  return (g & T::kAbs) ? g : M(0);
}

// Keys: int32 values that order like the floats, with +0 and -0 sharing the
// key 0 (so the first maximum found over keys is the first tap equal to the
// maximum as floats). Padding sorts below everything. NaN either sorts below
// every number (Key: the recompute backward, which checks the winner against
// `output`) or above everything (KeyNanHigh: forward and fused backward, where
// a window holding a NaN must come out with its first NaN as the winner).
constexpr int32_t kPadKey = INT32_MIN;
constexpr int32_t kNanKey = INT32_MIN + 1;
constexpr int32_t kNanHighKey = INT32_MAX;

template <class T>
POOL3D_HD inline int32_t Key(typename T::M a) {  // branch-free, vectorises
  constexpr int kBits = int(sizeof(typename T::M) * 8);
  const int32_t mag = int32_t(a & T::kAbs);
  const int32_t neg = -int32_t((a >> (kBits - 1)) & 1);  // 0 or -1
  const int32_t signed_mag = (mag ^ neg) - neg;
  const int32_t nan = -int32_t(mag > int32_t(T::kInf));
  return (kNanKey & nan) | (signed_mag & ~nan);
}

template <class T>
POOL3D_HD inline int32_t KeyNanHigh(typename T::M a) {
  constexpr int kBits = int(sizeof(typename T::M) * 8);
  const int32_t mag = int32_t(a & T::kAbs);
  const int32_t neg = -int32_t((a >> (kBits - 1)) & 1);
  const int32_t signed_mag = (mag ^ neg) - neg;
  const int32_t nan = -int32_t(mag > int32_t(T::kInf));
  return (kNanHighKey & nan) | (signed_mag & ~nan);
}

// The two key orders as policy types for the search engines.
struct NanLow {
  template <class T>
  POOL3D_HD static inline int32_t KeyOf(typename T::M a) { return Key<T>(a); }
};
struct NanHigh {
  template <class T>
  POOL3D_HD static inline int32_t KeyOf(typename T::M a) { return KeyNanHigh<T>(a); }
};

}  // namespace pool3d

#endif  // POOL3D_SHARED_KERNELS_ELEMENT_TYPES_H_
