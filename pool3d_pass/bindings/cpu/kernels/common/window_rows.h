// The rows of windows of one output depth, a row at a time: the prologue of
// the CPU kernels that walk windows row by row (forward_output.cc,
// backward_ncdhw.cc, backward_ndhwc.cc, ncdhw_no_overlap.h), written once.
#ifndef POOL3D_KERNELS_COMMON_WINDOW_ROWS_H_
#define POOL3D_KERNELS_COMMON_WINDOW_ROWS_H_

#include <cstdint>

#include "shared_kernels/geometry.h"

namespace pool3d {

// Output row oh of one output depth: where its windows start along D and H
// (d0, h0, in input positions) and their real taps there, [td_lo, td_hi) and
// [th_lo, th_hi) (TapRange).
struct WindowRow {
  int64_t oh;
  int64_t d0, td_lo, td_hi;
  int64_t h0, th_lo, th_hi;
};

// Calls fn(row) for the Ho rows of windows at output depth od, in order (a
// copy each: its fields stay in registers in fn's loops).
template <class Fn>
inline void ForWindowRows(const Geom& g, int64_t od, Fn&& fn) {
  WindowRow r{};
  r.d0 = od * g.sD - g.pD;
  TapRange(r.d0, g.kD, g.D, &r.td_lo, &r.td_hi);
  for (r.oh = 0; r.oh < g.Ho; ++r.oh) {
    r.h0 = r.oh * g.sH - g.pH;
    TapRange(r.h0, g.kH, g.H, &r.th_lo, &r.th_hi);
    fn(WindowRow(r));
  }
}

}  // namespace pool3d

#endif  // POOL3D_KERNELS_COMMON_WINDOW_ROWS_H_
