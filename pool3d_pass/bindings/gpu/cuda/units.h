// The CUDA kernels' work per thread ("unit"), as __host__ __device__ code.
//
// A kernel is a grid-stride loop over units (kernels.cu); what one unit does
// is here, so that the host test (tests/kernels/test_cuda_elements.py)
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
//   through the shared scan rules (common/window_scan.h) and the division-free
//   decoding of fast_div.h; I is the offset type (int64_t only for planes of
//   2^31 elements or more).
//
// The rules are the contract's (docs/contract.md), as the CPU kernels apply
// them: the first maximum in row-major tap order (keys: common/element_types.h,
// +0 and -0 equal, a NaN wins and selects no tap), the output +0 where the
// maximum is a zero and some tap is +0, gradients summed in f32 in ascending
// window order and rounded once, each dx element written by one thread.
#ifndef POOL3D_GPU_CUDA_UNITS_H_
#define POOL3D_GPU_CUDA_UNITS_H_

#include <cstdint>
#include <type_traits>

#include "common/element_types.h"
#include "common/geometry.h"
#include "common/hd.h"
#include "common/window_scan.h"
#include "fast_div.h"

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
// Keys and values.

// The value of a key that is neither NaN nor a zero (KeyNanHigh's inverse).
template <class T>
POOL3D_HD inline typename T::M FromKey(int32_t k) {
  using M = typename T::M;
  constexpr uint32_t kSign = uint32_t{1} << (sizeof(M) * 8 - 1);
  return k < 0 ? M(kSign | uint32_t(-k)) : M(uint32_t(k));
}

// What a window's maximum key and first-maximum tap give: the output value
// and the contract's index (-1 where the maximum is NaN). NaN and zero maxima
// go back to the window's elements (xp, strides st): a NaN keeps its own bits
// (the first NaN, at `tap`), a zero is +0 where any tap holds +0.
template <class T, class G, class I>
POOL3D_HD inline void Finish(const G& g, const typename T::M* xp, const I* st,
                             I d0, I h0, I w0, int32_t best, int32_t tap,
                             typename T::M* y, int16_t* idx) {
  using M = typename T::M;
  if (idx != nullptr) *idx = int16_t(best == kNanHighKey ? -1 : tap);
  if (y == nullptr) return;
  if (best != kNanHighKey && best != 0) {
    *y = FromKey<T>(best);
    return;
  }
  M m;
  int32_t t;
  WindowFirstMax<T>(g, xp, st, d0, h0, w0, &m, &t);
  *y = m;
}

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
// after) scalar. kChecked: the unit touches the padding (bounds checks).

template <class W, int V>
struct NcdhwSegment {
  static constexpr int kSeg = (V - 1) * W::sW + W::kW;
  static constexpr int kVec0 = W::pW;      // first column of the vector
  static constexpr int kVecN = V * W::sW;  // its columns
};

