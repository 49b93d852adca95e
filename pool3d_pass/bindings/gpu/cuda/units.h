// The CUDA kernels' work per thread ("unit"), as __host__ __device__ code.
//
// A kernel is a grid-stride loop over units (kernels.cu); what one unit does
// is here, so that the host test (tests/bindings/gpu/test_cuda_elements.py)
// compiles exactly this code for the CPU, runs every unit of every launch
// the launch plan (launch_plan.h) makes, and compares each result with the
// CPU kernels bit for bit.
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

#include <cstdint>
#include <type_traits>

#include "fast_div.h"
#include "shared_kernels/element_types.h"
#include "shared_kernels/geometry.h"
#include "shared_kernels/hd.h"
#include "shared_kernels/window_scan.h"

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
};

template <class I>
struct Generic {
  using Offset = I;
  static constexpr bool kFixed = false;
  static constexpr bool kOverlap = true;  // not known at compile time
};

enum Layout : int { kNcdhw = 0, kNdhwc = 1, kStrided = 2 };

// Input positions per axis in a unit of the overlapping-window gather
// (GatherUnit): 2 along an axis the window spans (a multiple of the strides
// these classes have), 1 along one it does not.
POOL3D_HD constexpr int GatherBlock(int k) { return k > 1 ? 2 : 1; }

POOL3D_HD constexpr int FloorDiv(int a, int b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}
POOL3D_HD constexpr int CeilDiv(int a, int b) { return -FloorDiv(-a, b); }

