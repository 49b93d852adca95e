// CPU binding of the custom call `pool3d.max_pooling_3d_backward`.
//
// What: an XLA typed-FFI handler (api_version 4) computing the gradient of a
// 3-D max pool from (grad_output, input, output) exactly as docs/contract.md
// defines it: for every window, walking the taps in row-major (d, h, w) order,
// the FIRST tap whose input equals output[window] receives the whole
// grad_output[window]; padding is never selected; overlapping windows add
// (f32 accumulation for bf16/f16, rounded once). Layouts NCDHW and NDHWC,
// element types f32, bf16 and f16. It is packaged as a tiny CPython extension
// whose `handler()` returns a PyCapsule for jax.ffi.register_ffi_target.
//
// Why: XLA's own select_and_scatter on CPU is one to two orders of magnitude
// slower than the memory-bandwidth floor. This kernel reads every input once
// where the layout allows, writes the result once in the common
// non-overlapping case (no separate zeroing pass), works on raw bit patterns
// (no conversions outside the accumulating paths), vectorises across W
// (NCDHW) or C (NDHWC), and splits the work over up to 8 threads so that no
// two threads ever write the same element. Overlapping windows use a
// separable first-max search (O(kD + kH + kW) per window; NCDHW reduces W,
// H, then D per plane, NDHWC reduces D, W, then H across a block of
// channels) whose hot loops are also compiled for AVX2 (target_clones,
// picked at load time). A large result buffer is advised to use 2 MiB pages
// (madvise), because first-touch page faults on a fresh 4 KiB-paged buffer
// cost about as much as the kernel.
//
// Every shape, dtype or attribute that disagrees with the contract is
// rejected with ffi::Error::InvalidArgument naming the offending value.

#ifndef POOL3D_NO_PYTHON_MODULE  // defined only by stand-alone C++ benchmarks
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#endif

#include <algorithm>
#include <climits>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "xla/ffi/api/ffi.h"

