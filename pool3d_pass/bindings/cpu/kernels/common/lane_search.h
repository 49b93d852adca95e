// Window searches with the lanes running across contiguous elements: the
// channels of one channels-last output pixel (PyTorch's
// cpu_max_pool_channels_last does the same), a whole stride-1 output row
// flattened to (ow, c) lanes, or a staged row (forward_ndhwc_lanes.cc).
//
// A search gets n lanes, a base pointer and a list of taps (an element
// offset from the base and a tap number, in ascending row-major tap order,
// padding already left out): lane j of tap i reads base[off[i] + j]. Every
// tap is one compare-and-blend per lane in the element's own type:
//
//   - FirstMaxPixels (forward, y and indices): f32 compares
//     as floats (`x > best`: +0 == -0, so the first zero stays; NaN never
//     wins); bf16/f16 as int16 total-order keys. The first strictly greater
//     tap wins: the first maximum.
//
// The rare cases stay out of the hot loop: a NaN anywhere (ORed into one flag
// per call: an output row, or one run of lanes), and a maximum that is a zero of the wrong sign (-0 first, a +0
// later; f32) or any zero (bf16/f16: the keys order -0 below +0, the
// selection must not). Those lanes are redone by a scalar walk over the taps
// (FixLane): output the window's first NaN and index -1, or the zero XLA's
// max gives (+0 when the window holds a +0).
#ifndef POOL3D_KERNELS_COMMON_LANE_SEARCH_H_
#define POOL3D_KERNELS_COMMON_LANE_SEARCH_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "first_max.h"
#include "shared_kernels/element_types.h"

