// The f32 accumulator of the channels-last kernels that scatter in output
// depth order (backward and fused backward), and how they split the work.
//
// One work item is one (b, channel block). f32 accumulates in dx itself;
// bf16/f16 accumulate in an f32 window of R depth slices that slides forward
// along D. Depths [0, done) are final in dx, [done, zeroed) are live in the
// accumulator, which starts at depth acc_d. A slice is zeroed just before the
// first window that reaches it and rounded into dx as soon as no later window
// can, so it is still in cache at both ends; depths no window reaches get +0.
#ifndef POOL3D_KERNELS_NDHWC_ACCUMULATOR_H_
#define POOL3D_KERNELS_NDHWC_ACCUMULATOR_H_

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "common/first_max.h"
#include "common/separable_ndhwc_d_first.h"
#include "common/threading.h"
#include "shared_kernels/geometry.h"

namespace pool3d {

struct NdhwcBlocks {
  int64_t nc_blk, ncb, items, R;
  int threads;
};

// Depth slices the bf16/f16 accumulator holds at once (f32 accumulates in
// dx itself, all of D).
inline int64_t HalfAccumulatorSlices(const Geom& g) {
  return std::min(g.D, 2 * g.kD + g.sD);
}

template <class T>
NdhwcBlocks PlanNdhwcBlocks(const Geom& g) {
  constexpr bool kF32 = sizeof(typename T::M) == 4;
  const int64_t HW = g.H * g.W, total = g.B * g.D * HW * g.C;
  NdhwcBlocks bl;
  bl.nc_blk = ChannelBlock(g.C, g.B, ThreadCount(int64_t{1} << 20, total));
  bl.R = kF32 ? g.D : HalfAccumulatorSlices(g);
  if (!kF32) {  // keep the per-thread f32 accumulator below ~64 MiB
    while (bl.nc_blk > 1 && bl.R * HW * bl.nc_blk > (int64_t{1} << 24)) {
      bl.nc_blk = (bl.nc_blk + 1) / 2;
    }
  }
  bl.ncb = (g.C + bl.nc_blk - 1) / bl.nc_blk;
  bl.items = g.B * bl.ncb;
  bl.threads = ThreadCount(bl.items, total);
  return bl;
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
class NdhwcAccumulator {
 public:
  using M = typename T::M;
  static constexpr bool kF32 = sizeof(M) == 4;

  // db: dx at batch b, channel c0 of a block of nc lanes.
  NdhwcAccumulator(const Geom& g, const NdhwcBlocks& bl, M* db, int64_t nc,
                   SepDFirstScratch& s)
      : g_(g), R_(bl.R), HW_(g.H * g.W), db_(db), nc_(nc) {
    if constexpr (kF32) {
      acc_ = reinterpret_cast<float*>(db);
      astride = g.C;
    } else {
      acc_ = s.acc.Reserve(R_ * HW_ * nc);  // each slice zeroed by StartTo
      astride = nc;
    }
  }

  // Position q of lane c, from depth acc_d on: data()[(q - acc_d * H * W) *
  // astride + c].
  float* data() const { return acc_; }
  int64_t astride;
  int64_t acc_d = 0;

  // Depths [zeroed, d) become live.
  void StartTo(int64_t d) {
    d = std::min(d, g_.D);
    if constexpr (!kF32) {
      if (d > acc_d + R_) {  // slide: move the live slices to the front
        std::memmove(acc_, Slice(done_),
                     sizeof(float) * (zeroed_ - done_) * HW_ * nc_);
        acc_d = done_;
      }
    }
    if (d > zeroed_) ZeroLanes(Slice(zeroed_), (d - zeroed_) * HW_, nc_, astride);
    zeroed_ = std::max(zeroed_, d);
  }

  // Depths [done, d) become final.
  void FinishTo(int64_t d) {
    d = std::min(d, g_.D);
    if constexpr (!kF32) {
      const int64_t live = std::min(d, zeroed_);
      if (live > done_)
        StoreRounded<T>(Slice(done_), (live - done_) * HW_, nc_,
                        db_ + done_ * HW_ * g_.C, g_.C);
    }
    if (d > zeroed_) {  // depths no window reaches: +0
      ZeroLanes(db_ + zeroed_ * HW_ * g_.C, (d - zeroed_) * HW_, nc_, g_.C);
      zeroed_ = d;
    }
    done_ = std::max(done_, d);
  }

  // After output depth od: everything below the next window is final.
  void FinishAfter(int64_t od) {
    FinishTo(od + 1 < g_.Do ? od * g_.sD - g_.pD + g_.sD : g_.D);
  }

 private:
  float* Slice(int64_t d) const { return acc_ + (d - acc_d) * HW_ * astride; }

  const Geom& g_;
  int64_t R_, HW_;
  M* db_;
  int64_t nc_;
  float* acc_;
  int64_t zeroed_ = 0, done_ = 0;
};

}  // namespace pool3d

#endif  // POOL3D_KERNELS_NDHWC_ACCUMULATOR_H_