namespace pool3d {
namespace {

namespace ffi = xla::ffi;

constexpr const char* kTarget = "pool3d.max_pooling_3d_backward";
constexpr int64_t kMaxWindowElements = 4096;
// Attribute values above this bound are rejected: it keeps every index
// computation far away from int64 overflow.
constexpr int64_t kMaxAttrValue = int64_t{1} << 30;

// ---------------------------------------------------------------------------
// Element types, handled as raw bit patterns.
// ---------------------------------------------------------------------------

inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}
inline float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

struct F32T {
  using M = uint32_t;
  static constexpr M kAbs = 0x7fffffffu;
  static constexpr M kInf = 0x7f800000u;
  static inline float ToF32(M v) { return BitsFloat(v); }
  static inline M FromF32(float f) { return FloatBits(f); }
};

struct BF16T {
  using M = uint16_t;
  static constexpr M kAbs = 0x7fff;
  static constexpr M kInf = 0x7f80;
  static inline float ToF32(M v) { return BitsFloat(uint32_t{v} << 16); }
  static inline M FromF32(float f) {  // round to nearest even
    uint32_t u = FloatBits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return M((u >> 16) | 0x40);  // NaN
    return M((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
};

struct F16T {
  using M = uint16_t;
  static constexpr M kAbs = 0x7fff;
  static constexpr M kInf = 0x7c00;
  static inline float ToF32(M h) {
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
  static inline M FromF32(float f) {  // round to nearest even
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
inline typename T::M EqMask(typename T::M a, typename T::M b) {
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

// `v` where `mask` is all-ones, +0.0f where it is 0.
template <class M>
inline float MaskF32(float v, M mask) {
  uint32_t m = sizeof(M) == 4 ? uint32_t(mask) : uint32_t(int32_t(int16_t(mask)));
  return BitsFloat(FloatBits(v) & m);
}

// The value 0 + g in the element type: -0 becomes +0 (XLA's scatter starts
// from +0), everything else is unchanged.
template <class T>
inline typename T::M Normalise(typename T::M g) {
  using M = typename T::M;
  return (g & T::kAbs) ? g : M(0);
}

// ---------------------------------------------------------------------------
// Geometry and threading.
// ---------------------------------------------------------------------------

struct Geom {
  int64_t B, C;
  int64_t D, H, W;     // input spatial extents
  int64_t Do, Ho, Wo;  // output spatial extents
  int64_t kD, kH, kW, sD, sH, sW, pD, pH, pW;
  bool in_cl, out_cl;  // channels-last (NDHWC) input / output
  bool overlap;        // some stride < kernel: windows may share elements
  bool full_cover;     // every input element lies in some window
};

// Taps t in [0, k) of a window starting at `start` that fall inside [0, n).
inline void TapRange(int64_t start, int64_t k, int64_t n, int64_t* lo,
                     int64_t* hi) {
  *lo = std::max<int64_t>(0, -start);
  *hi = std::min<int64_t>(k, n - start);
  if (*hi < *lo) *hi = *lo;
}

// Input rows [lo, hi) along one axis that window `o` "owns" when windows do
// not overlap: its own taps plus any uncovered rows up to the next window
// (and to the end of the axis for the last window). Disjoint across `o`.
inline void OwnedRange(int64_t o, int64_t n_out, int64_t s, int64_t p,
                       int64_t n, int64_t* lo, int64_t* hi) {
  int64_t a = o == 0 ? 0 : o * s - p;
  int64_t b = o == n_out - 1 ? n : (o + 1) * s - p;
  *lo = std::clamp<int64_t>(a, 0, n);
  *hi = std::clamp<int64_t>(b, 0, n);
  if (*hi < *lo) *hi = *lo;
}

int ThreadCount(int64_t n_items, int64_t total_elements) {
  int64_t want = 0;
  if (const char* env = std::getenv("POOL3D_CPU_THREADS")) {
    want = std::atoll(env);  // explicit override, also for tiny problems
  }
  if (want <= 0) {
    if (total_elements < (int64_t{1} << 16)) return 1;  // not worth a thread
    unsigned hw = std::thread::hardware_concurrency();
    want = std::min<int64_t>(hw == 0 ? 1 : hw, 8);
  }
  want = std::min<int64_t>(want, 64);
  return int(std::max<int64_t>(1, std::min<int64_t>(want, n_items)));
}

// Runs fn(item, scratch) for item in [0, n_items) on `threads` threads; items
// are handed out dynamically. Each thread owns one scratch object.
template <class Scratch, class Fn>
void ParallelFor(int64_t n_items, int threads, Fn fn) {
  if (n_items <= 0) return;
  if (threads <= 1) {
    Scratch scratch;
    for (int64_t i = 0; i < n_items; ++i) fn(i, scratch);
    return;
  }
  std::atomic<int64_t> next{0};
  auto worker = [&]() {
    Scratch scratch;
    for (int64_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) <
                    n_items;) {
      fn(i, scratch);
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(threads - 1);
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& th : pool) th.join();
}

template <class T>
struct Scratch {
  std::vector<typename T::M> found, gnorm;
  std::vector<float> acc, gf;
};

// ---------------------------------------------------------------------------
// NCDHW input, NCDHW output, windows that do not overlap (stride >= kernel).
// One work item is one (plane, od) pair: it writes every element of the
// input rows it owns exactly once (selected gradient or zero).
// ---------------------------------------------------------------------------

// One input row of one window row: taps tw of windows ow in [lo, hi), all in
// range. KW > 0 fixes kW == sW == KW at compile time.
template <class T, int KW>
inline void RowNoOverlap(const typename T::M* __restrict xr,
                         typename T::M* __restrict dr,
                         const typename T::M* __restrict yr,
                         const typename T::M* __restrict gr,
                         typename T::M* __restrict found, int64_t lo,
                         int64_t hi, int64_t kW, int64_t sW, int64_t pW) {
  using M = typename T::M;
  if constexpr (KW > 0) {
    const M* xs = xr + (lo * KW - pW);
    M* ds = dr + (lo * KW - pW);
    for (int64_t ow = lo; ow < hi; ++ow) {
      M yv = yr[ow], gv = Normalise<T>(gr[ow]), f = found[ow];
      const int64_t o = (ow - lo) * KW;
      for (int tw = 0; tw < KW; ++tw) {
        M e = EqMask<T>(xs[o + tw], yv) & M(~f);
        ds[o + tw] = M(e & gv);
        f = M(f | e);
      }
      found[ow] = f;
    }
  } else {
    for (int64_t ow = lo; ow < hi; ++ow) {
      const int64_t w0 = ow * sW - pW;
      M yv = yr[ow], gv = Normalise<T>(gr[ow]), f = found[ow];
      for (int64_t tw = 0; tw < kW; ++tw) {
        M e = EqMask<T>(xr[w0 + tw], yv) & M(~f);
        dr[w0 + tw] = M(e & gv);
        f = M(f | e);
      }
      found[ow] = f;
    }
  }
}

// Same with per-tap bounds checks (edge windows touching the padding).
template <class T>
inline void RowNoOverlapEdge(const typename T::M* xr, typename T::M* dr,
                             const typename T::M* yr, const typename T::M* gr,
                             typename T::M* found, int64_t ow, const Geom& g) {
  using M = typename T::M;
  const int64_t w0 = ow * g.sW - g.pW;
  int64_t lo, hi;
  TapRange(w0, g.kW, g.W, &lo, &hi);
  M yv = yr[ow], gv = Normalise<T>(gr[ow]), f = found[ow];
  for (int64_t tw = lo; tw < hi; ++tw) {
    M e = EqMask<T>(xr[w0 + tw], yv) & M(~f);
    dr[w0 + tw] = M(e & gv);
    f = M(f | e);
  }
  found[ow] = f;
}

template <class T, int KW>
void NcdhwNoOverlap(const Geom& g, const typename T::M* x,
                    const typename T::M* y, const typename T::M* go,
                    typename T::M* dx) {
  using M = typename T::M;
  const int64_t planes = g.B * g.C;
  const int64_t HW = g.H * g.W, DHW = g.D * HW, HoWo = g.Ho * g.Wo,
                ODHW = g.Do * HoWo;
  // Windows ow in [ilo, ihi) have all their taps inside [0, W).
  int64_t ilo = (g.pW + g.sW - 1) / g.sW;
  int64_t ihi = g.W + g.pW - g.kW >= 0 ? (g.W + g.pW - g.kW) / g.sW + 1 : 0;
  ihi = std::min(ihi, g.Wo);
  ilo = std::min(ilo, g.Wo);
  if (ihi < ilo) ihi = ilo;
  const int threads = ThreadCount(planes * g.Do, planes * DHW);
  ParallelFor<Scratch<T>>(planes * g.Do, threads, [&](int64_t item,
                                                      Scratch<T>& s) {
    const int64_t p = item / g.Do, od = item % g.Do;
    const M* xp = x + p * DHW;
    M* dp = dx + p * DHW;
    const M* yp = y + p * ODHW + od * HoWo;
    const M* gp = go + p * ODHW + od * HoWo;
    int64_t own_lo, own_hi;
    OwnedRange(od, g.Do, g.sD, g.pD, g.D, &own_lo, &own_hi);
    if (!g.full_cover && own_hi > own_lo) {
      std::memset(dp + own_lo * HW, 0, sizeof(M) * (own_hi - own_lo) * HW);
    }
    s.found.resize(g.Wo);
    M* found = s.found.data();
    const int64_t d0 = od * g.sD - g.pD;
    int64_t td_lo, td_hi;
    TapRange(d0, g.kD, g.D, &td_lo, &td_hi);
    for (int64_t oh = 0; oh < g.Ho; ++oh) {
      const int64_t h0 = oh * g.sH - g.pH;
      int64_t th_lo, th_hi;
      TapRange(h0, g.kH, g.H, &th_lo, &th_hi);
      const M* yr = yp + oh * g.Wo;
      const M* gr = gp + oh * g.Wo;
      std::fill(found, found + g.Wo, M(0));
      for (int64_t td = td_lo; td < td_hi; ++td) {
        for (int64_t th = th_lo; th < th_hi; ++th) {
          const int64_t row = (d0 + td) * HW + (h0 + th) * g.W;
          const M* xr = xp + row;
          M* dr = dp + row;
          for (int64_t ow = 0; ow < ilo; ++ow)
            RowNoOverlapEdge<T>(xr, dr, yr, gr, found, ow, g);
          RowNoOverlap<T, KW>(xr, dr, yr, gr, found, ilo, ihi, g.kW, g.sW,
                              g.pW);
          for (int64_t ow = ihi; ow < g.Wo; ++ow)
            RowNoOverlapEdge<T>(xr, dr, yr, gr, found, ow, g);
        }
      }
    }
  });
}

// ---------------------------------------------------------------------------
// NCDHW input, NCDHW output, overlapping windows. One work item is one
// (b, c) plane, accumulated in f32 (in dx itself for f32).
//
// The first maximum in row-major (td, th, tw) order is separable: reduce each
// input row over tw (keeping the first of equal maxima), then those results
// over th, then over td, always replacing only on a strictly greater value.
// That costs kW + kH + kD vectorisable compare-selects per window instead of
// kD * kH * kW. Values are compared as int32 keys that order like the floats
// (+0 and -0 share a key, NaN sorts below every number, padding below NaN).
// The winner is then checked against `output` (the contract's rule): when its
// key equals Key(output) and output is not NaN, x[winner] == output, so it is
// the first tap equal to output; otherwise (NaN maxima, windows seeing only
// padding, or an `output` that is not the exact maximum) the window is
// rescanned directly, tap by tap.
//
// Per plane: for each padded depth slice, stage W (rows -> best over tw) and
// stage H (-> best over th) leave one Ho x Wo slice of (key, index); stage D
// then reduces kD such slices per output depth, all in long contiguous runs.
// ---------------------------------------------------------------------------

constexpr int32_t kPadKey = INT32_MIN;
constexpr int32_t kNanKey = INT32_MIN + 1;

template <class T>
inline int32_t Key(typename T::M a) {  // branch-free, vectorises
  constexpr int kBits = int(sizeof(typename T::M) * 8);
  const int32_t mag = int32_t(a & T::kAbs);
  const int32_t neg = -int32_t((a >> (kBits - 1)) & 1);  // 0 or -1
  const int32_t signed_mag = (mag ^ neg) - neg;
  const int32_t nan = -int32_t(mag > int32_t(T::kInf));
  return (kNanKey & nan) | (signed_mag & ~nan);
}

// The few hot loops below are also compiled for AVX2 (8 int32 lanes and real
// blends instead of SSE2's and/andnot/or); the loader picks the variant once
// through an ifunc. Elsewhere the portable build is used unchanged.
#if defined(__x86_64__) && defined(__ELF__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define POOL3D_HOT __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef POOL3D_HOT
#define POOL3D_HOT
#endif

// Where cand > cur: cur = cand, idx = cand_idx (all as masks, vectorises).
inline void TakeIfGreater(int32_t cand, int32_t cand_idx, int32_t& cur,
                          int32_t& idx) {
  const int32_t m = -int32_t(cand > cur);
  cur = (cand & m) | (cur & ~m);
  idx = (cand_idx & m) | (idx & ~m);
}

// One reduction step over n lanes: tap index `tap` for every lane.
POOL3D_HOT void MaxStepConst(const int32_t* __restrict cand, int32_t tap,
                             int32_t* __restrict key, int32_t* __restrict idx,
                             int64_t n) {
  for (int64_t i = 0; i < n; ++i) TakeIfGreater(cand[i], tap, key[i], idx[i]);
}

// The first two steps at once: taps 0 and 1 (saves a copy pass).
POOL3D_HOT void MaxFirstConst(const int32_t* __restrict cand0,
                              const int32_t* __restrict cand1,
                              int32_t* __restrict key,
                              int32_t* __restrict idx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const int32_t m = -int32_t(cand1[i] > cand0[i]);
    key[i] = (cand1[i] & m) | (cand0[i] & ~m);
    idx[i] = m & 1;
  }
}

// One reduction step over n lanes: the candidate's own index plus `offset`.
POOL3D_HOT void MaxStepIdx(const int32_t* __restrict cand,
                           const int32_t* __restrict cand_idx, int32_t offset,
                           int32_t* __restrict key, int32_t* __restrict idx,
                           int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    TakeIfGreater(cand[i], offset + cand_idx[i], key[i], idx[i]);
}

// The first two steps at once: candidates (k0, i0) and (k1, i1 + offset).
POOL3D_HOT void MaxFirstIdx(const int32_t* __restrict k0,
                            const int32_t* __restrict i0,
                            const int32_t* __restrict k1,
                            const int32_t* __restrict i1, int32_t offset,
                            int32_t* __restrict key, int32_t* __restrict idx,
                            int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const int32_t m = -int32_t(k1[i] > k0[i]);
    key[i] = (k1[i] & m) | (k0[i] & ~m);
    idx[i] = ((i1[i] + offset) & m) | (i0[i] & ~m);
  }
}

// The first three steps at once, taps 0, 1, 2 (k = 3 is the common window):
// the running maximum stays in registers instead of making three passes.
POOL3D_HOT void MaxFirst3Const(const int32_t* __restrict c0,
                               const int32_t* __restrict c1,
                               const int32_t* __restrict c2,
                               int32_t* __restrict key,
                               int32_t* __restrict idx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    int32_t k = c0[i], t = 0;
    TakeIfGreater(c1[i], 1, k, t);
    TakeIfGreater(c2[i], 2, k, t);
    key[i] = k;
    idx[i] = t;
  }
}

// The same for rows with indices: (k0, i0), (k1, i1 + step),
// (k2, i2 + 2 * step).
POOL3D_HOT void MaxFirst3Idx(const int32_t* __restrict k0,
                             const int32_t* __restrict i0,
                             const int32_t* __restrict k1,
                             const int32_t* __restrict i1,
                             const int32_t* __restrict k2,
                             const int32_t* __restrict i2, int32_t step,
                             int32_t* __restrict key, int32_t* __restrict idx,
                             int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    int32_t k = k0[i], t = i0[i];
    TakeIfGreater(k1[i], i1[i] + step, k, t);
    TakeIfGreater(k2[i], i2[i] + 2 * step, k, t);
    key[i] = k;
    idx[i] = t;
  }
}

// key/idx[i] = first maximum over rows t < k of candidate keys, where
// row(t) returns the pair (keys, indices) of row t and the indices of row t
// count t * step extra.
template <class Row>
void ReduceRowsBy(Row row, int64_t k, int32_t step, int32_t* key,
                  int32_t* idx, int64_t n) {
  if (k == 1) {
    std::copy(row(0).first, row(0).first + n, key);
    std::copy(row(0).second, row(0).second + n, idx);
    return;
  }
  int64_t t = 2;
  if (k == 2) {
    MaxFirstIdx(row(0).first, row(0).second, row(1).first, row(1).second,
                step, key, idx, n);
  } else {
    MaxFirst3Idx(row(0).first, row(0).second, row(1).first, row(1).second,
                 row(2).first, row(2).second, step, key, idx, n);
    t = 3;
  }
  for (; t < k; ++t) {
    MaxStepIdx(row(t).first, row(t).second, int32_t(t * step), key, idx, n);
  }
}

// ReduceRowsBy over rows `stride` apart: cand[t * stride + i] with indices
// cand_idx[t * stride + i] + t * step.
void ReduceRows(const int32_t* cand, const int32_t* cand_idx, int64_t stride,
                int64_t k, int32_t step, int32_t* key, int32_t* idx,
                int64_t n) {
  auto row = [&](int64_t t) {
    return std::make_pair(cand + t * stride, cand_idx + t * stride);
  };
  ReduceRowsBy(row, k, step, key, idx, n);
}

// key/idx[i] = first maximum over taps t < k of tap(t)[i], and its tap t.
template <class Tap>
void ReduceTaps(Tap tap, int64_t k, int32_t* key, int32_t* idx, int64_t n) {
  if (k == 1) {
    std::copy(tap(0), tap(0) + n, key);
    std::fill(idx, idx + n, 0);
    return;
  }
  int64_t t = 2;
  if (k == 2) {
    MaxFirstConst(tap(0), tap(1), key, idx, n);
  } else {
    MaxFirst3Const(tap(0), tap(1), tap(2), key, idx, n);
    t = 3;
  }
  for (; t < k; ++t) MaxStepConst(tap(t), int32_t(t), key, idx, n);
}

POOL3D_HOT void KeysF32(const uint32_t* __restrict x, int32_t* __restrict k,
                        int64_t n) {
  for (int64_t i = 0; i < n; ++i) k[i] = Key<F32T>(x[i]);
}

template <class T>
void Keys(const typename T::M* __restrict x, int32_t* __restrict k,
          int64_t n) {
  if constexpr (sizeof(typename T::M) == 4) {
    KeysF32(x, k, n);
  } else {
    for (int64_t i = 0; i < n; ++i) k[i] = Key<T>(x[i]);
  }
}

// Splits a key row into its two stride phases: p0[j] = kr[2j], p1[j] =
// kr[2j + 1] (sW == 2, the common strided case; one pass that vectorises,
// where the general per-phase copy below is a scalar strided loop).
POOL3D_HOT void SplitPhases2(const int32_t* __restrict kr,
                             int32_t* __restrict p0, int32_t* __restrict p1,
                             int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    p0[j] = kr[2 * j];
    p1[j] = kr[2 * j + 1];
  }
}

template <class T>
struct SepScratch {
  std::vector<float> acc;
  std::vector<int32_t> keyrow, phases, rk, ri, hk, hi, dk, di;
  std::vector<int32_t> pos;
};

// Stage W for one input row `xr` (W elements): rk/ri[ow] = first maximum of
// window ow over tw and its tap tw. For sW > 1 the padded key row is first
// split into sW phases so that every tap reads a contiguous run.
template <class T>
void StageW(const Geom& g, const typename T::M* xr, SepScratch<T>& s,
            int32_t* rk, int32_t* ri) {
  const int64_t Wo = g.Wo;
  int32_t* keyrow = s.keyrow.data();  // padding already holds kPadKey
  Keys<T>(xr, keyrow + g.pW, g.W);
  auto tap_row = [&](int64_t tw) -> const int32_t* {
    if (g.sW == 1) return keyrow + tw;
    const int64_t L = Wo + (g.kW - 1) / g.sW;
    return s.phases.data() + (tw % g.sW) * L + tw / g.sW;
  };
  if (g.sW == 2 && g.kW >= 2) {
    const int64_t L = Wo + (g.kW - 1) / 2;
    SplitPhases2(keyrow, s.phases.data(), s.phases.data() + L, L);
  } else if (g.sW > 1) {
    const int64_t L = Wo + (g.kW - 1) / g.sW;
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
// over (th, tw) and its offset th * W + tw.
template <class T>
void StageWH(const Geom& g, const typename T::M* xp, int64_t d,
             SepScratch<T>& s, int32_t* hk, int32_t* hi) {
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
      StageW<T>(g, xp + (rd * g.H + rh) * g.W, s, rk + h * Wo, ri + h * Wo);
    }
  }
  // With sH == 1 the rows of all oh are one contiguous run per th.
  const int64_t runs = g.sH == 1 ? 1 : g.Ho;
  const int64_t len = g.sH == 1 ? HoWo : Wo;
  for (int64_t r = 0; r < runs; ++r) {
    const int64_t src = r * g.sH * Wo, dst = r * Wo;
    ReduceRows(rk + src, ri + src, Wo, g.kH, int32_t(g.W), hk + dst,
               hi + dst, len);
  }
}

// Rare path: the first tap of window (d0, h0, w0) whose input equals y.
// Spatial position q lives at xp[q * step] and acc[(q - q0) * acc_step].
template <class T>
void ScanWindow(const Geom& g, const typename T::M* xp, float* acc,
                int64_t d0, int64_t h0, int64_t w0, typename T::M yv,
                float gv, int64_t step = 1, int64_t acc_step = 1,
                int64_t q0 = 0) {
  const int64_t HW = g.H * g.W;
  int64_t td_lo, td_hi, th_lo, th_hi, tw_lo, tw_hi;
  TapRange(d0, g.kD, g.D, &td_lo, &td_hi);
  TapRange(h0, g.kH, g.H, &th_lo, &th_hi);
  TapRange(w0, g.kW, g.W, &tw_lo, &tw_hi);
  for (int64_t td = td_lo; td < td_hi; ++td)
    for (int64_t th = th_lo; th < th_hi; ++th)
      for (int64_t tw = tw_lo; tw < tw_hi; ++tw) {
        const int64_t q = (d0 + td) * HW + (h0 + th) * g.W + w0 + tw;
        if (EqMask<T>(xp[q * step], yv)) {
          acc[(q - q0) * acc_step] += gv;
          return;
        }
      }
}

// pos[i] = where window i (of one output row) sends its gradient: `row` +
// i * sW + idx[i], or -1 when the separable winner is not provably the
// contract's tap (its key differs from Key(y), or y is NaN).
template <class T>
POOL3D_HOT void WinnerPositions(const typename T::M* __restrict yr,
                                const int32_t* __restrict key,
                                const int32_t* __restrict idx, int32_t row,
                                int32_t sW, int64_t n,
                                int32_t* __restrict pos) {
  for (int32_t i = 0; i < int32_t(n); ++i) {
    const int32_t ky = Key<T>(yr[i]);
    const int32_t ok = -int32_t(key[i] == ky) & -int32_t(ky != kNanKey);
    pos[i] = ((row + i * sW + idx[i]) & ok) | ~ok;
  }
}

// Adds grad_output of the Ho x Wo windows at output depth od to their
// winners (dk/di from stage D), in (oh, ow) order.
template <class T>
void ScatterSlice(const Geom& g, const typename T::M* xp,
                  const typename T::M* yr, const typename T::M* gr,
                  const int32_t* dk, const int32_t* di, int64_t od,
                  int32_t* pos, float* acc) {
  const int64_t HW = g.H * g.W;
  const int64_t d0 = od * g.sD - g.pD;
  for (int64_t oh = 0; oh < g.Ho; ++oh) {
    const int64_t h0 = oh * g.sH - g.pH;
    const int64_t o = oh * g.Wo;
    WinnerPositions<T>(yr + o, dk + o, di + o,
                       int32_t(d0 * HW + h0 * g.W - g.pW), int32_t(g.sW), g.Wo,
                       pos);
    for (int64_t ow = 0; ow < g.Wo; ++ow) {
      if (pos[ow] >= 0) {
        acc[pos[ow]] += T::ToF32(gr[o + ow]);
      } else {
        ScanWindow<T>(g, xp, acc, d0, h0, ow * g.sW - g.pW, yr[o + ow],
                      T::ToF32(gr[o + ow]));
      }
    }
  }
}

template <class T>
void NcdhwOverlap(const Geom& g, const typename T::M* x,
                  const typename T::M* y, const typename T::M* go,
                  typename T::M* dx) {
  using M = typename T::M;
  constexpr bool kF32 = sizeof(M) == 4;
  const int64_t planes = g.B * g.C;
  const int64_t HW = g.H * g.W, DHW = g.D * HW, HoWo = g.Ho * g.Wo,
                ODHW = g.Do * HoWo;
  const int64_t Dp = g.D + 2 * g.pD, Hp = g.H + 2 * g.pH;
  const int64_t Wp = g.W + 2 * g.pW;
  const int64_t L = g.Wo + (g.kW - 1) / g.sW;  // length of one phase
  const int threads = ThreadCount(planes, planes * DHW);
  ParallelFor<SepScratch<T>>(planes, threads, [&](int64_t p,
                                                  SepScratch<T>& s) {
    const M* xp = x + p * DHW;
    M* dp = dx + p * DHW;
    float* acc;
    if constexpr (kF32) {
      acc = reinterpret_cast<float*>(dp);
    } else {
      s.acc.resize(DHW);
      acc = s.acc.data();
    }
    std::fill(acc, acc + DHW, 0.0f);
    s.keyrow.assign(std::max(Wp, L * g.sW + g.sW), kPadKey);
    s.phases.resize(std::min(g.sW, g.kW) * L);
    s.rk.resize(Hp * g.Wo);
    s.ri.resize(Hp * g.Wo);
    s.hk.resize(Dp * HoWo);
    s.hi.resize(Dp * HoWo);
    s.dk.resize(HoWo);
    s.di.resize(HoWo);
    s.pos.resize(g.Wo);
    for (int64_t d = 0; d < Dp; ++d)
      StageWH<T>(g, xp, d, s, s.hk.data() + d * HoWo, s.hi.data() + d * HoWo);
    // Stage D (index += td * H * W) and the scatter, one output depth at a time.
    int32_t* dk = s.dk.data();
    int32_t* di = s.di.data();
    for (int64_t od = 0; od < g.Do; ++od) {
      const int32_t* hk0 = s.hk.data() + od * g.sD * HoWo;
      const int32_t* hi0 = s.hi.data() + od * g.sD * HoWo;
      ReduceRows(hk0, hi0, HoWo, g.kD, int32_t(HW), dk, di, HoWo);
      ScatterSlice<T>(g, xp, y + p * ODHW + od * HoWo,
                      go + p * ODHW + od * HoWo, dk, di, od, s.pos.data(),
                      acc);
    }
    if constexpr (!kF32) {
      for (int64_t i = 0; i < DHW; ++i) dp[i] = T::FromF32(acc[i]);
    }
  });
}

// ---------------------------------------------------------------------------
// NDHWC input, NDHWC output: vectorised across channels.
// ---------------------------------------------------------------------------

// Channel block size: enough blocks to feed the threads, each a multiple of 8
// where possible.
int64_t ChannelBlock(int64_t C, int64_t other_items, int threads_hint) {
  int64_t nc = std::max<int64_t>(C, 1);
  while (other_items * ((C + nc - 1) / nc) < threads_hint && nc > 16) {
    nc = (nc / 2 + 7) / 8 * 8;
  }
  return nc;
}

template <class T>
void NdhwcNoOverlap(const Geom& g, const typename T::M* x,
                    const typename T::M* y, const typename T::M* go,
                    typename T::M* dx) {
  using M = typename T::M;
  const int64_t C = g.C;
  const int64_t total = g.B * g.D * g.H * g.W * C;
  const int hint = ThreadCount(int64_t{1} << 20, total);
  const int64_t nc_blk = std::min<int64_t>(ChannelBlock(C, g.B * g.Do, hint),
                                           1024);
  const int64_t ncb = (C + nc_blk - 1) / nc_blk;
  const int64_t items = g.B * g.Do * ncb;
  ParallelFor<Scratch<T>>(items, ThreadCount(items, total), [&](int64_t item,
                                                               Scratch<T>& s) {
    const int64_t cb = item % ncb, od = (item / ncb) % g.Do,
                  b = item / (ncb * g.Do);
    const int64_t c0 = cb * nc_blk, nc = std::min(nc_blk, C - c0);
    const M* xb = x + b * g.D * g.H * g.W * C + c0;
    M* db = dx + b * g.D * g.H * g.W * C + c0;
    if (!g.full_cover) {
      int64_t lo, hi;
      OwnedRange(od, g.Do, g.sD, g.pD, g.D, &lo, &hi);
      if (nc == C) {
        std::memset(db + lo * g.H * g.W * C, 0,
                    sizeof(M) * (hi - lo) * g.H * g.W * C);
      } else {
        for (int64_t i = lo * g.H * g.W; i < hi * g.H * g.W; ++i)
          std::memset(db + i * C, 0, sizeof(M) * nc);
      }
    }
    s.found.resize(nc);
    s.gnorm.resize(nc);
    M* __restrict found = s.found.data();
    M* __restrict gn = s.gnorm.data();
    const int64_t d0 = od * g.sD - g.pD;
    int64_t td_lo, td_hi;
    TapRange(d0, g.kD, g.D, &td_lo, &td_hi);
    for (int64_t oh = 0; oh < g.Ho; ++oh) {
      const int64_t h0 = oh * g.sH - g.pH;
      int64_t th_lo, th_hi;
      TapRange(h0, g.kH, g.H, &th_lo, &th_hi);
      for (int64_t ow = 0; ow < g.Wo; ++ow) {
        const int64_t w0 = ow * g.sW - g.pW;
        int64_t tw_lo, tw_hi;
        TapRange(w0, g.kW, g.W, &tw_lo, &tw_hi);
        const int64_t opos = ((b * g.Do + od) * g.Ho + oh) * g.Wo + ow;
        const M* __restrict yv = y + opos * C + c0;
        const M* __restrict gv = go + opos * C + c0;
        for (int64_t c = 0; c < nc; ++c) {
          gn[c] = Normalise<T>(gv[c]);
          found[c] = 0;
        }
        for (int64_t td = td_lo; td < td_hi; ++td) {
          for (int64_t th = th_lo; th < th_hi; ++th) {
            for (int64_t tw = tw_lo; tw < tw_hi; ++tw) {
              const int64_t ipos =
                  ((d0 + td) * g.H + (h0 + th)) * g.W + (w0 + tw);
              const M* __restrict xv = xb + ipos * C;
              M* __restrict dv = db + ipos * C;
              for (int64_t c = 0; c < nc; ++c) {
                M e = EqMask<T>(xv[c], yv[c]) & M(~found[c]);
                dv[c] = M(e & gn[c]);
                found[c] = M(found[c] | e);
              }
            }
          }
        }
      }
    }
  });
}

// ---------------------------------------------------------------------------
// NDHWC input, NDHWC output, overlapping windows: a separable first-max
// search like the NCDHW path's (same int32 keys, same check against
// `output`, same tap-by-tap fallback), with a block of nc channels as the
// vector dimension: every array below holds nc lanes per spatial position.
// One work item is one (b, channel block); output depths are visited in
// order, so every input element receives its contributions in the same
// (od, oh, ow) order as a direct scan.
//
// The reduction runs D first, straight from the input: per output depth and
// input row, the first maximum over td of each position, written into stride
// phases (phase r holds padded positions r, r + sW, ...) so that tap tw of
// all windows of a row is one contiguous run; then over tw, giving one
// Wo x nc row per input row, kept in a ring of kH rows; then over th for each
// output row. Only those few rows are live, so they stay in cache (the
// slices of an H-first search do not, with C lanes per position). Because D
// comes first, a tie is broken explicitly: each lane carries its winner's
// tap code t = (td * Hr + th) * Wr + tw, with radices Hr = max(H, kH) and
// Wr = max(W, kW) so that t grows in row-major tap order, and among equal
// keys the smaller t wins: the first in row-major order. Usually Hr = H and
// Wr = W, and t is then also the tap's offset from its window's origin.
// ---------------------------------------------------------------------------

struct ClScratch {
  std::vector<float> acc;  // bf16/f16: the f32 accumulator (f32: dx itself)
  std::vector<int32_t> pk, pt;  // one row's D maxima, in stride phases
  std::vector<int32_t> rk, rt;  // ring of kH rows reduced over (td, tw)
  std::vector<int32_t> wk, wt;  // one output row reduced over everything
  std::vector<int32_t> off;     // where each lane of that row scatters
};

// Where (ck, ct) beats (k, t): a greater key, or an equal key at an earlier
// tap. All as masks, so that the loops vectorise.
inline void TakeIfFirst(int32_t ck, int32_t ct, int32_t& k, int32_t& t) {
  const int32_t m = -int32_t(ck > k) | (-int32_t(ck == k) & -int32_t(ct < t));
  k = (ck & m) | (k & ~m);
  t = (ct & m) | (t & ~m);
}

// The first two steps at once: candidates (k0, t0) and (k1, t1 + add).
POOL3D_HOT void MaxFirstTie(const int32_t* __restrict k0,
                            const int32_t* __restrict t0,
                            const int32_t* __restrict k1,
                            const int32_t* __restrict t1, int32_t add,
                            int32_t* __restrict k, int32_t* __restrict t,
                            int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    int32_t kk = k0[i], tt = t0[i];
    TakeIfFirst(k1[i], t1[i] + add, kk, tt);
    k[i] = kk;
    t[i] = tt;
  }
}

// The first three steps at once: (k0, t0), (k1, t1 + add), (k2, t2 + 2 * add).
POOL3D_HOT void MaxFirst3Tie(const int32_t* __restrict k0,
                             const int32_t* __restrict t0,
                             const int32_t* __restrict k1,
                             const int32_t* __restrict t1,
                             const int32_t* __restrict k2,
                             const int32_t* __restrict t2, int32_t add,
                             int32_t* __restrict k, int32_t* __restrict t,
                             int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    int32_t kk = k0[i], tt = t0[i];
    TakeIfFirst(k1[i], t1[i] + add, kk, tt);
    TakeIfFirst(k2[i], t2[i] + 2 * add, kk, tt);
    k[i] = kk;
    t[i] = tt;
  }
}

// One step over n lanes: candidates (ck, ct + add).
POOL3D_HOT void MaxStepTie(const int32_t* __restrict ck,
                           const int32_t* __restrict ct, int32_t add,
                           int32_t* __restrict k, int32_t* __restrict t,
                           int64_t n) {
  for (int64_t i = 0; i < n; ++i) TakeIfFirst(ck[i], ct[i] + add, k[i], t[i]);
}

// key/tap[i] = first maximum over rows r < n_rows of row(r) = (keys, taps),
// whose taps count r * step extra.
template <class Row>
void ReduceRowsTie(Row row, int64_t n_rows, int32_t step, int32_t* key,
                   int32_t* tap, int64_t n) {
  if (n_rows == 1) {
    std::copy(row(0).first, row(0).first + n, key);
    std::copy(row(0).second, row(0).second + n, tap);
    return;
  }
  int64_t r = 2;
  if (n_rows == 2) {
    MaxFirstTie(row(0).first, row(0).second, row(1).first, row(1).second,
                step, key, tap, n);
  } else {
    MaxFirst3Tie(row(0).first, row(0).second, row(1).first, row(1).second,
                 row(2).first, row(2).second, step, key, tap, n);
    r = 3;
  }
  for (; r < n_rows; ++r)
    MaxStepTie(row(r).first, row(r).second, int32_t(r * step), key, tap, n);
}

// Stage D for npos positions of one input row: k/t[p * nc + c] = first
// maximum over the nd real depth taps of Key(x[j * slice + p * x_step + c])
// and its tap code t0 + j * t_step. Ascending j keeps the first of ties.
// ND > 0 fixes nd == ND at compile time (the running maximum then stays in
// registers); ND == 0 takes any nd.
template <class T, int ND>
POOL3D_HOT void DepthMax(const typename T::M* __restrict x, int64_t x_step,
                         int64_t slice, int64_t nd, int32_t t0,
                         int32_t t_step, int32_t* __restrict k,
                         int32_t* __restrict t, int64_t npos, int64_t nc) {
  for (int64_t p = 0; p < npos; ++p) {
    const typename T::M* xp = x + p * x_step;
    int32_t* kp = k + p * nc;
    int32_t* tp = t + p * nc;
    if constexpr (ND > 0) {
      for (int64_t c = 0; c < nc; ++c) {
        int32_t kk = Key<T>(xp[c]), tt = t0;
        for (int j = 1; j < ND; ++j)
          TakeIfGreater(Key<T>(xp[j * slice + c]), t0 + j * t_step, kk, tt);
        kp[c] = kk;
        tp[c] = tt;
      }
    } else {
      for (int64_t c = 0; c < nc; ++c) {
        kp[c] = Key<T>(xp[c]);
        tp[c] = t0;
      }
      for (int64_t j = 1; j < nd; ++j) {
        const typename T::M* xj = xp + j * slice;
        const int32_t tj = t0 + int32_t(j) * t_step;
        for (int64_t c = 0; c < nc; ++c)
          TakeIfGreater(Key<T>(xj[c]), tj, kp[c], tp[c]);
      }
    }
  }
}

// Stages D and W for input row rh, for windows starting at depth d0 whose
// real depth taps are [td_lo, td_hi): rk/rt (Wo x nc) = first maximum over
// (td, tw) and its tap number. xb: batch b at the block's channel c0.
template <class T>
void StageDWCl(const Geom& g, const typename T::M* xb, int64_t nc,
               int64_t d0, int64_t td_lo, int64_t td_hi, int64_t rh,
               ClScratch& s, int32_t* rk, int32_t* rt) {
  const int64_t Hr = std::max(g.H, g.kH), Wr = std::max(g.W, g.kW);
  const int64_t L = g.Wo + (g.kW - 1) / g.sW;  // positions per phase
  const int64_t used = std::min(g.sW, g.kW);    // taps never reach the rest
  const int64_t HWC = g.H * g.W * g.C;
  const typename T::M* xr = xb + ((d0 + td_lo) * g.H + rh) * g.W * g.C;
  for (int64_t r = 0; r < used; ++r) {  // padding lanes already hold kPadKey
    // Phase r holds padded positions r + j * sW, j < L: input w = that - pW.
    const int64_t j0 = std::max<int64_t>(0, (g.pW - r + g.sW - 1) / g.sW);
    const int64_t j1 = std::min(L, (g.W + g.pW - r + g.sW - 1) / g.sW);
    if (j1 > j0) {
      const int64_t nd = td_hi - td_lo;
      auto depth_max = nd == 1   ? DepthMax<T, 1>
                       : nd == 2 ? DepthMax<T, 2>
                       : nd == 3 ? DepthMax<T, 3>
                                 : DepthMax<T, 0>;
      depth_max(xr + (r + j0 * g.sW - g.pW) * g.C, g.sW * g.C, HWC, nd,
                int32_t(td_lo * Hr * Wr), int32_t(Hr * Wr),
                s.pk.data() + (r * L + j0) * nc,
                s.pt.data() + (r * L + j0) * nc, j1 - j0, nc);
    }
  }
  auto tap = [&](int64_t tw) {
    const int64_t o = ((tw % g.sW) * L + tw / g.sW) * nc;
    return std::make_pair(s.pk.data() + o, s.pt.data() + o);
  };
  ReduceRowsTie(tap, g.kW, 1, rk, rt, g.Wo * nc);
}

// For the Wo windows of one output row (lane i = ow * nc + c): off[i] = where
// lane i sends its gradient, (ow * sW + offset of tap t[i]) * astride + c
// relative to the row's origin in acc, or -1 when the separable winner is not
// provably the contract's tap (its key differs from Key(y), or y is NaN).
// y: the output row at channel c0 (positions C apart). Returns whether no
// lane is -1.
template <class T>
POOL3D_HOT bool WinnerOffsetsCl(const Geom& g,
                                const typename T::M* __restrict y,
                                const int32_t* __restrict k,
                                const int32_t* __restrict t, int64_t nc,
                                int32_t astride, int32_t* __restrict off) {
  const int64_t Hr = std::max(g.H, g.kH), Wr = std::max(g.W, g.kW);
  const int32_t sW = int32_t(g.sW);
  int32_t all_ok = -1;
  for (int64_t ow = 0; ow < g.Wo; ++ow) {
    for (int64_t c = 0; c < nc; ++c) {
      const int64_t i = ow * nc + c;
      const int32_t ky = Key<T>(y[ow * g.C + c]);
      const int32_t ok = -int32_t(k[i] == ky) & -int32_t(ky != kNanKey);
      const int32_t pos = int32_t(ow) * sW + t[i];
      off[i] = ((pos * astride + int32_t(c)) & ok) | ~ok;
      all_ok &= ok;
    }
  }
  if (Hr == g.H && Wr == g.W) return all_ok != 0;
  // A window larger than the input: the tap code is not the offset.
  for (int64_t i = 0; i < g.Wo * nc; ++i) {
    if (off[i] < 0) continue;
    const int64_t td = t[i] / (Hr * Wr), th = t[i] / Wr % Hr, tw = t[i] % Wr;
    const int64_t pos = i / nc * g.sW + (td * g.H + th) * g.W + tw;
    off[i] = int32_t(pos * astride + i % nc);
  }
  return all_ok != 0;
}

// Adds grad_output of the Wo windows of output row (od, oh) to their winners
// (off from WinnerOffsetsCl; all_ok: no lane is -1). acc holds spatial
// position q of lane c, from depth acc_d on, at acc[(q - acc_d * H * W) *
// astride + c]; xb, yr and gr point at channel c0. Windows are handled in
// order, lanes being independent.
template <class T>
void ScatterRowCl(const Geom& g, const typename T::M* xb,
                  const typename T::M* yr, const typename T::M* gr,
                  const int32_t* off, bool all_ok, int64_t nc, int64_t od,
                  int64_t oh, float* acc, int64_t acc_d, int64_t astride) {
  const int64_t d0 = od * g.sD - g.pD, h0 = oh * g.sH - g.pH;
  const int64_t origin = (((d0 - acc_d) * g.H + h0) * g.W - g.pW) * astride;
  if (all_ok) {  // the common case, without the fallback in the loop
    for (int64_t ow = 0; ow < g.Wo; ++ow) {
      const typename T::M* gv = gr + ow * g.C;
      const int32_t* o = off + ow * nc;
      for (int64_t c = 0; c < nc; ++c) acc[origin + o[c]] += T::ToF32(gv[c]);
    }
    return;
  }
  for (int64_t ow = 0; ow < g.Wo; ++ow) {
    const typename T::M* gv = gr + ow * g.C;
    const int32_t* o = off + ow * nc;
    for (int64_t c = 0; c < nc; ++c) {
      if (o[c] >= 0) {
        acc[origin + o[c]] += T::ToF32(gv[c]);
      } else {
        ScanWindow<T>(g, xb + c, acc + c, d0, h0, ow * g.sW - g.pW,
                      yr[ow * g.C + c], T::ToF32(gv[c]), g.C, astride,
                      acc_d * g.H * g.W);
      }
    }
  }
}

// d[p * d_step + c] = a[p * nc + c] rounded to the element type, for npos
// positions of nc lanes.
template <class T>
POOL3D_HOT void StoreRounded(const float* __restrict a, int64_t npos,
                             int64_t nc, typename T::M* __restrict d,
                             int64_t d_step) {
  if (d_step == nc) {  // one contiguous run
    for (int64_t i = 0; i < npos * nc; ++i) d[i] = T::FromF32(a[i]);
    return;
  }
  for (int64_t p = 0; p < npos; ++p)
    for (int64_t c = 0; c < nc; ++c)
      d[p * d_step + c] = T::FromF32(a[p * nc + c]);
}

// Sets npos positions of nc lanes, `step` elements apart, to +0.
template <class E>
void ZeroLanes(E* p, int64_t npos, int64_t nc, int64_t step) {
  if (step == nc) {
    std::memset(p, 0, sizeof(E) * npos * nc);
    return;
  }
  for (int64_t i = 0; i < npos; ++i)
    std::memset(p + i * step, 0, sizeof(E) * nc);
}

template <class T>
void NdhwcOverlap(const Geom& g, const typename T::M* x,
                  const typename T::M* y, const typename T::M* go,
                  typename T::M* dx) {
  using M = typename T::M;
  constexpr bool kF32 = sizeof(M) == 4;
  const int64_t C = g.C, DHW = g.D * g.H * g.W;
  const int64_t total = g.B * DHW * C;
  const int hint = ThreadCount(int64_t{1} << 20, total);
  int64_t nc_blk = ChannelBlock(C, g.B, hint);
  // Half types accumulate in f32 depth slices [acc_d, acc_d + R) (acc_d
  // slides forward); f32 accumulates in dx itself.
  const int64_t HW = g.H * g.W;
  const int64_t R = kF32 ? g.D : std::min(g.D, 2 * g.kD + g.sD);
  if (!kF32) {  // keep the per-thread f32 accumulator below ~64 MiB
    while (nc_blk > 1 && R * HW * nc_blk > (int64_t{1} << 24)) {
      nc_blk = (nc_blk + 1) / 2;
    }
  }
  const int64_t ncb = (C + nc_blk - 1) / nc_blk;
  const int64_t items = g.B * ncb;
  ParallelFor<ClScratch>(items, ThreadCount(items, total), [&](int64_t item,
                                                              ClScratch& s) {
    const int64_t cb = item % ncb, b = item / ncb;
    const int64_t c0 = cb * nc_blk, nc = std::min(nc_blk, C - c0);
    const M* xb = x + b * DHW * C + c0;
    M* db = dx + b * DHW * C + c0;
    float* acc;
    int64_t astride;  // elements between two positions in acc
    if constexpr (kF32) {
      acc = reinterpret_cast<float*>(db);
      astride = C;
    } else {
      s.acc.resize(R * HW * nc);
      acc = s.acc.data();
      astride = nc;
    }
    // A depth slice of acc is zeroed just before the first window that
    // reaches it and rounded into dx (half types) as soon as no later window
    // can, so that it is still in cache at both ends. Depths [0, done) are
    // final in dx, [done, zeroed) are live in acc; acc starts at depth acc_d.
    int64_t zeroed = 0, done = 0, acc_d = 0;
    auto slice = [&](int64_t d) { return acc + (d - acc_d) * HW * astride; };
    auto start_to = [&](int64_t d) {  // depths [zeroed, d) become live
      d = std::min(d, g.D);
      if constexpr (!kF32) {
        if (d > acc_d + R) {  // slide: move the live slices to the front
          std::memmove(acc, slice(done),
                       sizeof(float) * (zeroed - done) * HW * nc);
          acc_d = done;
        }
      }
      if (d > zeroed) ZeroLanes(slice(zeroed), (d - zeroed) * HW, nc, astride);
      zeroed = std::max(zeroed, d);
    };
    auto finish_to = [&](int64_t d) {  // depths [done, d) become final
      d = std::min(d, g.D);
      if constexpr (!kF32) {
        const int64_t live = std::min(d, zeroed);
        if (live > done) StoreRounded<T>(slice(done), (live - done) * HW, nc,
                                         db + done * HW * C, C);
      }
      if (d > zeroed) {  // depths no window reaches: +0
        ZeroLanes(db + zeroed * HW * C, (d - zeroed) * HW, nc, C);
        zeroed = d;
      }
      done = std::max(done, d);
    };
    const int64_t row = g.Wo * nc;
    const int64_t L = g.Wo + (g.kW - 1) / g.sW;
    s.pk.assign(std::min(g.sW, g.kW) * L * nc, kPadKey);
    s.pt.assign(s.pk.size(), 0);
    s.rk.resize(g.kH * row);
    s.rt.resize(g.kH * row);
    s.wk.resize(row);
    s.wt.resize(row);
    s.off.resize(row);
    for (int64_t od = 0; od < g.Do; ++od) {
      const int64_t d0 = od * g.sD - g.pD;
      int64_t td_lo, td_hi;
      TapRange(d0, g.kD, g.D, &td_lo, &td_hi);
      start_to(d0 + g.kD);
      int64_t next = 0;  // the first padded row not yet in the ring
      for (int64_t oh = 0; oh < g.Ho; ++oh) {
        // Stages D and W for the rows of this output row not yet in the ring
        // (row h in slot h % kH).
        const int64_t h_lo = oh * g.sH, h_hi = h_lo + g.kH;
        for (int64_t h = std::max(next, h_lo); h < h_hi; ++h) {
          int32_t* rk = s.rk.data() + (h % g.kH) * row;
          int32_t* rt = s.rt.data() + (h % g.kH) * row;
          const int64_t rh = h - g.pH;
          if (rh < 0 || rh >= g.H || td_lo == td_hi) {  // only padding
            std::fill(rk, rk + row, kPadKey);
            std::fill(rt, rt + row, 0);
          } else {
            StageDWCl<T>(g, xb, nc, d0, td_lo, td_hi, rh, s, rk, rt);
          }
        }
        next = h_hi;
        // Stage H (tap code += th * Wr).
        auto rows = [&](int64_t th) {
          const int64_t o = ((h_lo + th) % g.kH) * row;
          return std::make_pair(s.rk.data() + o, s.rt.data() + o);
        };
        ReduceRowsTie(rows, g.kH, int32_t(std::max(g.W, g.kW)), s.wk.data(),
                      s.wt.data(), row);
        const int64_t o = ((b * g.Do + od) * g.Ho + oh) * g.Wo * C + c0;
        const bool all_ok = WinnerOffsetsCl<T>(
            g, y + o, s.wk.data(), s.wt.data(), nc, int32_t(astride),
            s.off.data());
        ScatterRowCl<T>(g, xb, y + o, go + o, s.off.data(), all_ok, nc, od, oh,
                        acc, acc_d, astride);
      }
      finish_to(od + 1 < g.Do ? d0 + g.sD : g.D);  // below the next window
    }
  });
}

// ---------------------------------------------------------------------------
// Any layout pair (used when output_format != data_format): one (b, c) plane
// per work item, direct first-match scan per window, f32 accumulator.
// Correct rather than fast; the pass never emits this case.
// ---------------------------------------------------------------------------

template <class T>
void GenericStrided(const Geom& g, const typename T::M* x,
                    const typename T::M* y, const typename T::M* go,
                    typename T::M* dx) {
  using M = typename T::M;
  const int64_t DHW = g.D * g.H * g.W;
  // strides (b, c, d, h, w) for the input/result and the output layouts
  auto strides = [&](bool cl, int64_t d, int64_t h, int64_t w, int64_t* st) {
    if (cl) {
      st[0] = d * h * w * g.C; st[1] = 1; st[2] = h * w * g.C;
      st[3] = w * g.C; st[4] = g.C;
    } else {
      st[0] = g.C * d * h * w; st[1] = d * h * w; st[2] = h * w;
      st[3] = w; st[4] = 1;
    }
  };
  int64_t xs[5], ys[5];
  strides(g.in_cl, g.D, g.H, g.W, xs);
  strides(g.out_cl, g.Do, g.Ho, g.Wo, ys);
  const int64_t planes = g.B * g.C;
  ParallelFor<Scratch<T>>(planes, ThreadCount(planes, planes * DHW),
                          [&](int64_t p, Scratch<T>& s) {
    const int64_t b = p / g.C, c = p % g.C;
    const M* xp = x + b * xs[0] + c * xs[1];
    M* dp = dx + b * xs[0] + c * xs[1];
    const M* yp = y + b * ys[0] + c * ys[1];
    const M* gp = go + b * ys[0] + c * ys[1];
    s.acc.assign(DHW, 0.0f);
    float* acc = s.acc.data();
    for (int64_t od = 0; od < g.Do; ++od) {
      const int64_t d0 = od * g.sD - g.pD;
      int64_t td_lo, td_hi;
      TapRange(d0, g.kD, g.D, &td_lo, &td_hi);
      for (int64_t oh = 0; oh < g.Ho; ++oh) {
        const int64_t h0 = oh * g.sH - g.pH;
        int64_t th_lo, th_hi;
        TapRange(h0, g.kH, g.H, &th_lo, &th_hi);
        for (int64_t ow = 0; ow < g.Wo; ++ow) {
          const int64_t w0 = ow * g.sW - g.pW;
          int64_t tw_lo, tw_hi;
          TapRange(w0, g.kW, g.W, &tw_lo, &tw_hi);
          const int64_t oo = od * ys[2] + oh * ys[3] + ow * ys[4];
          const M yv = yp[oo];
          for (int64_t td = td_lo; td < td_hi; ++td)
            for (int64_t th = th_lo; th < th_hi; ++th)
              for (int64_t tw = tw_lo; tw < tw_hi; ++tw) {
                const int64_t d = d0 + td, h = h0 + th, w = w0 + tw;
                if (EqMask<T>(xp[d * xs[2] + h * xs[3] + w * xs[4]], yv)) {
                  acc[(d * g.H + h) * g.W + w] += T::ToF32(gp[oo]);
                  goto next_window;
                }
              }
        next_window:;
        }
      }
    }
    for (int64_t d = 0; d < g.D; ++d)
      for (int64_t h = 0; h < g.H; ++h)
        for (int64_t w = 0; w < g.W; ++w)
          dp[d * xs[2] + h * xs[3] + w * xs[4]] =
              T::FromF32(acc[(d * g.H + h) * g.W + w]);
  });
}

// Asks Linux to back the result with 2 MiB pages. A large result is usually
// a fresh mmap that XLA never touched: faulting it in 4 KiB at a time costs
// about as much as the kernel itself. Advice only: contents are unchanged.
// Only from 32 MiB, glibc's largest mmap threshold: a buffer that size is its
// own mapping, never a piece of a heap arena whose mappings advice would split.
void AdviseHugePages(void* p, size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  if (bytes < 16 * kHuge) return;
  uintptr_t lo = (reinterpret_cast<uintptr_t>(p) + kHuge - 1) & ~(kHuge - 1);
  uintptr_t hi = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(kHuge - 1);
  if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
#else
  (void)p; (void)bytes;
#endif
}

template <class T>
void Dispatch(const Geom& g, const void* x, const void* y, const void* go,
              void* dx) {
  using M = typename T::M;
  auto* xm = static_cast<const M*>(x);
  auto* ym = static_cast<const M*>(y);
  auto* gm = static_cast<const M*>(go);
  auto* dm = static_cast<M*>(dx);
  if (g.in_cl != g.out_cl) return GenericStrided<T>(g, xm, ym, gm, dm);
  if (g.in_cl) {
    // The separable search keeps tap codes and offsets within an output row
    // as int32.
    const int64_t Hr = std::max(g.H, g.kH), Wr = std::max(g.W, g.kW);
    const int64_t row_span = (g.kD * Hr + g.kH) * Wr + g.Wo * g.sW + g.kW;
    if (g.overlap && row_span * g.C < (int64_t{1} << 31))
      return NdhwcOverlap<T>(g, xm, ym, gm, dm);
    if (g.overlap) return GenericStrided<T>(g, xm, ym, gm, dm);
    return NdhwcNoOverlap<T>(g, xm, ym, gm, dm);
  }
  if (g.overlap) {
    // The separable search keeps positions in a plane as int32.
    if (g.D * g.H * g.W < (int64_t{1} << 31) - (g.H + 1) * g.W)
      return NcdhwOverlap<T>(g, xm, ym, gm, dm);
    return GenericStrided<T>(g, xm, ym, gm, dm);
  }
  if (g.sW == g.kW) {
    if (g.kW == 1) return NcdhwNoOverlap<T, 1>(g, xm, ym, gm, dm);
    if (g.kW == 2) return NcdhwNoOverlap<T, 2>(g, xm, ym, gm, dm);
    if (g.kW == 3) return NcdhwNoOverlap<T, 3>(g, xm, ym, gm, dm);
    if (g.kW == 4) return NcdhwNoOverlap<T, 4>(g, xm, ym, gm, dm);
  }
  return NcdhwNoOverlap<T, 0>(g, xm, ym, gm, dm);
}

// ---------------------------------------------------------------------------
// Validation and the FFI handler.
// ---------------------------------------------------------------------------

std::string Prefix() { return std::string(kTarget) + ": "; }

std::string DimsStr(ffi::Span<const int64_t> d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(d[i]);
  }
  return s + "]";
}