template <class T, class W, int V, bool kChecked>
POOL3D_HD inline void LoadKeysNcdhw(const Launch<int32_t>& g,
                                    const typename T::M* xp, int32_t d,
                                    int32_t h, int32_t c0, int32_t* key) {
  using M = typename T::M;
  using S = NcdhwSegment<W, V>;
  if constexpr (!kChecked) {
    const M* row = xp + (d * g.H + h) * g.W + c0;
    M seg[S::kSeg];
    LoadVec<M, S::kVecN>(row + S::kVec0, seg + S::kVec0);
#pragma unroll
    for (int t = 0; t < S::kSeg; ++t)
      if (t < S::kVec0 || t >= S::kVec0 + S::kVecN) seg[t] = row[t];
#pragma unroll
    for (int t = 0; t < S::kSeg; ++t) key[t] = KeyNanHigh<T>(seg[t]);
  } else {
    const bool row_ok = uint32_t(d) < uint32_t(g.D) && uint32_t(h) < uint32_t(g.H);
#pragma unroll
    for (int t = 0; t < S::kSeg; ++t) {
      const int32_t c = c0 + t;
      const bool ok = row_ok && uint32_t(c) < uint32_t(g.W);
      key[t] = ok ? KeyNanHigh<T>(xp[(d * g.H + h) * g.W + c]) : kPadKey;
    }
  }
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

// The first maximum of V windows: best key and tap per lane.
template <class T, class W, int V, bool kChecked>
POOL3D_HD inline void MaxNcdhw(const Launch<int32_t>& g,
                               const typename T::M* xp, int32_t od, int32_t oh,
                               int32_t ow0, int32_t* best, int32_t* tap) {
  constexpr int kSeg = NcdhwSegment<W, V>::kSeg;
#pragma unroll
  for (int j = 0; j < V; ++j) {
    best[j] = kPadKey;
    tap[j] = -1;
  }
  const int32_t d0 = od * W::sD - W::pD, h0 = oh * W::sH - W::pH;
  const int32_t c0 = ow0 * W::sW - W::pW;
#pragma unroll
  for (int td = 0; td < W::kD; ++td)
#pragma unroll
    for (int th = 0; th < W::kH; ++th) {
      int32_t key[kSeg];
      LoadKeysNcdhw<T, W, V, kChecked>(g, xp, d0 + td, h0 + th, c0, key);
#pragma unroll
      for (int j = 0; j < V; ++j)
#pragma unroll
        for (int tw = 0; tw < W::kW; ++tw) {
          const int32_t k = key[j * W::sW + tw];
          const bool gt = k > best[j];
          best[j] = gt ? k : best[j];
          tap[j] = gt ? (td * W::kH + th) * W::kW + tw : tap[j];
        }
    }
}

// The first tap of each of V windows whose element equals target[j] (keys;
// a NaN target is kNanKey, which no element's key equals): -1 where none.
template <class T, class W, int V, bool kChecked>
POOL3D_HD inline void SelectNcdhw(const Launch<int32_t>& g,
                                  const typename T::M* xp, int32_t od,
                                  int32_t oh, int32_t ow0,
                                  const int32_t* target, int32_t* tap) {
  constexpr int kSeg = NcdhwSegment<W, V>::kSeg;
#pragma unroll
  for (int j = 0; j < V; ++j) tap[j] = -1;
  const int32_t d0 = od * W::sD - W::pD, h0 = oh * W::sH - W::pH;
  const int32_t c0 = ow0 * W::sW - W::pW;
  // Last tap first: the last match written is the first in tap order.
#pragma unroll
  for (int td = W::kD - 1; td >= 0; --td)
#pragma unroll
    for (int th = W::kH - 1; th >= 0; --th) {
      int32_t key[kSeg];
      LoadKeysNcdhw<T, W, V, kChecked>(g, xp, d0 + td, h0 + th, c0, key);
#pragma unroll
      for (int j = 0; j < V; ++j)
#pragma unroll
        for (int tw = W::kW - 1; tw >= 0; --tw)
          tap[j] = key[j * W::sW + tw] == target[j]
                       ? (td * W::kH + th) * W::kW + tw
                       : tap[j];
    }
}

template <class T>
POOL3D_HD inline int32_t TargetKey(typename T::M y) {
  return IsNan<T>(y) ? kNanKey : KeyNanHigh<T>(y);
}

// ---------------------------------------------------------------------------
// Window kernels, Fixed windows, NDHWC: a unit is V channels (c0 .. c0+V-1)
// of one output position; C % V == 0, each tap one aligned V-channel load.

template <class T, class W, int V, bool kChecked>
POOL3D_HD inline void LoadTapNdhwc(const Launch<int32_t>& g,
                                   const typename T::M* xp, int32_t d,
                                   int32_t h, int32_t w, int32_t* key) {
  using M = typename T::M;
  const bool ok = !kChecked || (uint32_t(d) < uint32_t(g.D) &&
                                uint32_t(h) < uint32_t(g.H) &&
                                uint32_t(w) < uint32_t(g.W));
  M v[V];
  if (ok) {
    LoadVec<M, V>(xp + ((d * g.H + h) * g.W + w) * g.C, v);
  }
#pragma unroll
  for (int j = 0; j < V; ++j) key[j] = ok ? KeyNanHigh<T>(v[j]) : kPadKey;
}

POOL3D_HD inline bool InteriorWindow3(int32_t d0, int32_t h0, int32_t w0,
                                      int32_t kD, int32_t kH, int32_t kW,
                                      int32_t D, int32_t H, int32_t W) {
  return d0 >= 0 && d0 + kD <= D && h0 >= 0 && h0 + kH <= H && w0 >= 0 &&
         w0 + kW <= W;
}

template <class T, class W, int V, bool kChecked>
POOL3D_HD inline void MaxNdhwc(const Launch<int32_t>& g,
                               const typename T::M* xp, int32_t d0, int32_t h0,
                               int32_t w0, int32_t* best, int32_t* tap) {
#pragma unroll
  for (int j = 0; j < V; ++j) {
    best[j] = kPadKey;
    tap[j] = -1;
  }
#pragma unroll
  for (int td = 0; td < W::kD; ++td)
#pragma unroll
    for (int th = 0; th < W::kH; ++th)
#pragma unroll
      for (int tw = 0; tw < W::kW; ++tw) {
        int32_t key[V];
        LoadTapNdhwc<T, W, V, kChecked>(g, xp, d0 + td, h0 + th, w0 + tw, key);
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const bool gt = key[j] > best[j];
          best[j] = gt ? key[j] : best[j];
          tap[j] = gt ? (td * W::kH + th) * W::kW + tw : tap[j];
        }
      }
}

