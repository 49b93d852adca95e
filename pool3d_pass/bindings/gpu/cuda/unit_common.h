// What every unit family shares (units.h): windows and layouts, a launch's
// parameters and operands, vector access, element values and the unit
// decoding. __host__ __device__ code: the host test compiles it for the CPU.
//
// Device-only branches (__CUDA_ARCH__; docs/gpu.md lists them, the device
// check's numerics stage exercises each with ties, NaN and +-0): the 32-,
// 64- and 128-bit accesses of LoadVec/StoreVec (the host copies element by
// element and counts misaligned pointers instead), MaxNan's max.NaN, the
// f16 conversions of Wide/Narrow, NarrowPair's cvt.rn.bf16x2/f16x2, and the
// packed compares and maxima (GeMask2, EqMask2, MaxNan2, MaxS2).
#ifndef POOL3D_GPU_CUDA_UNIT_COMMON_H_
#define POOL3D_GPU_CUDA_UNIT_COMMON_H_

#include <atomic>
#include <cstdint>
#include <type_traits>

#include "fast_div.h"
#include "shared_kernels/element_types.h"
#include "shared_kernels/geometry.h"
#include "shared_kernels/hd.h"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

namespace pool3d {
namespace gpu {

// ---------------------------------------------------------------------------
// Windows and layouts.

template <int KD, int KH, int KW, int SD, int SH, int SW, int PD, int PH,
          int PW>
struct Fixed {
  using Offset = int32_t;
  static constexpr bool kFixed = true;
  static constexpr int kD = KD, kH = KH, kW = KW;
  static constexpr int sD = SD, sH = SH, sW = SW;
  static constexpr int pD = PD, pH = PH, pW = PW;
  static constexpr bool kOverlap = SD < KD || SH < KH || SW < KW;
  static constexpr int kTaps = KD * KH * KW;
  // Whether an NCDHW output row ends in part of a unit where the input row is
  // whole vectors: Wo = (W + 2 pW - kW) / sW + 1 is W / sW plus this class's
  // own remainder FloorDiv(2 pW - kW, sW) + 1, which is 0 for the padded and
  // the non-overlapping classes and -1 for k3 s2 and k2 s1 without padding
  // (rows of 31 and 63 windows over 64 columns). Those classes' NCDHW units
  // read and write their outputs element by element, the last unit of a row
  // storing only its real windows; their input reads stay vectors.
  static constexpr bool kRaggedRows = (2 * PW - KW >= 0 ? (2 * PW - KW) / SW : -((KW - 2 * PW + SW - 1) / SW)) + 1 != 0;
};

template <class I>
struct Generic {
  using Offset = I;
  static constexpr bool kFixed = false;
  static constexpr bool kOverlap = true;  // not known at compile time
};

enum Layout : int { kNcdhw = 0, kNdhwc = 1, kStrided = 2 };

// Input positions per axis in a unit of the overlapping-window gather
// (GatherUnit): 2 along an axis the window spans with stride 2 (the block
// starts at a multiple of the stride, so each position's windows and taps
// are compile-time constants), 1 along any other (stride 1: every position
// alike).
POOL3D_HD constexpr int GatherBlock(int k, int s) { return k > 1 && s > 1 ? 2 : 1; }

POOL3D_HD constexpr int FloorDiv(int a, int b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}
POOL3D_HD constexpr int CeilDiv(int a, int b) { return -FloorDiv(-a, b); }

POOL3D_HD inline int32_t Clamp(int32_t v, int32_t n) { return v < 0 ? 0 : v >= n ? n - 1 : v; }

// Window kernel modes.
enum WindowMode : int {
  kMax = 0,      // y (and indices) of the first maximum: the sign of a zero maximum tracked
  kIndices = 2,  // indices of the first maximum only (no y: nothing about zeros tracked)
  kSelect = 3,   // indices of the first tap equal to a given y
};
// Fused kernel modes.
enum FusedMode : int { kByMax = 0, kByOutput = 1 };

// One launch: the extents of the part of the tensors it covers (a chunk of
// planes or batch items, launch_plan.h), the window (read by Generic kernels
// and the rare paths), strides for Generic kernels, and the unit decoding.
template <class I>
struct Launch {
  using U = typename std::make_unsigned<I>::type;
  I C, D, H, W, Do, Ho, Wo;
  I kD, kH, kW, sD, sH, sW, pD, pH, pW;
  I xs[5], ys[5];       // element strides (b, c, d, h, w): input, output
  bool in_cl, out_cl;   // channels-last input, output (Generic decoding)
  U units;              // units of this launch
  FastDiv<U> div[4];    // unit -> coordinates, innermost first
  FastDiv<U> sdiv[3];   // sD, sH, sW (Generic gathers)
};

// Pointers of one kernel's operands.
template <class M>
struct Operands {
  const M* x = nullptr;          // input
  const M* y_in = nullptr;       // output given (select, backward)
  const M* go = nullptr;         // grad_output
  const int16_t* idx_in = nullptr;
  M* y = nullptr;                // output written
  int16_t* idx = nullptr;        // indices written
  M* dx = nullptr;               // grad_input written
};

// ---------------------------------------------------------------------------
// Vector access: N elements at p, one access when N * sizeof(M) is 4, 8 or 16
// bytes (p aligned to that; launch_plan.h checks), 16 bytes at a time for a
// multiple of 16, else element by element.
// The host build copies element by element, and counts each access whose
// pointer a device would fault on (MisalignedAccesses, read by the host test).

template <int B>
struct Word {
  using type = uint8_t;  // (host builds: never used)
};
#ifdef __CUDACC__
template <> struct Word<4> { using type = uint32_t; };
template <> struct Word<8> { using type = uint2; };
template <> struct Word<16> { using type = uint4; };
#endif

#ifndef __CUDA_ARCH__
// Accesses a device would have made on a pointer not aligned to their width (host builds).
inline std::atomic<int64_t>& MisalignedAccesses() {
  static std::atomic<int64_t> count{0};
  return count;
}
#endif

template <int B>
POOL3D_HD inline void CheckAligned(const void* p) {
#ifndef __CUDA_ARCH__
  if constexpr (B == 4 || B == 8 || B == 16) {
    if (reinterpret_cast<uintptr_t>(p) % B != 0) MisalignedAccesses().fetch_add(1, std::memory_order_relaxed);
  }
#else
  (void)p;
#endif
}

template <class M, int N>
POOL3D_HD inline void LoadVec(const M* p, M* out) {
  constexpr int B = N * int(sizeof(M));
  if constexpr (B > 16 && B % 16 == 0) {  // several 128-bit accesses
    constexpr int kPer = 16 / int(sizeof(M));
#pragma unroll
    for (int i = 0; i < N; i += kPer) LoadVec<M, kPer>(p + i, out + i);
    return;
  } else {
    CheckAligned<B>(p);
#ifdef __CUDA_ARCH__
    constexpr bool kWord = B == 4 || B == 8 || B == 16;
#else
    constexpr bool kWord = false;
#endif
    if constexpr (kWord) {
      union {
        typename Word<B>::type w;
        M e[N];
      } u;
      u.w = __ldg(reinterpret_cast<const typename Word<B>::type*>(p));
#pragma unroll
      for (int i = 0; i < N; ++i) out[i] = u.e[i];
    } else {
#pragma unroll
      for (int i = 0; i < N; ++i) out[i] = p[i];
    }
  }
}

template <class M, int N>
POOL3D_HD inline void StoreVec(M* p, const M* v) {
  constexpr int B = N * int(sizeof(M));
  if constexpr (B > 16 && B % 16 == 0) {  // several 128-bit accesses
    constexpr int kPer = 16 / int(sizeof(M));
#pragma unroll
    for (int i = 0; i < N; i += kPer) StoreVec<M, kPer>(p + i, v + i);
    return;
  } else {
    CheckAligned<B>(p);
#ifdef __CUDA_ARCH__
    constexpr bool kWord = B == 4 || B == 8 || B == 16;
#else
    constexpr bool kWord = false;
#endif
    if constexpr (kWord) {
      union {
        typename Word<B>::type w;
        M e[N];
      } u;
#pragma unroll
      for (int i = 0; i < N; ++i) u.e[i] = v[i];
      *reinterpret_cast<typename Word<B>::type*>(p) = u.w;
    } else {
#pragma unroll
      for (int i = 0; i < N; ++i) p[i] = v[i];
    }
  }
}

// ---------------------------------------------------------------------------
// Scalar access.

// p, which the compiler may not rewrite as its base plus an offset: an element
// at a run-time offset from it is then one IMAD.WIDE away, where nvcc, seeing
// base + part + part, adds them in 64 bits (up to four instructions a load).
template <class P>
POOL3D_HD inline P* Opaque(P* p) {
#if defined(__CUDA_ARCH__)
  asm("mov.b64 %0, %0;" : "+l"(p));
#endif
  return p;
}

// *p, an input of the kernel (read-only while it runs): a global load (LDG;
// Opaque pointers would otherwise be read with generic loads).
template <class M>
POOL3D_HD inline M LoadGlobal(const M* p) {
#if defined(__CUDA_ARCH__)
  return __ldg(p);
#else
  return *p;
#endif
}

// *p, loaded where the source says: nvcc, seeing a load whose value is used
// only under a condition (a gather's gradient, where its window's index names
// the position), issues it after the condition is known, one more round trip
// for every batch; a volatile load stays with its batch.
template <class M>
POOL3D_HD inline M LoadNow(const M* p) {
#if defined(__CUDA_ARCH__)
  if constexpr (sizeof(M) == 4) {
    uint32_t v;
    asm volatile("ld.global.nc.b32 %0, [%1];" : "=r"(v) : "l"(p));
    return M(v);
  } else {
    uint16_t v;
    asm volatile("ld.global.nc.b16 %0, [%1];" : "=h"(v) : "l"(p));
    return M(v);
  }
#else
  return *p;
#endif
}

// ---------------------------------------------------------------------------
// Values: the searches compare as f32 (exact for bf16 and f16), which gives
// the contract's order directly: +0 == -0 (so the first zero tap is found),
// and a NaN compares false with everything, so it is never taken by a
// compare; the running maximum propagates NaN instead (max.NaN), which says
// at the end whether the window held one.

template <class T>
POOL3D_HD inline float Wide(typename T::M v) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<T, F16T>) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v));
    return f;
  }