// Window kernel modes.
enum WindowMode : int {
  kMax = 0,     // y and/or indices of the first maximum (null pointers: not wanted)
  kSelect = 3,  // indices of the first tap equal to a given y
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

// ---------------------------------------------------------------------------
// Vector access: N elements at p, one access when N * sizeof(M) is 4, 8 or 16
// bytes (p aligned to that; launch_plan.h checks), else element by element.

template <int B>
struct Word {
  using type = uint8_t;  // (host builds: never used)
};
#ifdef __CUDACC__
template <> struct Word<4> { using type = uint32_t; };
template <> struct Word<8> { using type = uint2; };
template <> struct Word<16> { using type = uint4; };
#endif

template <class M, int N>
POOL3D_HD inline void LoadVec(const M* p, M* out) {
  constexpr int B = N * int(sizeof(M));
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

template <class M, int N>
POOL3D_HD inline void StoreVec(M* p, const M* v) {
  constexpr int B = N * int(sizeof(M));
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

// ---------------------------------------------------------------------------
// Values: the searches compare as f32 (exact for bf16 and f16), which gives
// the contract's order directly: +0 == -0 (so the first zero tap is found),
// and a NaN compares false with everything, so it is never taken by a
// compare; the running maximum propagates NaN instead (max.NaN), which says
// at the end whether the window held one. Padding reads as -inf and is never
// taken (each compare is gated by `real`).

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

// One window's search: the maximum so far (NaN once a real element was NaN;
// -inf: none yet) and the first tap holding it.
struct Best {
  float m;
  int32_t tap;
};

POOL3D_HD inline void Reset(Best* b) {
  b->m = NegativeInfinity();  // a real -inf is still taken (>=)
  b->tap = -1;
}

// Taps are visited last to first: `>=` then leaves the first tap holding the
// maximum, and a plain overwrite on equality the first tap equal to a value.
POOL3D_HD inline void Take(Best* b, float v, bool real, int32_t t) {
  const bool ge = real && v >= b->m;
  b->tap = ge ? t : b->tap;
  b->m = MaxNan(b->m, v);  // padding is -inf: no change
}

// One tap of one lane: the search's step (kSelectOnly: the first tap equal to
// target; else the first maximum).
template <bool kSelectOnly>
POOL3D_HD inline void StepLane(Best* b, float v, bool real, float target, int32_t t) {
  if constexpr (kSelectOnly) {
    b->tap = real && v == target ? t : b->tap;
  } else {
    Take(b, v, real, t);
  }
}

POOL3D_HD inline bool HeldNan(const Best& b) { return b.m != b.m; }

// What a window's search gives: the output value and the contract's index
// (-1 where the window holds a NaN). The rare outputs go back to the
// window's elements (xp, strides st): a NaN keeps its own bits (the first
// NaN), a zero is +0 where any tap holds +0.
template <class T, class G, class I>
POOL3D_HD inline void Finish(const G& g, const typename T::M* xp, const I* st,
                             I d0, I h0, I w0, const Best& b,
                             typename T::M* y, int16_t* idx) {
  using M = typename T::M;
  const bool nan = HeldNan(b);
  if (idx != nullptr) *idx = int16_t(nan ? -1 : b.tap);
  if (y == nullptr) return;
  if (!nan && b.m != 0.0f) {
    *y = Narrow<T>(b.m);
    return;
  }
  M m;
  int32_t t;
  WindowFirstMax<T>(g, xp, st, d0, h0, w0, &m, &t);
  *y = m;
}

// ---------------------------------------------------------------------------
// Packed bf16 and f16: a 32-bit word holds two 16-bit values (two channels
// in NDHWC, two windows' taps in NCDHW), and one packed instruction compares,
// or takes the maximum of, both (HSET2 / HMNMX2; cuda_bf16.h and cuda_fp16.h
// emulate what an older GPU lacks). Taps are kept as two 16-bit halves; a
// mask of 0xffff per half selects them. The same rules as the f32 searches:
// >= over taps visited last to first, NaN propagated by the maximum, padding
// never taken.

// The packed type of T on the device: two bf16 or two f16.
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

// Two copies of T's -inf, a packed word's starting maximum.
template <class T>
POOL3D_HD constexpr uint32_t NegInf2() {
  return (uint32_t(T::kInf) | 0x8000u) * 0x10001u;
}

// The searches of 2N lanes held as N packed words: the maxima, the taps (two
// 16-bit halves each) and, for kSelectOnly, the values looked for.
template <class T, int N, bool kSelectOnly>
struct PackedSearch {
  uint32_t m[N], tap[N], want[N];

  POOL3D_HD explicit PackedSearch(const float* target) {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      m[i] = NegInf2<T>();
      tap[i] = 0xffffffffu;  // -1, -1
      want[i] = 0;
      if constexpr (kSelectOnly)
        want[i] = uint32_t(Narrow<T>(target[2 * i])) | uint32_t(Narrow<T>(target[2 * i + 1])) << 16;
    }
  }

  // Word i's two values x at tap t; `real` masks the halves that are not padding.
  POOL3D_HD void Step(int i, uint32_t x, uint32_t real, int32_t t) {
    const uint32_t take = (kSelectOnly ? EqMask2<T>(x, want[i]) : GeMask2<T>(x, m[i])) & real;
    const uint32_t t2 = uint32_t(t) * 0x10001u;
    tap[i] = (t2 & take) | (tap[i] & ~take);
    if constexpr (!kSelectOnly) m[i] = MaxNan2<T>(m[i], x);  // padding is -inf: no change
  }

  POOL3D_HD void Finish(Best* best) const {
#pragma unroll
    for (int j = 0; j < 2 * N; ++j) {
      const uint32_t half = (j & 1) ? 16 : 0;
      best[j].m = Wide<T>(uint16_t(m[j / 2] >> half));
      best[j].tap = int32_t(int16_t(uint16_t(tap[j / 2] >> half)));
    }
  }
};

// ---------------------------------------------------------------------------
// Unit decoding: u -> coordinates, innermost first (the launch's divisors).

template <class U, int N>
POOL3D_HD inline void Decode(const FastDiv<U>* div, U u, U* c) {
#pragma unroll
  for (int i = 0; i < N; ++i) c[i] = div[i].DivMod(u, &u);
  c[N] = u;
}

// ---------------------------------------------------------------------------
// Window kernels, Fixed windows, NCDHW: a unit is V outputs (ow0 .. ow0+V-1)
// of one output row; Wo % V == 0. Input rows are read as a segment of
// SEG = (V-1)*sW + kW columns starting at ow0*sW - pW; its V*sW columns from
// ow0*sW on are one aligned vector, the halo (the pW columns before, and any
// after) scalar. kChecked: the unit touches the padding (bounds checks;
// padding reads as NaN and is never taken, nor counted as a NaN).

template <class W, int V>
struct NcdhwSegment {
  static constexpr int kSeg = (V - 1) * W::sW + W::kW;
  static constexpr int kVec0 = W::pW;      // first column of the vector
  static constexpr int kVecN = V * W::sW;  // its columns
};

// The -inf of element type T: what padding reads as.
template <class T>
POOL3D_HD constexpr typename T::M NegInfBits() {
  using M = typename T::M;
  return M(T::kInf | (M(1) << (sizeof(M) * 8 - 1)));
}

template <class T, class W, int V, bool kChecked>
POOL3D_HD inline void LoadRowBitsNcdhw(const Launch<int32_t>& g,
                                       const typename T::M* xp, int32_t d,
                                       int32_t h, int32_t c0,
                                       typename T::M* seg, bool* real) {
  using M = typename T::M;
  using S = NcdhwSegment<W, V>;
  if constexpr (!kChecked) {
    const M* row = xp + (d * g.H + h) * g.W + c0;
    LoadVec<M, S::kVecN>(row + S::kVec0, seg + S::kVec0);
#pragma unroll
    for (int t = 0; t < S::kSeg; ++t) {
      if (t < S::kVec0 || t >= S::kVec0 + S::kVecN) seg[t] = row[t];
      real[t] = true;
    }
  } else {
    const bool row_ok = uint32_t(d) < uint32_t(g.D) && uint32_t(h) < uint32_t(g.H);
#pragma unroll
    for (int t = 0; t < S::kSeg; ++t) {
      const int32_t c = c0 + t;
      real[t] = row_ok && uint32_t(c) < uint32_t(g.W);
      seg[t] = real[t] ? xp[(d * g.H + h) * g.W + c] : NegInfBits<T>();
    }
  }
}

template <class T, class W, int V, bool kChecked>
POOL3D_HD inline void LoadRowNcdhw(const Launch<int32_t>& g,
                                   const typename T::M* xp, int32_t d,
                                   int32_t h, int32_t c0, float* val,
                                   bool* real) {
  typename T::M seg[NcdhwSegment<W, V>::kSeg];
  LoadRowBitsNcdhw<T, W, V, kChecked>(g, xp, d, h, c0, seg, real);
#pragma unroll
  for (int t = 0; t < NcdhwSegment<W, V>::kSeg; ++t) val[t] = Wide<T>(seg[t]);  // padding: -inf
}

// Whether a NCDHW window unit touches no padding and its aligned vector
// stays inside the row.
template <class W, int V>
POOL3D_HD inline bool InteriorNcdhw(const Launch<int32_t>& g, int32_t od,
                                    int32_t oh, int32_t ow0) {
  using S = NcdhwSegment<W, V>;
  const int32_t d0 = od * W::sD - W::pD, h0 = oh * W::sH - W::pH;
  const int32_t c0 = ow0 * W::sW - W::pW;
  constexpr int kEnd = S::kSeg > S::kVec0 + S::kVecN ? S::kSeg : S::kVec0 + S::kVecN;
  return d0 >= 0 && d0 + W::kD <= g.D && h0 >= 0 && h0 + W::kH <= g.H &&
         c0 >= 0 && c0 + kEnd <= g.W;
}

// The NCDHW searches for 16-bit types, two windows (lanes 2i, 2i+1) a packed word:
// each tap's two elements are paired (one PRMT), then compared and taken as
// in SearchNdhwcPairs.
template <class T, class W, int V, bool kChecked, bool kSelectOnly>
POOL3D_HD inline void SearchNcdhwPairs(const Launch<int32_t>& g,
                                        const uint16_t* xp, int32_t od,
                                        int32_t oh, int32_t ow0,
                                        const float* target, Best* best) {
  constexpr int N = V / 2, kSeg = NcdhwSegment<W, V>::kSeg;
  PackedSearch<T, N, kSelectOnly> search(target);
  const int32_t d0 = od * W::sD - W::pD, h0 = oh * W::sH - W::pH;
  const int32_t c0 = ow0 * W::sW - W::pW;
#pragma unroll
  for (int td = W::kD - 1; td >= 0; --td)
#pragma unroll
    for (int th = W::kH - 1; th >= 0; --th) {
      uint16_t seg[kSeg];
      bool real[kSeg];
      LoadRowBitsNcdhw<T, W, V, kChecked>(g, xp, d0 + td, h0 + th, c0, seg, real);
#pragma unroll
      for (int i = 0; i < N; ++i)
#pragma unroll
        for (int tw = W::kW - 1; tw >= 0; --tw) {
          const int sa = (2 * i) * W::sW + tw, sb = (2 * i + 1) * W::sW + tw;
          const uint32_t mask = (real[sa] ? 0xffffu : 0u) | (real[sb] ? 0xffff0000u : 0u);
          search.Step(i, uint32_t(seg[sa]) | uint32_t(seg[sb]) << 16, kChecked ? mask : ~0u,
                      (td * W::kH + th) * W::kW + tw);
        }
    }
  search.Finish(best);
}

// One lane at a time, as f32.
template <class T, class W, int V, bool kChecked, bool kSelectOnly>
POOL3D_HD inline void SearchNcdhwF32(const Launch<int32_t>& g,
                                  const typename T::M* xp, int32_t od,
                                  int32_t oh, int32_t ow0, const float* target,
                                  Best* best) {
  constexpr int kSeg = NcdhwSegment<W, V>::kSeg;
#pragma unroll
  for (int j = 0; j < V; ++j) Reset(&best[j]);
  const int32_t d0 = od * W::sD - W::pD, h0 = oh * W::sH - W::pH;
  const int32_t c0 = ow0 * W::sW - W::pW;
#pragma unroll
  for (int td = W::kD - 1; td >= 0; --td)
#pragma unroll
    for (int th = W::kH - 1; th >= 0; --th) {
      float val[kSeg];
      bool real[kSeg];
      LoadRowNcdhw<T, W, V, kChecked>(g, xp, d0 + td, h0 + th, c0, val, real);
#pragma unroll
      for (int j = 0; j < V; ++j)
#pragma unroll
        for (int tw = W::kW - 1; tw >= 0; --tw) {
          StepLane<kSelectOnly>(&best[j], val[j * W::sW + tw], real[j * W::sW + tw],
                            kSelectOnly ? target[j] : 0.0f, (td * W::kH + th) * W::kW + tw);
        }
    }
}

// The searches of V windows (kSelectOnly: the first tap equal to target[j]
// instead of the maximum): 16-bit types two windows a packed word, else as f32.
template <class T, class W, int V, bool kChecked, bool kSelectOnly>
POOL3D_HD inline void SearchNcdhw(const Launch<int32_t>& g,
                                  const typename T::M* xp, int32_t od,
                                  int32_t oh, int32_t ow0, const float* target,
                                  Best* best) {
  if constexpr (sizeof(typename T::M) == 2 && V % 2 == 0) {
    SearchNcdhwPairs<T, W, V, kChecked, kSelectOnly>(g, xp, od, oh, ow0, target, best);
  } else {
    SearchNcdhwF32<T, W, V, kChecked, kSelectOnly>(g, xp, od, oh, ow0, target, best);
  }
}

// 16-bit channels two at a time (NDHWC): see "Packed bf16 and f16" above.
template <class T, class W, int V, bool kChecked, bool kSelectOnly>
POOL3D_HD inline void SearchNdhwcPairs(const Launch<int32_t>& g,
                                        const uint16_t* xp, int32_t d0,
                                        int32_t h0, int32_t w0,
                                        const float* target, Best* best) {
  constexpr int N = V / 2;
  PackedSearch<T, N, kSelectOnly> search(target);
#pragma unroll
  for (int td = W::kD - 1; td >= 0; --td)
#pragma unroll
    for (int th = W::kH - 1; th >= 0; --th)
#pragma unroll
      for (int tw = W::kW - 1; tw >= 0; --tw) {
        const int32_t d = d0 + td, h = h0 + th, w = w0 + tw;
        const bool ok = !kChecked || (uint32_t(d) < uint32_t(g.D) &&
                                      uint32_t(h) < uint32_t(g.H) &&
                                      uint32_t(w) < uint32_t(g.W));
        uint32_t x[N];
        if (ok) {
          LoadVec<uint32_t, N>(reinterpret_cast<const uint32_t*>(xp + ((d * g.H + h) * g.W + w) * g.C), x);
        } else {
#pragma unroll
          for (int i = 0; i < N; ++i) x[i] = NegInf2<T>();
        }
#pragma unroll
        for (int i = 0; i < N; ++i) search.Step(i, x[i], ok ? ~0u : 0u, (td * W::kH + th) * W::kW + tw);
      }
  search.Finish(best);
}

// ---------------------------------------------------------------------------
// Window kernels, Fixed windows, NDHWC: a unit is V channels (c0 .. c0+V-1)
// of one output position; C % V == 0, each tap one aligned V-channel load.

POOL3D_HD inline bool InteriorWindow3(int32_t d0, int32_t h0, int32_t w0,
                                      int32_t kD, int32_t kH, int32_t kW,
                                      int32_t D, int32_t H, int32_t W) {
  return d0 >= 0 && d0 + kD <= D && h0 >= 0 && h0 + kH <= H && w0 >= 0 &&
         w0 + kW <= W;
}

// One channel at a time, as f32.
template <class T, class W, int V, bool kChecked, bool kSelectOnly>
POOL3D_HD inline void SearchNdhwcF32(const Launch<int32_t>& g,
                                  const typename T::M* xp, int32_t d0,
                                  int32_t h0, int32_t w0, const float* target,
                                  Best* best) {
  using M = typename T::M;
#pragma unroll
  for (int j = 0; j < V; ++j) Reset(&best[j]);
#pragma unroll
  for (int td = W::kD - 1; td >= 0; --td)
#pragma unroll
    for (int th = W::kH - 1; th >= 0; --th)
#pragma unroll
      for (int tw = W::kW - 1; tw >= 0; --tw) {
        const int32_t d = d0 + td, h = h0 + th, w = w0 + tw;
        const bool ok = !kChecked || (uint32_t(d) < uint32_t(g.D) &&
                                      uint32_t(h) < uint32_t(g.H) &&
                                      uint32_t(w) < uint32_t(g.W));
        M x[V];
        if (ok) LoadVec<M, V>(xp + ((d * g.H + h) * g.W + w) * g.C, x);
        const int32_t t = (td * W::kH + th) * W::kW + tw;
#pragma unroll
        for (int j = 0; j < V; ++j)
          StepLane<kSelectOnly>(&best[j], ok ? Wide<T>(x[j]) : NegativeInfinity(), ok,
                            kSelectOnly ? target[j] : 0.0f, t);
      }
}

// The searches of V channels: 16-bit types two channels a packed word, else as f32.
template <class T, class W, int V, bool kChecked, bool kSelectOnly>
POOL3D_HD inline void SearchNdhwc(const Launch<int32_t>& g,
                                  const typename T::M* xp, int32_t d0,
                                  int32_t h0, int32_t w0, const float* target,
                                  Best* best) {
  if constexpr (sizeof(typename T::M) == 2 && V % 2 == 0) {
    SearchNdhwcPairs<T, W, V, kChecked, kSelectOnly>(g, xp, d0, h0, w0, target, best);
  } else {
    SearchNdhwcF32<T, W, V, kChecked, kSelectOnly>(g, xp, d0, h0, w0, target, best);
  }
}

// The given outputs of V windows as f32 search targets (a NaN equals nothing).
template <class T, int V>
POOL3D_HD inline void LoadTargets(const typename T::M* y, float* target) {
  typename T::M yv[V];
  LoadVec<typename T::M, V>(y, yv);
#pragma unroll
  for (int j = 0; j < V; ++j) target[j] = Wide<T>(yv[j]);
}

// ---------------------------------------------------------------------------
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
// The window kernel's unit (forward, forward_output, the indices of
// backward_from_input, and backward's selection).

template <class T, class W, int L, int V, int Mode>
struct WindowUnit {
  using M = typename T::M;
  using I = typename W::Offset;
  using U = typename std::make_unsigned<I>::type;

  POOL3D_HD static void Run(const Launch<I>& g, const Operands<M>& p, U u) {
    if constexpr (!W::kFixed) {
      RunGeneric(g, p, u);
    } else if constexpr (L == kNcdhw) {
      U c[4];
      Decode<U, 3>(g.div, u, c);
      const int32_t ow0 = int32_t(c[0]) * V, oh = int32_t(c[1]),
                    od = int32_t(c[2]), plane = int32_t(c[3]);
      const M* xp = p.x + plane * (g.D * g.H * g.W);
      const int32_t o0 = ((plane * g.Do + od) * g.Ho + oh) * g.Wo + ow0;
      if (InteriorNcdhw<W, V>(g, od, oh, ow0)) {
        Body<false>(g, p, xp, od, oh, ow0, o0);
      } else {
        Body<true>(g, p, xp, od, oh, ow0, o0);
      }
    } else {
      U c[5];
      Decode<U, 4>(g.div, u, c);
      const int32_t c0 = int32_t(c[0]) * V, ow = int32_t(c[1]),
                    oh = int32_t(c[2]), od = int32_t(c[3]), n = int32_t(c[4]);
      const M* xp = p.x + n * (g.D * g.H * g.W * g.C) + c0;
      const int32_t o0 = (((n * g.Do + od) * g.Ho + oh) * g.Wo + ow) * g.C + c0;
      const int32_t d0 = od * W::sD - W::pD, h0 = oh * W::sH - W::pH,
                    w0 = ow * W::sW - W::pW;
      if (InteriorWindow3(d0, h0, w0, W::kD, W::kH, W::kW, g.D, g.H, g.W)) {
        BodyCl<false>(g, p, xp, d0, h0, w0, o0);
      } else {
        BodyCl<true>(g, p, xp, d0, h0, w0, o0);
      }
    }
  }

  template <bool kChecked>
  POOL3D_HD static void Body(const Launch<int32_t>& g, const Operands<M>& p,
                             const M* xp, int32_t od, int32_t oh, int32_t ow0,
                             int32_t o0) {
    Best best[V];
    const int32_t st[3] = {g.H * g.W, g.W, 1};
    const int32_t d0 = od * W::sD - W::pD, h0 = oh * W::sH - W::pH;
    if constexpr (Mode == kSelect) {
      float target[V];
      LoadTargets<T, V>(p.y_in + o0, target);
      SearchNcdhw<T, W, V, kChecked, true>(g, xp, od, oh, ow0, target, best);
      StoreIndices(p.idx + o0, best);
    } else {
      SearchNcdhw<T, W, V, kChecked, false>(g, xp, od, oh, ow0, nullptr, best);
      M y[V];
      int16_t idx[V];
#pragma unroll
      for (int j = 0; j < V; ++j)
        Finish<T>(g, xp, st, d0, h0, (ow0 + j) * W::sW - W::pW, best[j],
                  &y[j], &idx[j]);
      if (p.y != nullptr) StoreVec<M, V>(p.y + o0, y);
      if (p.idx != nullptr) StoreVec<int16_t, V>(p.idx + o0, idx);
    }
  }

  template <bool kChecked>
  POOL3D_HD static void BodyCl(const Launch<int32_t>& g, const Operands<M>& p,
                               const M* xp, int32_t d0, int32_t h0, int32_t w0,
                               int32_t o0) {
    Best best[V];
    const int32_t st[3] = {g.H * g.W * g.C, g.W * g.C, g.C};
    if constexpr (Mode == kSelect) {
      float target[V];
      LoadTargets<T, V>(p.y_in + o0, target);
      SearchNdhwc<T, W, V, kChecked, true>(g, xp, d0, h0, w0, target, best);
      StoreIndices(p.idx + o0, best);
    } else {
      SearchNdhwc<T, W, V, kChecked, false>(g, xp, d0, h0, w0, nullptr, best);
      M y[V];
      int16_t idx[V];
#pragma unroll
      for (int j = 0; j < V; ++j)
        Finish<T>(g, xp + j, st, d0, h0, w0, best[j], &y[j], &idx[j]);
      if (p.y != nullptr) StoreVec<M, V>(p.y + o0, y);
      if (p.idx != nullptr) StoreVec<int16_t, V>(p.idx + o0, idx);
    }
  }

  POOL3D_HD static void StoreIndices(int16_t* out, const Best* best) {
    int16_t idx[V];
#pragma unroll
    for (int j = 0; j < V; ++j) idx[j] = int16_t(best[j].tap);
    StoreVec<int16_t, V>(out, idx);
  }

  // Generic: output element u (output layout order) by the shared scans.
  POOL3D_HD static void RunGeneric(const Launch<I>& g, const Operands<M>& p,
                                   U u) {
    U c[5];
    Decode<U, 4>(g.div, u, c);
    I n, ch, od, oh, ow;
    if (g.out_cl) {  // channels-last output: (c, w, h, d, n)
      ch = I(c[0]); ow = I(c[1]); oh = I(c[2]); od = I(c[3]); n = I(c[4]);
    } else {  // (w, h, d, c, n)
      ow = I(c[0]); oh = I(c[1]); od = I(c[2]); ch = I(c[3]); n = I(c[4]);
    }
    const M* xp = p.x + n * g.xs[0] + ch * g.xs[1];
    const I d0 = od * g.sD - g.pD, h0 = oh * g.sH - g.pH, w0 = ow * g.sW - g.pW;
    const I o = I(u);
    if constexpr (Mode == kSelect) {
      p.idx[o] = int16_t(WindowFirstEqual<T>(g, xp, g.xs + 2, d0, h0, w0, p.y_in[o]));
    } else {
      M m;
      int32_t tap;
      WindowFirstMax<T>(g, xp, g.xs + 2, d0, h0, w0, &m, &tap);
      if (p.y != nullptr) p.y[o] = m;
      if (p.idx != nullptr) p.idx[o] = int16_t(tap);
    }
  }
};

// ---------------------------------------------------------------------------
// Writing a non-overlapping window block (k = s, no padding): dx at the tap
// selected in each lane gets that lane's gradient (-0 as +0, the scatter's
// 0 + g), every other element 0; rows of the input that no window covers
// (beyond Do*kD, Ho*kH, Wo*kW) are written 0 by the last window of their
// axis, so every dx element is written exactly once.

template <class T, class W, int V>
POOL3D_HD inline void WriteBlockNcdhw(const Launch<int32_t>& g,
                                      typename T::M* dxp, int32_t od,
                                      int32_t oh, int32_t ow0,
                                      const int32_t* tap,
                                      const typename T::M* gv) {
  using M = typename T::M;
  constexpr int N = V * W::kW;
  const int32_t d0 = od * W::kD, h0 = oh * W::kH, c0 = ow0 * W::kW;
#pragma unroll
  for (int td = 0; td < W::kD; ++td)
#pragma unroll
    for (int th = 0; th < W::kH; ++th) {
      M out[N];
#pragma unroll
      for (int j = 0; j < V; ++j)
#pragma unroll
        for (int tw = 0; tw < W::kW; ++tw)
          out[j * W::kW + tw] =
              tap[j] == (td * W::kH + th) * W::kW + tw ? gv[j] : M(0);
      StoreVec<M, N>(dxp + ((d0 + td) * g.H + h0 + th) * g.W + c0, out);
    }
  const bool last_d = od == g.Do - 1, last_h = oh == g.Ho - 1;
  if (last_d || last_h) {
    M zero[N];
#pragma unroll
    for (int i = 0; i < N; ++i) zero[i] = M(0);
    const int32_t d_end = last_d ? g.D : d0 + W::kD;
    const int32_t h_end = last_h ? g.H : h0 + W::kH;
    for (int32_t d = d0; d < d_end; ++d)
      for (int32_t h = h0; h < h_end; ++h)
        if (d >= d0 + W::kD || h >= h0 + W::kH)
          StoreVec<M, N>(dxp + (d * g.H + h) * g.W + c0, zero);
  }
}

template <class T, class W, int V>
POOL3D_HD inline void WriteBlockNdhwc(const Launch<int32_t>& g,
                                      typename T::M* dxp, int32_t od,
                                      int32_t oh, int32_t ow,
                                      const int32_t* tap,
                                      const typename T::M* gv) {
  using M = typename T::M;
  const int32_t d0 = od * W::kD, h0 = oh * W::kH, w0 = ow * W::kW;
#pragma unroll
  for (int td = 0; td < W::kD; ++td)
#pragma unroll
    for (int th = 0; th < W::kH; ++th)
#pragma unroll
      for (int tw = 0; tw < W::kW; ++tw) {
        M out[V];
#pragma unroll
        for (int j = 0; j < V; ++j)
          out[j] = tap[j] == (td * W::kH + th) * W::kW + tw ? gv[j] : M(0);
        StoreVec<M, V>(dxp + (((d0 + td) * g.H + h0 + th) * g.W + w0 + tw) * g.C, out);
      }
  const bool last_d = od == g.Do - 1, last_h = oh == g.Ho - 1,
             last_w = ow == g.Wo - 1;
  if (last_d || last_h || last_w) {
    M zero[V];
#pragma unroll
    for (int j = 0; j < V; ++j) zero[j] = M(0);
    const int32_t d_end = last_d ? g.D : d0 + W::kD;
    const int32_t h_end = last_h ? g.H : h0 + W::kH;
    const int32_t w_end = last_w ? g.W : w0 + W::kW;
    for (int32_t d = d0; d < d_end; ++d)
      for (int32_t h = h0; h < h_end; ++h)
        for (int32_t w = w0; w < w_end; ++w)
          if (d >= d0 + W::kD || h >= h0 + W::kH || w >= w0 + W::kW)
            StoreVec<M, V>(dxp + ((d * g.H + h) * g.W + w) * g.C, zero);
  }
}

// The gradient values of V lanes, -0 as +0.
template <class T, int V>
POOL3D_HD inline void LoadGradient(const typename T::M* go, typename T::M* gv) {
  LoadVec<typename T::M, V>(go, gv);
#pragma unroll
  for (int j = 0; j < V; ++j) gv[j] = Normalise<T>(gv[j]);
}

// One axis of an overlapping-window gather block (GatherUnit): P positions
// from i0 (a multiple of the stride S) are covered by the windows
// i0 / S + e, e in [kLo, kHi]; Tap(r, e) is position r's tap in window e, or
// -1 where that window does not cover it.
template <int K, int S, int Pad, int P>
struct GatherAxis {
  static constexpr int kLo = CeilDiv(Pad - K + 1, S);
  static constexpr int kHi = FloorDiv(P - 1 + Pad, S);
  static constexpr int kN = kHi - kLo + 1;
  POOL3D_HD static constexpr int Tap(int r, int e) {
    return r + Pad - e * S >= 0 && r + Pad - e * S < K ? r + Pad - e * S : -1;
  }
};

// The block of a Fixed window W in layout L with V lanes: positions per axis
// (NCDHW: V along W) and the three axes.
template <class W, int L, int V>
struct GatherBlockOf {
  static constexpr int kPD = GatherBlock(W::kD), kPH = GatherBlock(W::kH);
  static constexpr int kPW = L == kNcdhw ? V : GatherBlock(W::kW);
  using AD = GatherAxis<W::kD, W::sD, W::pD, kPD>;
  using AH = GatherAxis<W::kH, W::sH, W::pH, kPH>;
  using AW = GatherAxis<W::kW, W::sW, W::pW, kPW>;
};

// ---------------------------------------------------------------------------
// The gather kernel's unit: the gradient from indices.

template <class T, class W, int L, int V>
struct GatherUnit {
  using M = typename T::M;
  using I = typename W::Offset;
  using U = typename std::make_unsigned<I>::type;

  POOL3D_HD static void Run(const Launch<I>& g, const Operands<M>& p, U u) {
    if constexpr (!W::kFixed) {
      RunGeneric(g, p, u);
    } else if constexpr (!W::kOverlap) {
      RunBlocks(g, p, u);
    } else if constexpr (L == kNcdhw) {
      RunOverlapNcdhw(g, p, u);
    } else {
      RunOverlapNdhwc(g, p, u);
    }
  }

  // Non-overlapping windows: a unit is V windows; their indices and
  // gradients read once, their whole block written.
  POOL3D_HD static void RunBlocks(const Launch<int32_t>& g,
                                  const Operands<M>& p, U u) {
    int16_t idx[V];
    int32_t tap[V];
    M gv[V];
    if constexpr (L == kNcdhw) {
      U c[4];
      Decode<U, 3>(g.div, u, c);
      const int32_t ow0 = int32_t(c[0]) * V, oh = int32_t(c[1]),
                    od = int32_t(c[2]), plane = int32_t(c[3]);
      const int32_t o0 = ((plane * g.Do + od) * g.Ho + oh) * g.Wo + ow0;
      LoadVec<int16_t, V>(p.idx_in + o0, idx);
      LoadGradient<T, V>(p.go + o0, gv);
#pragma unroll
      for (int j = 0; j < V; ++j) tap[j] = idx[j];
      WriteBlockNcdhw<T, W, V>(g, p.dx + plane * (g.D * g.H * g.W), od, oh,
                               ow0, tap, gv);
    } else {
      U c[5];
      Decode<U, 4>(g.div, u, c);
      const int32_t c0 = int32_t(c[0]) * V, ow = int32_t(c[1]),
                    oh = int32_t(c[2]), od = int32_t(c[3]), n = int32_t(c[4]);
      const int32_t o0 = (((n * g.Do + od) * g.Ho + oh) * g.Wo + ow) * g.C + c0;
      LoadVec<int16_t, V>(p.idx_in + o0, idx);
      LoadGradient<T, V>(p.go + o0, gv);
#pragma unroll
      for (int j = 0; j < V; ++j) tap[j] = idx[j];
      WriteBlockNdhwc<T, W, V>(g, p.dx + n * (g.D * g.H * g.W * g.C) + c0, od,
                               oh, ow, tap, gv);
    }
  }

  // The candidate windows of position q along one axis (kernel k, stride s,
  // padding pad, n_out windows): o = q / s - (kN - 1) + c for c in [0, kN)
  // (ascending), real where 0 <= o < n_out and q - o * s < k.
  template <int K, int S>
  POOL3D_HD static constexpr int Candidates() { return (K + S - 1) / S; }

  // A tap no int16 index equals: the index of a window outside the tensor.
  static constexpr int32_t kNoTap = -(1 << 20);

  // Overlapping windows: a unit is a block of input positions, P per axis
  // (GatherBlock: 2 along an axis with a window, so that the block starts at
  // a multiple of the stride; NCDHW takes V positions along W). Which windows
  // cover each position, and at which tap, then depends only on the
  // position's place in the block (its parity): compile-time constants. The
  // block's windows are read once each, in ascending (od, oh, ow) order, and
  // each adds to the positions it covers: every position sums its windows in
  // that order, as the CPU kernels do. Windows outside the tensor read a
  // clamped real one and count for nothing; no branch but the final stores.
  POOL3D_HD static int32_t Clamp(int32_t o, int32_t n) { return o < 0 ? 0 : o >= n ? n - 1 : o; }

  POOL3D_HD static void RunOverlapNcdhw(const Launch<int32_t>& g,
                                        const Operands<M>& p, U u) {
    using B = GatherBlockOf<W, L, V>;
    using AD = typename B::AD;
    using AH = typename B::AH;
    using AW = typename B::AW;
    constexpr int kPD = B::kPD, kPH = B::kPH, kPW = B::kPW;
    U c[4];
    Decode<U, 3>(g.div, u, c);
    const int32_t w0 = int32_t(c[0]) * kPW, h0 = int32_t(c[1]) * kPH,
                  d0 = int32_t(c[2]) * kPD, plane = int32_t(c[3]);
    const int32_t obd = d0 / W::sD, obh = h0 / W::sH, obw = w0 / W::sW;
    const int16_t* ip = p.idx_in + plane * (g.Do * g.Ho * g.Wo);
    const M* gp = p.go + plane * (g.Do * g.Ho * g.Wo);
    int32_t wcol[AW::kN];
    bool wreal[AW::kN];
#pragma unroll
    for (int e = 0; e < AW::kN; ++e) {
      const int32_t ow = obw + AW::kLo + e;
      wreal[e] = ow >= 0 && ow < g.Wo;
      wcol[e] = Clamp(ow, g.Wo);
    }
    float acc[kPD][kPH][kPW];
#pragma unroll
    for (int rd = 0; rd < kPD; ++rd)
#pragma unroll
      for (int rh = 0; rh < kPH; ++rh)
#pragma unroll
        for (int rw = 0; rw < kPW; ++rw) acc[rd][rh][rw] = 0.0f;
#pragma unroll
    for (int ed = 0; ed < AD::kN; ++ed) {
      const int32_t od = obd + AD::kLo + ed;
      const bool dreal = od >= 0 && od < g.Do;
#pragma unroll
      for (int eh = 0; eh < AH::kN; ++eh) {
        const int32_t oh = obh + AH::kLo + eh;
        const bool rreal = dreal && oh >= 0 && oh < g.Ho;
        const int32_t row = (Clamp(od, g.Do) * g.Ho + Clamp(oh, g.Ho)) * g.Wo;
#pragma unroll
        for (int ew = 0; ew < AW::kN; ++ew) {
          // a window outside the tensor names no tap: one select here, none per position
          const int32_t wi = rreal && wreal[ew] ? int32_t(ip[row + wcol[ew]]) : kNoTap;
          const float wg = T::ToF32(gp[row + wcol[ew]]);
#pragma unroll
          for (int rd = 0; rd < kPD; ++rd)
#pragma unroll
            for (int rh = 0; rh < kPH; ++rh)
#pragma unroll
              for (int rw = 0; rw < kPW; ++rw) {
                const int td = AD::Tap(rd, AD::kLo + ed), th = AH::Tap(rh, AH::kLo + eh),
                          tw = AW::Tap(rw, AW::kLo + ew);
                if (td >= 0 && th >= 0 && tw >= 0) {  // compile-time
                  if (wi == (td * W::kH + th) * W::kW + tw) acc[rd][rh][rw] += wg;
                }
              }
        }
      }
    }
    M* dxp = p.dx + plane * (g.D * g.H * g.W);
#pragma unroll
    for (int rd = 0; rd < kPD; ++rd)
#pragma unroll
      for (int rh = 0; rh < kPH; ++rh) {
        if (d0 + rd >= g.D || h0 + rh >= g.H) continue;  // the block's overhang
        M out[kPW];
#pragma unroll
        for (int rw = 0; rw < kPW; ++rw) out[rw] = T::FromF32(acc[rd][rh][rw]);
        StoreVec<M, kPW>(dxp + ((d0 + rd) * g.H + h0 + rh) * g.W + w0, out);
      }
  }

  POOL3D_HD static void RunOverlapNdhwc(const Launch<int32_t>& g,
                                        const Operands<M>& p, U u) {
    using B = GatherBlockOf<W, L, V>;
    using AD = typename B::AD;
    using AH = typename B::AH;
    using AW = typename B::AW;
    constexpr int kPD = B::kPD, kPH = B::kPH, kPW = B::kPW;
    U c[5];
    Decode<U, 4>(g.div, u, c);
    const int32_t c0 = int32_t(c[0]) * V, w0 = int32_t(c[1]) * kPW,
                  h0 = int32_t(c[2]) * kPH, d0 = int32_t(c[3]) * kPD,
                  n = int32_t(c[4]);
    const int32_t obd = d0 / W::sD, obh = h0 / W::sH, obw = w0 / W::sW;
    const int32_t base = n * (g.Do * g.Ho * g.Wo * g.C) + c0;
    float acc[kPD][kPH][kPW][V];
#pragma unroll
    for (int rd = 0; rd < kPD; ++rd)
#pragma unroll
      for (int rh = 0; rh < kPH; ++rh)
#pragma unroll
        for (int rw = 0; rw < kPW; ++rw)
#pragma unroll
          for (int j = 0; j < V; ++j) acc[rd][rh][rw][j] = 0.0f;
#pragma unroll
    for (int ed = 0; ed < AD::kN; ++ed) {
      const int32_t od = obd + AD::kLo + ed;
      const bool dreal = od >= 0 && od < g.Do;
#pragma unroll
      for (int eh = 0; eh < AH::kN; ++eh) {
        const int32_t oh = obh + AH::kLo + eh;
        const bool hreal = dreal && oh >= 0 && oh < g.Ho;
#pragma unroll
        for (int ew = 0; ew < AW::kN; ++ew) {
          const int32_t ow = obw + AW::kLo + ew;
          const bool real = hreal && ow >= 0 && ow < g.Wo;
          const int32_t at =
              base + ((Clamp(od, g.Do) * g.Ho + Clamp(oh, g.Ho)) * g.Wo + Clamp(ow, g.Wo)) * g.C;
          int16_t wi[V];
          M wm[V];
          LoadVec<int16_t, V>(p.idx_in + at, wi);
          LoadVec<M, V>(p.go + at, wm);
          float wg[V];
#pragma unroll
          for (int j = 0; j < V; ++j) wg[j] = T::ToF32(wm[j]);
#pragma unroll
          for (int rd = 0; rd < kPD; ++rd)
#pragma unroll
            for (int rh = 0; rh < kPH; ++rh)
#pragma unroll
              for (int rw = 0; rw < kPW; ++rw) {
                const int td = AD::Tap(rd, AD::kLo + ed), th = AH::Tap(rh, AH::kLo + eh),
                          tw = AW::Tap(rw, AW::kLo + ew);
                if (td >= 0 && th >= 0 && tw >= 0) {  // compile-time
                  // a window outside the tensor names no tap: one select, none per channel
                  const int32_t t = real ? (td * W::kH + th) * W::kW + tw : kNoTap;
#pragma unroll
                  for (int j = 0; j < V; ++j)
                    if (int32_t(wi[j]) == t) acc[rd][rh][rw][j] += wg[j];
                }
              }
        }
      }
    }
    M* dxp = p.dx + n * (g.D * g.H * g.W * g.C) + c0;
#pragma unroll
    for (int rd = 0; rd < kPD; ++rd)
#pragma unroll
      for (int rh = 0; rh < kPH; ++rh)
#pragma unroll
        for (int rw = 0; rw < kPW; ++rw) {
          if (d0 + rd >= g.D || h0 + rh >= g.H || w0 + rw >= g.W) continue;
          M out[V];
#pragma unroll
          for (int j = 0; j < V; ++j) out[j] = T::FromF32(acc[rd][rh][rw][j]);
          StoreVec<M, V>(dxp + (((d0 + rd) * g.H + h0 + rh) * g.W + w0 + rw) * g.C, out);
        }
  }

  // Generic: input element u (input layout order): the windows covering it
  // (division-free: the strides' FastDiv), in ascending order.
  POOL3D_HD static void RunGeneric(const Launch<I>& g, const Operands<M>& p,
                                   U u) {
    U c[5];
    Decode<U, 4>(g.div, u, c);
    I n, ch, d, h, w;
    if (g.in_cl) {  // channels-last input: (c, w, h, d, n)
      ch = I(c[0]); w = I(c[1]); h = I(c[2]); d = I(c[3]); n = I(c[4]);
    } else {
      w = I(c[0]); h = I(c[1]); d = I(c[2]); ch = I(c[3]); n = I(c[4]);
    }
    const I qd = d + g.pD, qh = h + g.pH, qw = w + g.pW;
    I d_lo, d_hi, h_lo, h_hi, w_lo, w_hi;
    Covering(qd, g.kD, g.sdiv[0], g.Do, &d_lo, &d_hi);
    Covering(qh, g.kH, g.sdiv[1], g.Ho, &h_lo, &h_hi);
    Covering(qw, g.kW, g.sdiv[2], g.Wo, &w_lo, &w_hi);
    const I base = n * g.ys[0] + ch * g.ys[1];
    float acc = 0.0f;
    for (I od = d_lo; od <= d_hi; ++od)
      for (I oh = h_lo; oh <= h_hi; ++oh) {
        const I row = base + od * g.ys[2] + oh * g.ys[3];
        const I row_tap = TapOf<I>(g, qd - od * g.sD, qh - oh * g.sH, I(0));
        for (I ow = w_lo; ow <= w_hi; ++ow) {
          const I at = row + ow * g.ys[4];
          if (int32_t(p.idx_in[at]) == int32_t(row_tap + (qw - ow * g.sW)))
            acc += T::ToF32(p.go[at]);
        }
      }
    p.dx[I(u)] = T::FromF32(acc);
  }

  // CoveringWindows (shared_kernels/geometry.h) with the stride's FastDiv.
  POOL3D_HD static void Covering(I q, I k, const FastDiv<U>& s, I n_out, I* lo,
                                 I* hi) {
    *lo = q < k ? I(0) : I(s.Div(U(q - k))) + 1;
    const I top = I(s.Div(U(q)));
    *hi = top < n_out - 1 ? top : n_out - 1;
  }
};

// ---------------------------------------------------------------------------
// The fused kernel's unit: backward_from_input (Mode kByMax: x, g) or
// backward (kByOutput: x, y, g) for non-overlapping windows without
// padding: each unit selects in V windows and writes their blocks; no index
// ever reaches memory.

template <class T, class W, int L, int V, int Mode>
struct FusedUnit {
  using M = typename T::M;
  using I = typename W::Offset;
  using U = typename std::make_unsigned<I>::type;
  static_assert(W::kFixed && !W::kOverlap && W::pD == 0 && W::pH == 0 &&
                    W::pW == 0,
                "fused units are for non-overlapping windows without padding");

  POOL3D_HD static void Run(const Launch<I>& g, const Operands<M>& p, U u) {
    int32_t tap[V];
    M gv[V];
    if constexpr (L == kNcdhw) {
      U c[4];
      Decode<U, 3>(g.div, u, c);
      const int32_t ow0 = int32_t(c[0]) * V, oh = int32_t(c[1]),
                    od = int32_t(c[2]), plane = int32_t(c[3]);
      const M* xp = p.x + plane * (g.D * g.H * g.W);
      const int32_t o0 = ((plane * g.Do + od) * g.Ho + oh) * g.Wo + ow0;
      Best best[V];
      if constexpr (Mode == kByOutput) {
        float target[V];
        LoadTargets<T, V>(p.y_in + o0, target);
        SearchNcdhw<T, W, V, false, true>(g, xp, od, oh, ow0, target, best);
      } else {
        SearchNcdhw<T, W, V, false, false>(g, xp, od, oh, ow0, nullptr, best);
      }
#pragma unroll
      for (int j = 0; j < V; ++j) tap[j] = HeldNan(best[j]) ? -1 : best[j].tap;
      LoadGradient<T, V>(p.go + o0, gv);
      WriteBlockNcdhw<T, W, V>(g, p.dx + plane * (g.D * g.H * g.W), od, oh,
                               ow0, tap, gv);
    } else {
      U c[5];
      Decode<U, 4>(g.div, u, c);
      const int32_t c0 = int32_t(c[0]) * V, ow = int32_t(c[1]),
                    oh = int32_t(c[2]), od = int32_t(c[3]), n = int32_t(c[4]);
      const int32_t in0 = n * (g.D * g.H * g.W * g.C) + c0;
      const M* xp = p.x + in0;
      const int32_t o0 = (((n * g.Do + od) * g.Ho + oh) * g.Wo + ow) * g.C + c0;
      const int32_t d0 = od * W::kD, h0 = oh * W::kH, w0 = ow * W::kW;
      Best best[V];
      if constexpr (Mode == kByOutput) {
        float target[V];
        LoadTargets<T, V>(p.y_in + o0, target);
        SearchNdhwc<T, W, V, false, true>(g, xp, d0, h0, w0, target, best);
      } else {
        SearchNdhwc<T, W, V, false, false>(g, xp, d0, h0, w0, nullptr, best);
      }
#pragma unroll
      for (int j = 0; j < V; ++j) tap[j] = HeldNan(best[j]) ? -1 : best[j].tap;
      LoadGradient<T, V>(p.go + o0, gv);
      WriteBlockNdhwc<T, W, V>(g, p.dx + in0, od, oh, ow, tap, gv);
    }
  }
};

}  // namespace gpu
}  // namespace pool3d

#endif  // POOL3D_GPU_CUDA_UNITS_H_
