// The per-layout halves of each kernel, as element-type templates
// instantiated for F32T, BF16T and F16T in their own files; kernels.h's
// routines dispatch to them, choosing by the predicates of choices.h.
#ifndef POOL3D_KERNELS_LAYOUTS_H_
#define POOL3D_KERNELS_LAYOUTS_H_

#include <cstdint>

#include "common/ndhwc_rows.h"
#include "shared_kernels/geometry.h"

namespace pool3d {

// backward_ncdhw.cc, backward_ndhwc.cc: both layouts NCDHW / NDHWC.
template <class T>
void BackwardNcdhw(const Geom& g, const typename T::M* x,
                   const typename T::M* y, const typename T::M* go,
                   typename T::M* dx);
template <class T>
void BackwardNdhwc(const Geom& g, const typename T::M* x,
                   const typename T::M* y, const typename T::M* go,
                   typename T::M* dx);

// generic.cc: any pair of layouts (data_format != output_format, or
// geometries whose offsets the fast paths keep as int32 do not fit).
// Correct rather than fast; one (b, c) plane per work item.
template <class T>
void BackwardGeneric(const Geom& g, const typename T::M* x,
                     const typename T::M* y, const typename T::M* go,
                     typename T::M* dx);
template <class T>
void ForwardGeneric(const Geom& g, const typename T::M* x, typename T::M* y,
                    int16_t* idx);
template <class T>
void ForwardOutputGeneric(const Geom& g, const typename T::M* x,
                          typename T::M* y);
template <class T>
void FromIndicesGeneric(const Geom& g, const typename T::M* go,
                        const int16_t* idx, typename T::M* dx);
template <class T>
void FromInputGeneric(const Geom& g, const typename T::M* go,
                      const typename T::M* x, typename T::M* dx);

// forward_ndhwc_lanes.cc: the channels-last forward by lane search across
// channels (common/lane_search.h; y may be null: indices only), and its search
// of one output row (b, od, oh) of a batch's input xb into Wo * C outputs and
// indices.
template <class T>
void ForwardNdhwcLanes(const Geom& g, const typename T::M* x, typename T::M* y,
                       int16_t* idx);
template <class T>
void ForwardRowNdhwc(const Geom& g, const typename T::M* xb, int64_t od,
                  int64_t oh, NdhwcTaps& s, typename T::M* y_row,
                  int16_t* idx_row);

// Windows that neither overlap nor reach into padding: every pixel of every
// row has the same real taps (ForwardNdhwcDisjoint, common/disjoint_rows.h;
// y may be null: indices only).
inline bool WindowsDisjoint(const Geom& g) {
  return !g.overlap && g.pD == 0 && g.pH == 0 && g.pW == 0;
}
template <class T>
void ForwardNdhwcDisjoint(const Geom& g, const typename T::M* x,
                          typename T::M* y, int16_t* idx);

// from_indices_ndhwc_gather.cc: backward_from_indices, channels-last, by
// gather, where it pays (choices.h): windows that do not overlap, and bf16
// windows that overlap (AVX2).
template <class T>
void FromIndicesNdhwcGather(const Geom& g, const typename T::M* go,
                            const int16_t* idx, typename T::M* dx);
// The overlapping bf16 gather (common/overlap_gather.h) is AVX2 code, built
// for x86-64 with GCC or Clang.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define POOL3D_OVERLAP_GATHER 1
void FromIndicesNdhwcOverlapGatherBf16(const Geom& g, const uint16_t* go,
                                       const int16_t* idx, uint16_t* dx);
#endif

// from_input_ndhwc_gather.cc: backward_from_input, channels-last, windows that
// do not overlap, where the lanes pay (LanesPay, choices.h): each output row
// searched as the forward searches it, then its input rows written by the same
// gather.
template <class T>
void FromInputNdhwcGather(const Geom& g, const typename T::M* go,
                          const typename T::M* x, typename T::M* dx);

// Whether the fast channels-first / channels-last searches can take g (their
// offsets within a plane or an output row are int32).
bool NcdhwSearchFits(const Geom& g);
bool NdhwcSearchFits(const Geom& g);

}  // namespace pool3d

#endif  // POOL3D_KERNELS_LAYOUTS_H_
