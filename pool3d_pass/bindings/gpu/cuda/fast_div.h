// Division by a run-time divisor without a division instruction.
//
// A GPU has no integer divider: `n / d` with a run-time d compiles to a
// float reciprocal and correction sequence (I2F.RP, MUFU.RCP, F2I and about
// ten more instructions), and 64-bit division to a subroutine call. The
// kernels divide flat positions by tensor extents, so each divisor is turned
// into a multiplier and two shifts on the host (Granlund and Montgomery,
// "Division by invariant integers using multiplication", PLDI 1994, figure
// 4.1): for every N-bit n, n / d = (t + ((n - t) >> s1)) >> s2 with
// t = mulhi(m, n). One multiply-high, an add, a subtract and two shifts.
#ifndef POOL3D_GPU_CUDA_FAST_DIV_H_
#define POOL3D_GPU_CUDA_FAST_DIV_H_

#include <cstdint>
#include <type_traits>

#include "shared_kernels/hd.h"

namespace pool3d {
namespace gpu {

POOL3D_HD inline uint32_t MulHi(uint32_t a, uint32_t b) {
#ifdef __CUDA_ARCH__
  return __umulhi(a, b);
#else
  return uint32_t((uint64_t{a} * b) >> 32);
#endif
}

POOL3D_HD inline uint64_t MulHi(uint64_t a, uint64_t b) {
#ifdef __CUDA_ARCH__
  return __umul64hi(a, b);
#else
  return uint64_t((static_cast<unsigned __int128>(a) * b) >> 64);
#endif
}

// Division of U (uint32_t or uint64_t) values by a fixed divisor d >= 1.
template <class U>
struct FastDiv {
  U d = 1, m = 1;
  uint32_t s1 = 0, s2 = 0;

  POOL3D_HD U Div(U n) const {
    const U t = MulHi(m, n);
    return (t + ((n - t) >> s1)) >> s2;
  }
  // n / d into *q, n % d returned.
  POOL3D_HD U DivMod(U n, U* q) const {
    *q = Div(n);
    return n - *q * d;
  }
};

// The constants for d (host code; d >= 1).
template <class U>
inline FastDiv<U> MakeFastDiv(U d) {
  constexpr int kBits = int(sizeof(U) * 8);
  int l = 0;  // ceil(log2(d))
  while (l < kBits && (U{1} << l) < d) ++l;
  FastDiv<U> f;
  f.d = d;
  // m = floor(2^N * (2^l - d) / d) + 1, computed in twice the width.
  using Wide = typename std::conditional<sizeof(U) == 4, uint64_t,
                                         unsigned __int128>::type;
  const Wide two_l = l == kBits ? (Wide{1} << kBits) : (Wide{1} << l);
  f.m = U(((two_l - d) << kBits) / d + 1);
  f.s1 = l > 0 ? 1 : 0;
  f.s2 = l > 0 ? uint32_t(l - 1) : 0;
  return f;
}

}  // namespace gpu
}  // namespace pool3d

#endif  // POOL3D_GPU_CUDA_FAST_DIV_H_