#endif
  return T::ToF32(v);
}

// The element-type bits of f, which Wide gave (so exact).
template <class T>
POOL3D_HD inline typename T::M Narrow(float f) {
  using M = typename T::M;
  if constexpr (sizeof(M) == 4) {
    return FloatBits(f);
  } else if constexpr (std::is_same_v<T, BF16T>) {
    return M(FloatBits(f) >> 16);
  } else {
#if defined(__CUDA_ARCH__)
    M h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
#else
    return T::FromF32(f);
#endif
  }
}

// Two f32 sums rounded to the element type (round to nearest even, as
// T::FromF32), as one word (a in the low half): one cvt.rn.bf16x2.f32 /
// cvt.rn.f16x2.f32 on the device (sm_80+), a NaN there the type's canonical
// NaN (any NaN matches any NaN).
template <class T>
POOL3D_HD inline uint32_t NarrowPair(float a, float b) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<T, BF16T>) {
    const __nv_bfloat162 r = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<const uint32_t*>(&r);
  } else if constexpr (std::is_same_v<T, F16T>) {
    const __half2 r = __floats2half2_rn(a, b);
    return *reinterpret_cast<const uint32_t*>(&r);
  }
#endif
  return uint32_t(T::FromF32(a)) | uint32_t(T::FromF32(b)) << 16;
}