const char* TypeName(ffi::DataType t) {
  switch (t) {
    case ffi::DataType::F32: return "f32";
    case ffi::DataType::BF16: return "bf16";
    case ffi::DataType::F16: return "f16";
    case ffi::DataType::F64: return "f64";
    case ffi::DataType::S32: return "s32";
    case ffi::DataType::S64: return "s64";
    default: return "an unsupported type";
  }
}

ffi::Error CheckTriple(const char* name, ffi::Span<const int64_t> v,
                       int64_t min_value) {
  if (v.size() != 3) {
    return ffi::Error::InvalidArgument(
        Prefix() + name + " must have 3 elements (D, H, W), got " +
        std::to_string(v.size()) + ": " + DimsStr(v));
  }
  for (int64_t e : v) {
    if (e < min_value || e > kMaxAttrValue) {
      return ffi::Error::InvalidArgument(
          Prefix() + name + " elements must be in [" +
          std::to_string(min_value) + ", 2^30], got " + DimsStr(v));
    }
  }
  return ffi::Error::Success();
}

ffi::Error ParseLayout(const char* name, std::string_view s, bool* cl) {
  if (s == "NCDHW") {
    *cl = false;
  } else if (s == "NDHWC") {
    *cl = true;
  } else {
    return ffi::Error::InvalidArgument(
        Prefix() + name + " must be \"NCDHW\" or \"NDHWC\", got \"" +
        std::string(s) + "\"");
  }
  return ffi::Error::Success();
}