template <class T, class W, int V, bool kChecked>
POOL3D_HD inline void SelectNdhwc(const Launch<int32_t>& g,
                                  const typename T::M* xp, int32_t d0,
                                  int32_t h0, int32_t w0,
                                  const int32_t* target, int32_t* tap) {
#pragma unroll
  for (int j = 0; j < V; ++j) tap[j] = -1;
#pragma unroll
  for (int td = W::kD - 1; td >= 0; --td)
#pragma unroll
    for (int th = W::kH - 1; th >= 0; --th)
#pragma unroll
      for (int tw = W::kW - 1; tw >= 0; --tw) {
        int32_t key[V];
        LoadTapNdhwc<T, W, V, kChecked>(g, xp, d0 + td, h0 + th, w0 + tw, key);
#pragma unroll
        for (int j = 0; j < V; ++j)
          tap[j] = key[j] == target[j] ? (td * W::kH + th) * W::kW + tw : tap[j];
      }
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
    int32_t tap[V];
    const int32_t st[3] = {g.H * g.W, g.W, 1};
    const int32_t d0 = od * W::sD - W::pD, h0 = oh * W::sH - W::pH;
    if constexpr (Mode == kSelect) {
      M yv[V];
      LoadVec<M, V>(p.y_in + o0, yv);
      int32_t target[V];
#pragma unroll
      for (int j = 0; j < V; ++j) target[j] = TargetKey<T>(yv[j]);
      SelectNcdhw<T, W, V, kChecked>(g, xp, od, oh, ow0, target, tap);
      StoreIndices(p.idx + o0, tap);
    } else {
      int32_t best[V];
      MaxNcdhw<T, W, V, kChecked>(g, xp, od, oh, ow0, best, tap);
      M y[V];
      int16_t idx[V];
#pragma unroll
      for (int j = 0; j < V; ++j)
        Finish<T>(g, xp, st, d0, h0, (ow0 + j) * W::sW - W::pW, best[j],
                  tap[j], &y[j], &idx[j]);
      if (p.y != nullptr) StoreVec<M, V>(p.y + o0, y);
      if (p.idx != nullptr) StoreVec<int16_t, V>(p.idx + o0, idx);
    }
  }

  template <bool kChecked>
  POOL3D_HD static void BodyCl(const Launch<int32_t>& g, const Operands<M>& p,
                               const M* xp, int32_t d0, int32_t h0, int32_t w0,
                               int32_t o0) {
    int32_t tap[V];
    const int32_t st[3] = {g.H * g.W * g.C, g.W * g.C, g.C};
    if constexpr (Mode == kSelect) {
      M yv[V];
      LoadVec<M, V>(p.y_in + o0, yv);
      int32_t target[V];
#pragma unroll
      for (int j = 0; j < V; ++j) target[j] = TargetKey<T>(yv[j]);
      SelectNdhwc<T, W, V, kChecked>(g, xp, d0, h0, w0, target, tap);
      StoreIndices(p.idx + o0, tap);
    } else {
      int32_t best[V];
      MaxNdhwc<T, W, V, kChecked>(g, xp, d0, h0, w0, best, tap);
      M y[V];
      int16_t idx[V];
#pragma unroll
      for (int j = 0; j < V; ++j)
        Finish<T>(g, xp + j, st, d0, h0, w0, best[j], tap[j], &y[j], &idx[j]);
      if (p.y != nullptr) StoreVec<M, V>(p.y + o0, y);
      if (p.idx != nullptr) StoreVec<int16_t, V>(p.idx + o0, idx);
    }
  }

  POOL3D_HD static void StoreIndices(int16_t* out, const int32_t* tap) {
    int16_t idx[V];
#pragma unroll
    for (int j = 0; j < V; ++j) idx[j] = int16_t(tap[j]);
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

  // Overlapping windows, NCDHW: a unit is V input elements w0 .. w0+V-1 of
  // one row (W % V == 0, V % sW == 0). Each lane's candidate windows along W
  // and their taps are compile-time constants (w0 is a multiple of sW).
  POOL3D_HD static void RunOverlapNcdhw(const Launch<int32_t>& g,
                                        const Operands<M>& p, U u) {
    constexpr int NCD = Candidates<W::kD, W::sD>(), NCH = Candidates<W::kH, W::sH>(),
                  NCW = Candidates<W::kW, W::sW>();
    // Windows along W read by the unit: [ob + kLo, ob + kLo + kNW).
    constexpr int kLo = W::pW / W::sW - (NCW - 1);
    constexpr int kNW = (V - 1 + W::pW) / W::sW - W::pW / W::sW + NCW;
    U c[4];
    Decode<U, 3>(g.div, u, c);
    const int32_t w0 = int32_t(c[0]) * V, h = int32_t(c[1]), d = int32_t(c[2]),
                  plane = int32_t(c[3]);
    const int32_t ob = w0 / W::sW;  // a compile-time divisor: a shift or a multiply
    const int32_t qd = d + W::pD, qh = h + W::pH;
    const int32_t od_hi = qd / W::sD, oh_hi = qh / W::sH;
    float acc[V];
#pragma unroll
    for (int j = 0; j < V; ++j) acc[j] = 0.0f;
    const int16_t* ip = p.idx_in + plane * (g.Do * g.Ho * g.Wo);
    const M* gp = p.go + plane * (g.Do * g.Ho * g.Wo);
    const bool w_inside = ob + kLo >= 0 && ob + kLo + kNW <= g.Wo;
#pragma unroll
    for (int cd = 0; cd < NCD; ++cd) {
      const int32_t od = od_hi - (NCD - 1) + cd, td = qd - od * W::sD;
      if (od < 0 || od >= g.Do || td >= W::kD) continue;
#pragma unroll
      for (int chh = 0; chh < NCH; ++chh) {
        const int32_t oh = oh_hi - (NCH - 1) + chh, th = qh - oh * W::sH;
        if (oh < 0 || oh >= g.Ho || th >= W::kH) continue;
        const int32_t row = (od * g.Ho + oh) * g.Wo + ob + kLo;
        const int32_t row_tap = (td * W::kH + th) * W::kW;
        int32_t wi[kNW];
        float wg[kNW];
#pragma unroll
        for (int t = 0; t < kNW; ++t) {
          const int32_t ow = ob + kLo + t;
          const bool ok = w_inside || (ow >= 0 && ow < g.Wo);
          wi[t] = ok ? int32_t(ip[row + t]) : -1;
          wg[t] = ok ? T::ToF32(gp[row + t]) : 0.0f;
        }
#pragma unroll
        for (int j = 0; j < V; ++j)
#pragma unroll
          for (int cw = 0; cw < NCW; ++cw) {
            // lane j's candidate cw: window ob + (j + pW) / sW - (NCW-1) + cw
            const int t = (j + W::pW) / W::sW - (NCW - 1) + cw - kLo;
            const int tw = (j + W::pW) - ((j + W::pW) / W::sW - (NCW - 1) + cw) * W::sW;
            if (tw < W::kW && wi[t] == row_tap + tw) acc[j] += wg[t];
          }
      }
    }
    M out[V];
#pragma unroll
    for (int j = 0; j < V; ++j) out[j] = T::FromF32(acc[j]);
    StoreVec<M, V>(p.dx + plane * (g.D * g.H * g.W) + (d * g.H + h) * g.W + w0, out);
  }

  // Overlapping windows, NDHWC: a unit is V channels of one input position;
  // each candidate window's V indices and gradients are one load each.
  POOL3D_HD static void RunOverlapNdhwc(const Launch<int32_t>& g,
                                        const Operands<M>& p, U u) {
    constexpr int NCD = Candidates<W::kD, W::sD>(), NCH = Candidates<W::kH, W::sH>(),
                  NCW = Candidates<W::kW, W::sW>();
    U c[5];
    Decode<U, 4>(g.div, u, c);
    const int32_t c0 = int32_t(c[0]) * V, w = int32_t(c[1]), h = int32_t(c[2]),
                  d = int32_t(c[3]), n = int32_t(c[4]);
    const int32_t qd = d + W::pD, qh = h + W::pH, qw = w + W::pW;
    const int32_t od_hi = qd / W::sD, oh_hi = qh / W::sH, ow_hi = qw / W::sW;
    const int32_t base = n * (g.Do * g.Ho * g.Wo * g.C) + c0;
    float acc[V];
#pragma unroll
    for (int j = 0; j < V; ++j) acc[j] = 0.0f;
#pragma unroll
    for (int cd = 0; cd < NCD; ++cd) {
      const int32_t od = od_hi - (NCD - 1) + cd, td = qd - od * W::sD;
      if (od < 0 || od >= g.Do || td >= W::kD) continue;
#pragma unroll
      for (int chh = 0; chh < NCH; ++chh) {
        const int32_t oh = oh_hi - (NCH - 1) + chh, th = qh - oh * W::sH;
        if (oh < 0 || oh >= g.Ho || th >= W::kH) continue;
#pragma unroll
        for (int cw = 0; cw < NCW; ++cw) {
          const int32_t ow = ow_hi - (NCW - 1) + cw, tw = qw - ow * W::sW;
          if (ow < 0 || ow >= g.Wo || tw >= W::kW) continue;
          const int32_t at = base + ((od * g.Ho + oh) * g.Wo + ow) * g.C;
          const int32_t t = (td * W::kH + th) * W::kW + tw;
          int16_t wi[V];
          M wg[V];
          LoadVec<int16_t, V>(p.idx_in + at, wi);
          LoadVec<M, V>(p.go + at, wg);
#pragma unroll
          for (int j = 0; j < V; ++j)
            if (int32_t(wi[j]) == t) acc[j] += T::ToF32(wg[j]);
        }
      }
    }
    M out[V];
#pragma unroll
    for (int j = 0; j < V; ++j) out[j] = T::FromF32(acc[j]);
    StoreVec<M, V>(p.dx + n * (g.D * g.H * g.W * g.C) + ((d * g.H + h) * g.W + w) * g.C + c0, out);
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

  // CoveringWindows (common/geometry.h) with the stride's FastDiv.
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
      if constexpr (Mode == kByOutput) {
        M yv[V];
        LoadVec<M, V>(p.y_in + o0, yv);
        int32_t target[V];
#pragma unroll
        for (int j = 0; j < V; ++j) target[j] = TargetKey<T>(yv[j]);
        SelectNcdhw<T, W, V, false>(g, xp, od, oh, ow0, target, tap);
      } else {
        int32_t best[V];
        MaxNcdhw<T, W, V, false>(g, xp, od, oh, ow0, best, tap);
#pragma unroll
        for (int j = 0; j < V; ++j) tap[j] = best[j] == kNanHighKey ? -1 : tap[j];
      }
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
      if constexpr (Mode == kByOutput) {
        M yv[V];
        LoadVec<M, V>(p.y_in + o0, yv);
        int32_t target[V];
#pragma unroll
        for (int j = 0; j < V; ++j) target[j] = TargetKey<T>(yv[j]);
        SelectNdhwc<T, W, V, false>(g, xp, d0, h0, w0, target, tap);
      } else {
        int32_t best[V];
        MaxNdhwc<T, W, V, false>(g, xp, d0, h0, w0, best, tap);
#pragma unroll
        for (int j = 0; j < V; ++j) tap[j] = best[j] == kNanHighKey ? -1 : tap[j];
      }
      LoadGradient<T, V>(p.go + o0, gv);
      WriteBlockNdhwc<T, W, V>(g, p.dx + in0, od, oh, ow, tap, gv);
    }
  }
};

}  // namespace gpu
}  // namespace pool3d

#endif  // POOL3D_GPU_CUDA_UNITS_H_