// The words of N f32 sums rounded to the element type: N of them (4-byte
// types), or N / 2 (16-bit types, N even), as the elements lie in memory.
template <class T>
POOL3D_HD constexpr int WordsOf(int n) {
  return sizeof(typename T::M) == 2 ? n / 2 : n;
}

template <class T, int N>
POOL3D_HD inline void NarrowWords(const float* v, uint32_t* out) {
  if constexpr (sizeof(typename T::M) == 2) {
    static_assert(N % 2 == 0, "16-bit elements are rounded two a word");
#pragma unroll
    for (int i = 0; i < N; i += 2) out[i / 2] = NarrowPair<T>(v[i], v[i + 1]);
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) out[i] = FloatBits(v[i]);
  }
}

// N f32 sums rounded to the element type, element by element (any N).
template <class T, int N>
POOL3D_HD inline void NarrowAll(const float* v, typename T::M* out) {
#pragma unroll
  for (int i = 0; i < N; ++i) out[i] = T::FromF32(v[i]);
}

POOL3D_HD inline float NegativeInfinity() { return BitsFloat(0xff800000u); }

// The larger of a and b, NaN where either is NaN (PTX max.NaN.f32, sm_80+;
// one instruction, FMNMX.NAN).
POOL3D_HD inline float MaxNan(float a, float b) {
#if defined(__CUDA_ARCH__)
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  if (a != a || b != b) return BitsFloat(0x7fffffffu);
  return a > b ? a : b;
#endif
}