ffi::Error Impl(ffi::AnyBuffer grad_output, ffi::AnyBuffer input,
                ffi::AnyBuffer output, ffi::Result<ffi::AnyBuffer> grad_input,
                ffi::Span<const int64_t> kernel_size,
                ffi::Span<const int64_t> stride,
                ffi::Span<const int64_t> padding,
                std::string_view data_format,
                std::string_view output_format) {
  // Element types.
  const ffi::DataType dt = input.element_type();
  if (dt != ffi::DataType::F32 && dt != ffi::DataType::BF16 &&
      dt != ffi::DataType::F16) {
    return ffi::Error::InvalidArgument(
        Prefix() + "input element type must be f32, bf16 or f16, got " +
        TypeName(dt));
  }
  struct Named {
    const char* name;
    const ffi::AnyBuffer* buf;
  };
  const Named operands[] = {{"grad_output", &grad_output},
                            {"input", &input},
                            {"output", &output},
                            {"result (grad_input)", &*grad_input}};
  for (const Named& op : operands) {
    if (op.buf->element_type() != dt) {
      return ffi::Error::InvalidArgument(
          Prefix() + op.name + " element type " +
          TypeName(op.buf->element_type()) +
          " differs from the input element type " + TypeName(dt));
    }
    if (op.buf->dimensions().size() != 5) {
      return ffi::Error::InvalidArgument(
          Prefix() + op.name + " must have rank 5, got rank " +
          std::to_string(op.buf->dimensions().size()) + " with shape " +
          DimsStr(op.buf->dimensions()));
    }
  }
  // Attributes.
  if (auto e = CheckTriple("kernel_size", kernel_size, 1); e.failure())
    return e;
  if (auto e = CheckTriple("stride", stride, 1); e.failure()) return e;
  if (auto e = CheckTriple("padding", padding, 0); e.failure()) return e;
  if (kernel_size[0] * kernel_size[1] * kernel_size[2] > kMaxWindowElements) {
    return ffi::Error::InvalidArgument(
        Prefix() + "kernel_size " + DimsStr(kernel_size) + " has " +
        std::to_string(kernel_size[0] * kernel_size[1] * kernel_size[2]) +
        " elements, more than the maximum of 4096");
  }
  Geom g{};
  if (auto e = ParseLayout("data_format", data_format, &g.in_cl); e.failure())
    return e;
  if (auto e = ParseLayout("output_format", output_format, &g.out_cl);
      e.failure())
    return e;
  // Shapes.
  auto in = input.dimensions();
  auto od = grad_output.dimensions();
  if (DimsStr(grad_input->dimensions()) != DimsStr(in)) {
    return ffi::Error::InvalidArgument(
        Prefix() + "result shape " + DimsStr(grad_input->dimensions()) +
        " differs from the input shape " + DimsStr(in));
  }
  if (DimsStr(output.dimensions()) != DimsStr(od)) {
    return ffi::Error::InvalidArgument(
        Prefix() + "output shape " + DimsStr(output.dimensions()) +
        " differs from the grad_output shape " + DimsStr(od));
  }
  for (int64_t v : in) {
    if (v < 0) {
      return ffi::Error::InvalidArgument(Prefix() + "bad input shape " +
                                         DimsStr(in));
    }
  }
  g.B = in[0];
  g.C = g.in_cl ? in[4] : in[1];
  const int64_t sp0 = g.in_cl ? 1 : 2;
  g.D = in[sp0];
  g.H = in[sp0 + 1];
  g.W = in[sp0 + 2];
  g.kD = kernel_size[0]; g.kH = kernel_size[1]; g.kW = kernel_size[2];
  g.sD = stride[0]; g.sH = stride[1]; g.sW = stride[2];
  g.pD = padding[0]; g.pH = padding[1]; g.pW = padding[2];
  const char* axes = "DHW";
  int64_t out_ext[3];
  const int64_t n_in[3] = {g.D, g.H, g.W};
  for (int i = 0; i < 3; ++i) {
    const int64_t span = n_in[i] + 2 * padding[i];
    if (span < kernel_size[i]) {
      return ffi::Error::InvalidArgument(
          Prefix() + "kernel_size[" + std::to_string(i) + "] = " +
          std::to_string(kernel_size[i]) + " is larger than the padded " +
          axes[i] + " extent " + std::to_string(n_in[i]) + " + 2*" +
          std::to_string(padding[i]) + " of the input shape " + DimsStr(in) +
          " (" + std::string(data_format) + ")");
    }
    out_ext[i] = (span - kernel_size[i]) / stride[i] + 1;
  }
  g.Do = out_ext[0]; g.Ho = out_ext[1]; g.Wo = out_ext[2];
  const int64_t expect[5] = {
      g.B, g.out_cl ? g.Do : g.C, g.out_cl ? g.Ho : g.Do,
      g.out_cl ? g.Wo : g.Ho, g.out_cl ? g.C : g.Wo};
  for (int i = 0; i < 5; ++i) {
    if (od[i] != expect[i]) {
      return ffi::Error::InvalidArgument(
          Prefix() + "grad_output shape " + DimsStr(od) + " (" +
          std::string(output_format) + ") disagrees with the input shape " +
          DimsStr(in) + " (" + std::string(data_format) + "), kernel_size " +
          DimsStr(kernel_size) + ", stride " + DimsStr(stride) +
          ", padding " + DimsStr(padding) + ": expected " +
          DimsStr(ffi::Span<const int64_t>(expect, 5)));
    }
  }
  g.overlap = g.sD < g.kD || g.sH < g.kH || g.sW < g.kW;
  auto covers = [](int64_t n, int64_t no, int64_t k, int64_t s, int64_t p) {
    return s == k && (no - 1) * s - p + k >= n;
  };
  g.full_cover = covers(g.D, g.Do, g.kD, g.sD, g.pD) &&
                 covers(g.H, g.Ho, g.kH, g.sH, g.pH) &&
                 covers(g.W, g.Wo, g.kW, g.sW, g.pW);
  if (input.element_count() == 0) return ffi::Error::Success();
  AdviseHugePages(grad_input->untyped_data(), grad_input->size_bytes());

  switch (dt) {
    case ffi::DataType::F32:
      Dispatch<F32T>(g, input.untyped_data(), output.untyped_data(),
                     grad_output.untyped_data(), grad_input->untyped_data());
      break;
    case ffi::DataType::BF16:
      Dispatch<BF16T>(g, input.untyped_data(), output.untyped_data(),
                      grad_output.untyped_data(), grad_input->untyped_data());
      break;
    default:
      Dispatch<F16T>(g, input.untyped_data(), output.untyped_data(),
                     grad_output.untyped_data(), grad_input->untyped_data());
      break;
  }
  return ffi::Error::Success();
}

}  // namespace
}  // namespace pool3d

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    Pool3dMaxPooling3dBackward, pool3d::Impl,
    xla::ffi::Ffi::Bind()
        .Arg<xla::ffi::AnyBuffer>()  // grad_output
        .Arg<xla::ffi::AnyBuffer>()  // input
        .Arg<xla::ffi::AnyBuffer>()  // output
        .Ret<xla::ffi::AnyBuffer>()  // grad_input
        .Attr<xla::ffi::Span<const int64_t>>("kernel_size")
        .Attr<xla::ffi::Span<const int64_t>>("stride")
        .Attr<xla::ffi::Span<const int64_t>>("padding")
        .Attr<std::string_view>("data_format")
        .Attr<std::string_view>("output_format"));

