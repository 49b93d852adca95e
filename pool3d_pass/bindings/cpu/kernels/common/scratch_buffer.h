// A work item's scratch buffer that grows without initialising.
//
// std::vector::resize zeroes every element it adds. The f32 accumulators of
// the half types zero each part themselves just before they first use it
// (a plane before its scatter, a depth slice of the channels-last window as
// the windows reach it), so a vector zeroed the whole buffer a second time at
// every thread's first item of every call: in a bf16 (4,8,28,28,24) k3 s2 p1
// from_indices call, 1.2 MB of its 3.6 MB of zeroing.
//
// `make sanitize` builds with POOL3D_POISON_SCRATCH: new elements are then
// all-ones bytes (a NaN for floats), so a read before its write changes the
// kernel tests' results instead of passing on memory that happened to be 0.
#ifndef POOL3D_KERNELS_COMMON_SCRATCH_BUFFER_H_
#define POOL3D_KERNELS_COMMON_SCRATCH_BUFFER_H_

#include <cstddef>
#include <cstring>
#include <memory>

namespace pool3d {

template <class E>
class ScratchBuffer {
 public:
  // At least n elements; new ones hold no particular value.
  E* Reserve(size_t n) {
    if (n > size_) {
      data_.reset(new E[n]);  // default-initialised: not zeroed
      size_ = n;
#ifdef POOL3D_POISON_SCRATCH
      std::memset(static_cast<void*>(data_.get()), 0xff, n * sizeof(E));
#endif
    }
    return data_.get();
  }

 private:
  std::unique_ptr<E[]> data_;
  size_t size_ = 0;
};

}  // namespace pool3d

#endif  // POOL3D_KERNELS_COMMON_SCRATCH_BUFFER_H_