// One window's search result: the maximum (NaN where a real element was
// NaN), the first tap holding it, and (mode kMax) whether a tap holds +0.
struct Best {
  float m;
  int32_t tap;
  bool plus_zero;
};

POOL3D_HD inline bool HeldNan(const Best& b) { return b.m != b.m; }

// ---------------------------------------------------------------------------
// Packed bf16 and f16: a 32-bit word holds two 16-bit values (two channels
// in NDHWC, two windows' taps in NCDHW), and one packed instruction compares,
// or takes the maximum of, both (HSET2 / HMNMX2; cuda_bf16.h and cuda_fp16.h
// emulate what an older GPU lacks). A mask of 0xffff per half selects.

#if defined(__CUDA_ARCH__)
template <class T>
using Pair = std::conditional_t<std::is_same_v<T, BF16T>, __nv_bfloat162, __half2>;
template <class T>
POOL3D_HD inline Pair<T> AsPair(uint32_t a) { return *reinterpret_cast<const Pair<T>*>(&a); }
#endif

// Per half: 0xffff where a >= b (EqMask2: a == b), else 0; NaN compares false.
template <class T>
POOL3D_HD inline uint32_t GeMask2(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __hge2_mask(AsPair<T>(a), AsPair<T>(b));
#else
  uint32_t r = 0;
  for (int i = 0; i < 2; ++i)
    if (T::ToF32(uint16_t(a >> (16 * i))) >= T::ToF32(uint16_t(b >> (16 * i)))) r |= 0xffffu << (16 * i);
  return r;
#endif
}

template <class T>
POOL3D_HD inline uint32_t EqMask2(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __heq2_mask(AsPair<T>(a), AsPair<T>(b));
#else
  uint32_t r = 0;
  for (int i = 0; i < 2; ++i)
    if (T::ToF32(uint16_t(a >> (16 * i))) == T::ToF32(uint16_t(b >> (16 * i)))) r |= 0xffffu << (16 * i);
  return r;
#endif
}

// Per half: the larger, NaN where either is NaN (the NaN's bits do not
// matter: a window holding one goes back to its elements).
template <class T>
POOL3D_HD inline uint32_t MaxNan2(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
  const Pair<T> r = __hmax2_nan(AsPair<T>(a), AsPair<T>(b));
  return *reinterpret_cast<const uint32_t*>(&r);
#else
  uint32_t r = 0;
  for (int i = 0; i < 2; ++i) {
    const uint16_t x = uint16_t(a >> (16 * i)), y = uint16_t(b >> (16 * i));
    const float fx = T::ToF32(x), fy = T::ToF32(y);
    const uint16_t m = fx != fx || fy != fy ? uint16_t(0x7fff) : fx >= fy ? x : y;
    r |= uint32_t(m) << (16 * i);
  }
  return r;
#endif
}

// Per half: the larger as signed 16-bit integers (VIMNMX.S16x2 on sm_90).
// On element bits this says whether a tap holds +0 where the maximum is a
// zero: every other value not above zero has its sign bit set.
POOL3D_HD inline uint32_t MaxS2(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __vmaxs2(a, b);
#else
  uint32_t r = 0;
  for (int i = 0; i < 2; ++i) {
    const int16_t x = int16_t(uint16_t(a >> (16 * i))), y = int16_t(uint16_t(b >> (16 * i)));
    r |= uint32_t(uint16_t(x > y ? x : y)) << (16 * i);
  }
  return r;
#endif
}

// Two 16-bit values as one word, lo in the low half (one PRMT).
POOL3D_HD inline uint32_t Pack2(uint16_t lo, uint16_t hi) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(uint32_t(lo), uint32_t(hi), 0x5410);
#else
  return uint32_t(lo) | uint32_t(hi) << 16;
#endif
}

// Two copies of T's -inf, a packed word's starting maximum.
template <class T>
POOL3D_HD constexpr uint32_t NegInf2() {
  return (uint32_t(T::kInf) | 0x8000u) * 0x10001u;
}

// ---------------------------------------------------------------------------
// Unit decoding: u -> coordinates, innermost first (the launch's divisors).

template <class U, int N>
POOL3D_HD inline void Decode(const FastDiv<U>* div, U u, U* c) {
#pragma unroll
  for (int i = 0; i < N; ++i) c[i] = div[i].DivMod(u, &u);
  c[N] = u;
}

}  // namespace gpu
}  // namespace pool3d

#endif  // POOL3D_GPU_CUDA_UNIT_COMMON_H_