#ifndef POOL3D_NO_PYTHON_MODULE
// ---------------------------------------------------------------------------
// The CPython module `pool3d_pass.bindings.cpu._kernel`.
// ---------------------------------------------------------------------------

static PyObject* Handler(PyObject*, PyObject*) {
  return PyCapsule_New(reinterpret_cast<void*>(&Pool3dMaxPooling3dBackward),
                       nullptr, nullptr);
}

static PyObject* HardwareThreads(PyObject*, PyObject*) {
  return PyLong_FromUnsignedLong(std::thread::hardware_concurrency());
}

static PyMethodDef kMethods[] = {
    {"handler", Handler, METH_NOARGS,
     "PyCapsule of the XLA FFI handler for pool3d.max_pooling_3d_backward."},
    {"hardware_threads", HardwareThreads, METH_NOARGS,
     "std::thread::hardware_concurrency() as the kernel sees it."},
    {nullptr, nullptr, 0, nullptr}};

static struct PyModuleDef kModule = {
    PyModuleDef_HEAD_INIT, "_kernel",
    "XLA FFI CPU handler of pool3d.max_pooling_3d_backward.", -1, kMethods,
    nullptr, nullptr, nullptr, nullptr};

PyMODINIT_FUNC PyInit__kernel(void) { return PyModule_Create(&kModule); }
#endif  // POOL3D_NO_PYTHON_MODULE
