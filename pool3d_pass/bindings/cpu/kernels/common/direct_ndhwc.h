// The direct first-max search of channels-last windows, vectorised across
// channels in the element type's own width.
//
// For one window, the real taps are visited in row-major (td, th, tw) order
// and a lane's best key is replaced only by a strictly greater one, so the
// winner is the first tap holding the maximum: no tie codes, no staging
// arrays. Keys are KeyNanHigh's order (NaN above everything, +0 and -0
// equal) in int16 for bf16/f16 (16 lanes per AVX2 instruction) and int32 for
// f32. kD * kH * kW compare-selects per window and lane, but on the bits as
// loaded: for the usual 3 x 3 x 3 windows cheaper than the separable search's
// staging, which the forward and the fused backward do not need.
#ifndef POOL3D_KERNELS_COMMON_DIRECT_NDHWC_H_
#define POOL3D_KERNELS_COMMON_DIRECT_NDHWC_H_

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "element_types.h"
#include "first_max.h"
#include "geometry.h"

namespace pool3d {

template <class T>
using NarrowKey =
    std::conditional_t<sizeof(typename T::M) == 2, int16_t, int32_t>;

template <class T>
constexpr NarrowKey<T> kNarrowNan = std::numeric_limits<NarrowKey<T>>::max();

// KeyNanHigh in the element's width.
template <class T>
inline NarrowKey<T> NarrowKeyOf(typename T::M a) {
  using K = NarrowKey<T>;
  constexpr int kBits = int(sizeof(K) * 8);
  const K mag = K(a & T::kAbs);
  const K neg = K(K(a) >> (kBits - 1));  // 0 or -1
  const K signed_mag = K((mag ^ neg) - neg);
  return mag > K(T::kInf) ? kNarrowNan<T> : signed_mag;
}

// The element bits of a narrow key that is not NaN; key 0 gives +0.
template <class T>
inline typename T::M NarrowKeyBits(NarrowKey<T> k) {
  using M = typename T::M;
  using K = NarrowKey<T>;
  constexpr int kBits = int(sizeof(K) * 8);
  const K neg = K(k >> (kBits - 1));
  return M(M((k ^ neg) - neg) | (M(M(1) << (kBits - 1)) & M(neg)));
}

// best/tap[j] for lanes c0 + j, j < n <= L (the taps' clipped ranges given):
// with L fixed and n == L the running maxima stay in registers.
template <class T, int L>
inline void ChunkMaxCl(const Geom& g, const typename T::M* __restrict xc,
                       int64_t d0, int64_t h0, int64_t w0, const int64_t* r,
                       int64_t n, NarrowKey<T>* __restrict best,
                       NarrowKey<T>* __restrict tap) {
  using K = NarrowKey<T>;
  K b[L], t[L];
  for (int j = 0; j < L; ++j) {
    b[j] = std::numeric_limits<K>::min();
    t[j] = 0;
  }
  for (int64_t td = r[0]; td < r[1]; ++td)
    for (int64_t th = r[2]; th < r[3]; ++th)
      for (int64_t tw = r[4]; tw < r[5]; ++tw) {
        const typename T::M* __restrict xv =
            xc + (((d0 + td) * g.H + h0 + th) * g.W + w0 + tw) * g.C;
        const K tn = K((td * g.kH + th) * g.kW + tw);
        if (n == L) {
          for (int j = 0; j < L; ++j) {
            const K k = NarrowKeyOf<T>(xv[j]);
            const bool m = k > b[j];
            b[j] = m ? k : b[j];
            t[j] = m ? tn : t[j];
          }
        } else {
          for (int j = 0; j < n; ++j) {
            const K k = NarrowKeyOf<T>(xv[j]);
            const bool m = k > b[j];
            b[j] = m ? k : b[j];
            t[j] = m ? tn : t[j];
          }
        }
      }
  for (int64_t j = 0; j < n; ++j) {
    best[j] = b[j];
    tap[j] = t[j];
  }
}

// best/tap[c] = the first maximum over the real taps of window (d0, h0, w0)
// of lane c < nc and its tap number; xb is the batch at the block's first
// channel (positions C apart).
template <class T>
POOL3D_HOT void WindowMaxCl(const Geom& g, const typename T::M* __restrict xb,
                            int64_t d0, int64_t h0, int64_t w0, int64_t nc,
                            NarrowKey<T>* __restrict best,
                            NarrowKey<T>* __restrict tap) {
  constexpr int L = 64 / int(sizeof(NarrowKey<T>));  // two AVX2 registers
  int64_t r[6];
  TapRange(d0, g.kD, g.D, &r[0], &r[1]);
  TapRange(h0, g.kH, g.H, &r[2], &r[3]);
  TapRange(w0, g.kW, g.W, &r[4], &r[5]);
  for (int64_t c = 0; c < nc; c += L)
    ChunkMaxCl<T, L>(g, xb + c, d0, h0, w0, r, std::min<int64_t>(L, nc - c),
                     best + c, tap + c);
}

}  // namespace pool3d

#endif  // POOL3D_KERNELS_COMMON_DIRECT_NDHWC_H_
