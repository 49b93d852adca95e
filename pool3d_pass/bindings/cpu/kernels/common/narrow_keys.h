// Keys in the element's own width, for the channels-last searches.
//
// KeyNanHigh's order (NaN above everything, +0 and -0 equal, padding never
// involved) as int16 for bf16/f16, so that AVX2 compares 16 lanes at once,
// and as int32 for f32. Tap numbers (< 4096) travel in the same type.
#ifndef POOL3D_KERNELS_COMMON_NARROW_KEYS_H_
#define POOL3D_KERNELS_COMMON_NARROW_KEYS_H_

#include <cstdint>
#include <limits>
#include <type_traits>

#include "shared_kernels/element_types.h"

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

}  // namespace pool3d

#endif  // POOL3D_KERNELS_COMMON_NARROW_KEYS_H_