namespace pool3d {

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
// lanes go in blocks of U vectors (U = 2, then 1) whose running state stays in
// registers across all taps; when n is not a multiple of the lanes, one more
// vector ends at lane n (overlapping the one before; fewer lanes than a
// vector take the scalar FixLane walk). Taps go in pairs (i, i + 1): the
// pair's first maximum, then that merged into the running one (both
// strictly greater: the first maximum of ordered groups is the first
// maximum), which halves the dependent chain.
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

// What a call's blocks leave to FixLane, as lane masks.
template <class V>
struct LaneFlags {
  V nan{}, zero{}, low;  // low: the lowest key seen (int16 keys only)
};

// f32: the first maximum of lanes [j0, j0 + 8U) as float compares (+0 == -0,
// NaN never wins; a -0 maximum is flagged). A NaN is found by a sum of the
// taps beside the search, NaN when some tap is (or, rarely, +inf and -inf
// meet: a false alarm, which FixLane resolves the same way).
template <int U, class Tap>
static inline __attribute__((always_inline)) void FirstMaxBlockF32(
    const uint32_t* __restrict base, const int64_t* __restrict off,
    Tap tap, int64_t ntaps, int64_t j0,
    uint32_t* __restrict y, int16_t* __restrict idx, LaneFlags<VI32>& fl) {
  const uint32_t* x = base + j0;
  // Vectors by reference: a lambda returning one is an ABI change (-Wpsabi)
  // in the portable clone.
  auto load = [&](VF32& f, int64_t i, int u) {
    POOL3D_VLOAD(f, x + off[i] + 8 * u);
  };
  VF32 m[U], sum[U];
  VI32 t[U];
  int64_t i = ntaps >= 2 ? 2 : 1;
  {
    const VI32 t0 = int32_t(tap[0]) + VI32{};
    const VI32 t1 = int32_t(tap[ntaps >= 2]) + VI32{};
    for (int u = 0; u < U; ++u) {
      VF32 a, b;
      load(a, 0, u);
      load(b, ntaps >= 2, u);  // one tap: tap 0 twice
      const VI32 gt = b > a;
      m[u] = gt ? b : a;
      t[u] = gt ? t1 : t0;
      sum[u] = a + b;
    }
  }
  for (; i + 1 < ntaps; i += 2) {
    const VI32 t0 = int32_t(tap[i]) + VI32{};
    const VI32 t1 = int32_t(tap[i + 1]) + VI32{};
    for (int u = 0; u < U; ++u) {
      VF32 a, b;
      load(a, i, u);
      load(b, i + 1, u);
      const VI32 gt = b > a;
      const VF32 pm = gt ? b : a;
      const VI32 pt = gt ? t1 : t0;
      sum[u] += a + b;
      const VI32 win = pm > m[u];
      m[u] = win ? pm : m[u];  // vector selects: one blend each
      t[u] = win ? pt : t[u];
    }
  }
  if (i < ntaps) {
    const VI32 t0 = int32_t(tap[i]) + VI32{};
    for (int u = 0; u < U; ++u) {
      VF32 f;
      load(f, i, u);
      const VI32 gt = f > m[u];
      m[u] = gt ? f : m[u];
      t[u] = gt ? t0 : t[u];
      sum[u] += f;
    }
  }
  for (int u = 0; u < U; ++u) {
    POOL3D_VSTORE(y + j0 + 8 * u, m[u]);
    fl.zero |= (VI32)m[u] == int32_t(0x80000000u);
    fl.nan |= sum[u] != sum[u];
  }
  for (int u = 0; u + 1 < U; u += 2) {  // tap numbers fit int16: pack pairs
    const VI16 t16 = __builtin_shufflevector(
        (VI16)t[u], (VI16)t[u + 1], 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20,
        22, 24, 26, 28, 30);
    POOL3D_VSTORE(idx + j0 + 8 * u, t16);
  }
  if (U % 2) {
    const VI16x8 t16 = __builtin_convertvector(t[U - 1], VI16x8);
    POOL3D_VSTORE(idx + j0 + 8 * (U - 1), t16);
  }
}

// bf16/f16: the same with int16 total-order keys (TotalKey below: -0 keys
// -1, +0 keys 0; a NaN keys above +inf or below -inf), 16 lanes a vector.
// A zero maximum of either sign is flagged (the key told them apart, the
// selection must not), and so is a NaN: above +inf it wins, below -inf it
// shows in the lowest key.
template <class T, int U, class Tap>
static inline __attribute__((always_inline)) void FirstMaxBlock16(
    const uint16_t* __restrict base, const int64_t* __restrict off,
    Tap tap, int64_t ntaps, int64_t j0,
    uint16_t* __restrict y, int16_t* __restrict idx, LaneFlags<VI16>& fl) {
  constexpr int16_t kInf = int16_t(T::kInf);
  const uint16_t* x = base + j0;
  auto key = [&](VI16& k, int64_t i, int u) {  // by reference: see above
    VI16 b;
    POOL3D_VLOAD(b, x + off[i] + 16 * u);
    k = b ^ ((b >> 15) & int16_t(0x7fff));
    fl.low = k < fl.low ? k : fl.low;
  };
  VI16 m[U], t[U];
  int64_t i = ntaps >= 2 ? 2 : 1;
  {
    const VI16 t0 = tap[0] + VI16{}, t1 = tap[ntaps >= 2] + VI16{};
    for (int u = 0; u < U; ++u) {
      VI16 a, b;
      key(a, 0, u);
      key(b, ntaps >= 2, u);
      const VI16 gt = b > a;
      m[u] = gt ? b : a;
      t[u] = gt ? t1 : t0;
    }
  }
  for (; i + 1 < ntaps; i += 2) {
    const VI16 t0 = tap[i] + VI16{}, t1 = tap[i + 1] + VI16{};
    for (int u = 0; u < U; ++u) {
      VI16 a, b;
      key(a, i, u);
      key(b, i + 1, u);
      const VI16 gt = b > a;
      const VI16 pm = gt ? b : a, pt = gt ? t1 : t0;
      const VI16 win = pm > m[u];
      m[u] = win ? pm : m[u];
      t[u] = win ? pt : t[u];
    }
  }
  if (i < ntaps) {
    const VI16 t0 = tap[i] + VI16{};
    for (int u = 0; u < U; ++u) {
      VI16 k;
      key(k, i, u);
      const VI16 gt = k > m[u];
      m[u] = gt ? k : m[u];
      t[u] = gt ? t0 : t[u];
    }
  }
  for (int u = 0; u < U; ++u) {
    const VI16 bits = m[u] ^ ((m[u] >> 15) & int16_t(0x7fff));
    POOL3D_VSTORE(y + j0 + 16 * u, bits);
    POOL3D_VSTORE(idx + j0 + 16 * u, t[u]);
    fl.nan |= m[u] > kInf;
    fl.zero |= (m[u] >> 1) == m[u];  // keys 0 and -1
  }
}

template <class T, int U, class V, class Tap>
static inline __attribute__((always_inline)) void FirstMaxBlock(
    const typename T::M* __restrict base, const int64_t* __restrict off,
    Tap tap, int64_t ntaps, int64_t j0,
    typename T::M* __restrict y, int16_t* __restrict idx, LaneFlags<V>& fl) {
  if constexpr (sizeof(typename T::M) == 2) {
    FirstMaxBlock16<T, U>(base, off, tap, ntaps, j0, y, idx, fl);
  } else {
    FirstMaxBlockF32<U>(base, off, tap, ntaps, j0, y, idx, fl);
  }
}

// Pixels of at least this many bytes of lanes (two cache lines) are searched
// one at a time, each tap's lanes read as one run, rather than a lane block
// across all pixels: a block of a larger pixel reads every other cache line
// of the input rows, and the next block comes back for the rest. Measured
// with the disjoint-window forward from cold caches, 2 threads, alternating
// processes (docs/benchmarks.md), against the earlier 512-byte threshold:
// f32 C = 32 1.0x-1.17x, 48 1.35x-1.45x, 64 1.3x-1.7x, 96 1.25x-1.5x, k3 s3
// C = 32 1.6x-1.75x; bf16 C = 64 1.0x-1.3x, 128 1.5x. At 64 bytes (f32
// C = 16, bf16 C = 32) pixel by pixel measured 0.9x-1.0x: those keep blocks.
inline constexpr int64_t kPixelMajorBytes = 128;

// Tap numbers 0, 1, 2, ...: a window with all its taps real.
struct Iota {
  constexpr int16_t operator[](int64_t i) const { return int16_t(i); }
};

// FirstMaxPixels with NT taps numbered 0 .. NT - 1 (NT = 0: any ntaps taps;
// a constant lets the tap loops unroll, the offsets stay in registers across
// pixels and the tap numbers become constants).
template <class T, int NT>
static inline __attribute__((always_inline)) void FirstMaxPixelsN(
    const typename T::M* __restrict base, int64_t step,
    const int64_t* __restrict off, const int16_t* __restrict tap,
    int64_t ntaps_, int64_t npix, int64_t n, typename T::M* __restrict y,
    int16_t* __restrict idx) {
  using M = typename T::M;
  constexpr bool k16 = sizeof(M) == 2;
  constexpr int64_t L = 32 / sizeof(M);  // lanes per vector
  using V = std::conditional_t<k16, VI16, VI32>;
  // Below every key of a number (-inf's key is -kInf - 1): a NaN's.
  constexpr int16_t kLowNan = int16_t(-int(T::kInf & 0x7fff) - 1);
  // Lanes the vector blocks cover: all of them once n >= L (the last block
  // ends at lane n, recomputing lanes an earlier block gave the same values).
  const int64_t ntaps = NT ? NT : ntaps_, nv = n >= L ? n : 0;
  // NT taps: offsets the loop can keep in registers, tap numbers known.
  int64_t off_n[NT ? NT : 1];
  for (int i = 0; i < NT; ++i) off_n[i] = off[i];
  LaneFlags<V> fl;
  fl.low = V{} + (k16 ? kLowNan : 0);
  // Pixels [p0, p1) in lane block j0 (the tap pointers step with them).
  auto blocks = [&](auto u_const, int64_t p0, int64_t p1, int64_t j0) {
    constexpr int U = decltype(u_const)::value;
    const M* b = base + p0 * step;
    for (int64_t p = p0; p < p1; ++p, b += step) {
      if constexpr (NT != 0) {
        FirstMaxBlock<T, U>(b, off_n, Iota{}, ntaps, j0, y + p * n,
                            idx + p * n, fl);
      } else {
        FirstMaxBlock<T, U>(b, off, tap, ntaps, j0, y + p * n, idx + p * n,
                            fl);
      }
    }
  };
  // Block by block over all pixels, or pixel by pixel (all of its blocks)
  // where a pixel's lanes are long enough to stream.
  const int64_t group = n * int64_t(sizeof(M)) >= kPixelMajorBytes ? 1 : npix;
  for (int64_t p0 = 0; p0 < npix; p0 += group) {
    const int64_t p1 = std::min(npix, p0 + group);
    int64_t j0 = 0;
    for (; j0 + 2 * L <= n; j0 += 2 * L)
      blocks(std::integral_constant<int, 2>{}, p0, p1, j0);
    for (; j0 + L <= n; j0 += L)
      blocks(std::integral_constant<int, 1>{}, p0, p1, j0);
    if (j0 < n && n >= L)
      blocks(std::integral_constant<int, 1>{}, p0, p1, n - L);
  }
  if (k16) fl.nan |= fl.low < kLowNan;
  if (!AnyLane(fl.nan | fl.zero) && nv == n) return;
  const bool nan = AnyLane(fl.nan);
  for (int64_t p = 0; p < npix; ++p, base += step, y += n, idx += n) {
    for (int64_t j = 0; j < n; ++j)
      if (j >= nv || nan || (y[j] & T::kAbs) == 0)
        FixLane<T>(base, off, tap, ntaps, j, y + j, idx + j);
  }
}

// The first maximum of npix pixels of n lanes each: lane j of pixel p, tap
// i reads base[p * step + off[i] + j] and writes y/idx[p * n + j]. Vector
// blocks (the last one ending at lane n), then FixLane for every lane when n
// is below a vector and, where the call saw a flag, for the flagged lanes
// (every lane after a NaN). `whole`: the taps are numbered 0 .. ntaps - 1
// (a window with no padding).
template <class T>
POOL3D_HOT void FirstMaxPixels(const typename T::M* __restrict base,
                               int64_t step, const int64_t* __restrict off,
                               const int16_t* __restrict tap, int64_t ntaps,
                               bool whole, int64_t npix, int64_t n,
                               typename T::M* __restrict y,
                               int16_t* __restrict idx) {
  if (whole && ntaps == 8)  // 2 x 2 x 2 windows
    return FirstMaxPixelsN<T, 8>(base, step, off, tap, ntaps, npix, n, y, idx);
  FirstMaxPixelsN<T, 0>(base, step, off, tap, ntaps, npix, n, y, idx);
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

}  // namespace pool3d

#endif  // POOL3D_KERNELS_COMMON_LANE_SEARCH_H_
