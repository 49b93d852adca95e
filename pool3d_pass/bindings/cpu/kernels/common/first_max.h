// The first-maximum reductions of the separable window searches.
//
// The first maximum of a window in row-major (td, th, tw) order is
// separable: reduce each row over tw (keeping the first of equal maxima),
// then those results over th, then over td, always replacing only on a
// strictly greater key. The loops below do one such step over many lanes at
// once (windows of a row, or channels), as int32 compare-selects that
// vectorise. The Tie variants also carry a tap code and, among equal keys,
// keep the smaller code: for searches that reduce the axes in another order
// than row-major (channels-last reduces D first).
//
// The hot loops are also compiled for AVX2 (8 int32 lanes and real blends
// instead of SSE2's and/andnot/or); the loader picks the variant once
// through an ifunc. They have internal linkage: every kernel file gets its
// own copies.
#ifndef POOL3D_KERNELS_COMMON_FIRST_MAX_H_
#define POOL3D_KERNELS_COMMON_FIRST_MAX_H_

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "shared_kernels/element_types.h"

namespace pool3d {

// The few hot loops below are also compiled for AVX2 (8 int32 lanes and real
// blends instead of SSE2's and/andnot/or); the loader picks the variant once
// through an ifunc. Elsewhere the portable build is used unchanged.
#if defined(__x86_64__) && defined(__ELF__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define POOL3D_HOT \
  static __attribute__((target_clones("avx2", "default"), unused))
#endif
#endif
#ifndef POOL3D_HOT
#define POOL3D_HOT static inline
#endif

// Where cand > cur: cur = cand, idx = cand_idx (all as masks, vectorises in
// the key's width: int32, or int16 for the narrow keys).
template <class K>
inline void TakeIfGreater(K cand, K cand_idx, K& cur, K& idx) {
  const K m = K(-K(cand > cur));
  cur = K((cand & m) | (cur & ~m));
  idx = K((cand_idx & m) | (idx & ~m));
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
inline void ReduceRows(const int32_t* cand, const int32_t* cand_idx, int64_t stride,
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

// k[i] = KP's key of x[i].
POOL3D_HOT void KeysF32(const uint32_t* __restrict x, int32_t* __restrict k,
                        int64_t n) {
  for (int64_t i = 0; i < n; ++i) k[i] = Key<F32T>(x[i]);
}

POOL3D_HOT void KeysF32NanHigh(const uint32_t* __restrict x,
                               int32_t* __restrict k, int64_t n) {
  for (int64_t i = 0; i < n; ++i) k[i] = KeyNanHigh<F32T>(x[i]);
}

template <class T, class KP>
void Keys(const typename T::M* __restrict x, int32_t* __restrict k,
          int64_t n) {
  if constexpr (sizeof(typename T::M) == 4 && std::is_same_v<KP, NanLow>) {
    KeysF32(x, k, n);
  } else if constexpr (sizeof(typename T::M) == 4) {
    KeysF32NanHigh(x, k, n);
  } else {
    for (int64_t i = 0; i < n; ++i) k[i] = KP::template KeyOf<T>(x[i]);
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

}  // namespace pool3d

#endif  // POOL3D_KERNELS_COMMON_FIRST_MAX_H_
