// The window kernel's unit (forward, forward_output, the indices of
// backward_from_input, backward's selection), and the taps of a specialised
// window as the searches (search.h) read them; fused_units.h reads them too.
//
// Specialised (Fixed) windows run ONE body for every unit, border or not: a
// padded tap is read at the nearest real position of the same window, under
// that position's tap index (search.h), so no unit branches on where it is
// and a warp never runs two bodies. Every load of a unit is issued before
// the search uses the first one (NDHWC: in batches of at most kBatchRegisters
// registers of data, to bound registers; checks/gpu_model.py counts the
// round trips).
#ifndef POOL3D_GPU_CUDA_WINDOW_UNITS_H_
#define POOL3D_GPU_CUDA_WINDOW_UNITS_H_

#include <cstdint>
#include <type_traits>

#include "generic_units.h"
#include "search.h"
#include "shared_kernels/window_scan.h"
#include "unit_common.h"

namespace pool3d {
namespace gpu {

// The registers of loaded data a unit holds at once (NDHWC batches).
constexpr int kBatchRegisters = 56;

// NCDHW: V windows (ow0 .. ow0+V-1) of one output row. Each of the kD x kH
// input rows of the windows is read as a segment of kSeg = (V-1)*sW + kW
// columns from c0 = ow0*sW - pW: its kVecN = V*sW columns from ow0*sW on are
// one aligned vector (inside the row: launch_plan.h's VectorWidth), the halo
// (the pW columns before, and any after) scalar, clamped into the row. Rows
// outside the tensor are read clamped too.
//
// Neighbouring windows share columns (k > s), so the search runs over the
// segment's COLUMNS, one lane each: over the rows (last to first), each
// column's maximum, the first row holding it and its zero sign; then each
// window takes its kW columns' results: the maximum, and among the columns
// holding it the first tap (row, then column: the row-major order). A 16-bit
// packed word is then two adjacent loaded columns as they are, no pairing.
template <class T, class W, int V>
struct NcdhwTaps {
  using M = typename T::M;
  static constexpr int kSeg = (V - 1) * W::sW + W::kW;
  static constexpr int kVec0 = W::pW;
  static constexpr int kVecN = V * W::sW;
  static constexpr int kRows = W::kD * W::kH;
  static constexpr int kHalo = kSeg - kVecN;
  static constexpr bool kPacked = sizeof(M) == 2;
  // column lanes: the vector's columns, then the halo's (even in number where packed)
  static constexpr int kLanes = kPacked ? (kSeg + 1) / 2 * 2 : kSeg;

  POOL3D_HD static constexpr bool Halo(int s) { return s < kVec0 || s >= kVec0 + kVecN; }
  POOL3D_HD static constexpr int LaneOf(int s) {
    return !Halo(s) ? s - kVec0 : kVecN + (s < kVec0 ? s : s - kVecN);
  }

  static constexpr int kPerWord = kPacked ? 2 : 1;
  static constexpr int kWords = kLanes / kPerWord;

  // The first maximum of each of the V windows (Mode kMax: with its zero sign; kIndices without).
  template <int Mode>
  POOL3D_HD static void Search(const Launch<int32_t>& g, const M* xp, int32_t od, int32_t oh, int32_t ow0,
                               Best* best) {
    const int32_t d0 = od * W::sD - W::pD, h0 = oh * W::sH - W::pH, c0 = ow0 * W::sW - W::pW;
    int32_t fix[kSeg];  // a halo column's clamped column minus its own (0: inside the row)
#pragma unroll
    for (int s = 0; s < kSeg; ++s) fix[s] = Halo(s) ? Clamp(c0 + s, g.W) - (c0 + s) : 0;
    int32_t at_d[W::kD], tap_d[W::kD], at_h[W::kH], tap_h[W::kH];  // clamped rows: offsets, tap indices
#pragma unroll
    for (int i = 0; i < W::kD; ++i) {
      const int32_t c = W::pD > 0 ? Clamp(d0 + i, g.D) : d0 + i;
      at_d[i] = c * (g.H * g.W) + c0;
      tap_d[i] = (c - d0) * (W::kH * W::kW);
    }
#pragma unroll
    for (int i = 0; i < W::kH; ++i) {
      const int32_t c = W::pH > 0 ? Clamp(h0 + i, g.H) : h0 + i;
      at_h[i] = c * g.W;
      tap_h[i] = (c - h0) * W::kW;
    }
    uint32_t words[kRows][kWords];  // the column lanes, kPerWord a word
    int32_t base[kRows];  // the tap index of each row's first tap, from its clamped position
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int32_t at = at_d[r / W::kH] + at_h[r % W::kH];
      base[r] = tap_d[r / W::kH] + tap_h[r % W::kH];
      // one 64-bit address a row (the halo is at a small offset from it), one IMAD.WIDE from the plane's
      // (Opaque: nvcc would add the parts in 64 bits on the ALU, two instructions a row)
      const M* row = Opaque(xp) + at;
      LoadVec<uint32_t, kVecN / kPerWord>(reinterpret_cast<const uint32_t*>(row + kVec0), words[r]);
      M halo[kLanes > kVecN ? kLanes - kVecN : 1];  // read at its clamped column: no load waits for another
#pragma unroll
      for (int s = 0; s < kSeg; ++s)
        if (Halo(s)) halo[LaneOf(s) - kVecN] = LoadGlobal(Opaque(row) + (s + fix[s]));
#pragma unroll
      for (int l = kSeg; l < kLanes; ++l) halo[l - kVecN] = halo[0];  // the pad lane: any real value
#pragma unroll
      for (int w = kVecN / kPerWord; w < kWords; ++w) {
        const int l = w * kPerWord - kVecN;
        if constexpr (kPacked) {
          words[r][w] = Pack2(halo[l], halo[l + 1]);
        } else {
          words[r][w] = uint32_t(halo[l]);
        }
      }
    }
    WindowSearch<T, kLanes, Mode> search(nullptr);
#pragma unroll
    for (int r = kRows - 1; r >= 0; --r) search.Step(words[r], base[r]);
    Best col[kLanes];
    search.Finish(col);
    // Window j's tap at segment column s is col.tap + (s - j * sW) + fix[s]: within one window the -j * sW is
    // common, so each column's key col.tap + s + fix[s] (made once, shared by the windows that hold the
    // column) orders its candidates, and the smallest key among the columns holding the maximum is the first.
    int32_t key[kSeg];
#pragma unroll
    for (int s = 0; s < kSeg; ++s) key[s] = col[LaneOf(s)].tap + s + fix[s];
#pragma unroll
    for (int j = 0; j < V; ++j) {
      float m = NegativeInfinity();
      bool plus_zero = false;
#pragma unroll
      for (int tw = 0; tw < W::kW; ++tw) {
        const Best& c = col[LaneOf(j * W::sW + tw)];
        m = MaxNan(m, c.m);
        plus_zero = plus_zero || c.plus_zero;
      }
      int32_t first = INT32_MAX;
#pragma unroll
      for (int tw = 0; tw < W::kW; ++tw) {
        const int s = j * W::sW + tw;
        const int32_t k = col[LaneOf(s)].m == m ? key[s] : INT32_MAX;
        first = k < first ? k : first;
      }
      best[j].m = m;
      best[j].tap = first - j * W::sW;
      best[j].plus_zero = plus_zero;
    }
  }
};

// NDHWC: V channels (c0 .. c0+V-1) of one output position, C % V == 0; each
// tap one aligned V-channel load at its position, clamped into the tensor.
// Taps are loaded kBatch at a time (all of them where they fit).
template <class T, class W, int V>
struct NdhwcTaps {
  using M = typename T::M;
  static constexpr int kWords = sizeof(M) == 2 && V % 2 == 0 ? V / 2 : V;
  static constexpr int kPerTap = (V * int(sizeof(M)) + 3) / 4;  // registers a tap's vector takes
  static constexpr int kBatch = W::kTaps * kPerTap <= kBatchRegisters ? W::kTaps
                                                                       : kBatchRegisters / kPerTap;
  static constexpr int kBatches = (W::kTaps + kBatch - 1) / kBatch;

  template <class Search>
  POOL3D_HD static void Feed(const Launch<int32_t>& g, const M* xp, int32_t d0, int32_t h0, int32_t w0,
                             Search& search) {
    int32_t at_d[W::kD], at_h[W::kH], at_w[W::kW];  // element offsets of each clamped position
    int32_t tap_d[W::kD], tap_h[W::kH], tap_w[W::kW];  // and its tap index's part
#pragma unroll
    for (int i = 0; i < W::kD; ++i) {
      const int32_t c = W::pD > 0 ? Clamp(d0 + i, g.D) : d0 + i;
      at_d[i] = c * (g.H * g.W * g.C);
      tap_d[i] = (c - d0) * (W::kH * W::kW);
    }
#pragma unroll
    for (int i = 0; i < W::kH; ++i) {
      const int32_t c = W::pH > 0 ? Clamp(h0 + i, g.H) : h0 + i;
      at_h[i] = c * (g.W * g.C);
      tap_h[i] = (c - h0) * W::kW;
    }
#pragma unroll
    for (int i = 0; i < W::kW; ++i) {
      const int32_t c = W::pW > 0 ? Clamp(w0 + i, g.W) : w0 + i;
      at_w[i] = c * g.C;
      tap_w[i] = c - w0;
    }
#pragma unroll
    for (int b = kBatches - 1; b >= 0; --b) {
      constexpr int kLast = W::kTaps;
      const int lo = b * kBatch, hi = lo + kBatch < kLast ? lo + kBatch : kLast;
      uint32_t x[kBatch][kWords];
      int32_t t[kBatch];
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        const int tap = lo + k;
        if (tap >= hi) break;
        const int td = tap / (W::kH * W::kW), th = tap / W::kW % W::kH, tw = tap % W::kW;
        LoadWords(xp + uint32_t(at_d[td] + at_h[th] + at_w[tw]), x[k]);  // (clamped: never negative)
        t[k] = tap_d[td] + tap_h[th] + tap_w[tw];
      }
#pragma unroll
      for (int k = kBatch - 1; k >= 0; --k) {
        if (lo + k >= hi) continue;
        search.Step(x[k], t[k]);
      }
    }
  }

  // V channels as the search's words: 16-bit ones two a word as they lie in memory.
  POOL3D_HD static void LoadWords(const M* at, uint32_t* x) {
    if constexpr (sizeof(M) == 2 && V % 2 == 0) {
      LoadVec<uint32_t, kWords>(reinterpret_cast<const uint32_t*>(at), x);
    } else {
      M v[V];
      LoadVec<M, V>(at, v);
#pragma unroll
      for (int j = 0; j < V; ++j) x[j] = uint32_t(v[j]);
    }
  }
};

// The window unit: V windows of a Fixed window (one body), or one output of
// a Generic one (the shared scans of shared_kernels/window_scan.h).
template <class T, class W, int L, int V, int Mode>
struct WindowUnit {
  using M = typename T::M;
  using I = typename W::Offset;
  using U = typename std::make_unsigned<I>::type;

  POOL3D_HD static void Run(const Launch<I>& g, const Operands<M>& p, U u) {
    if constexpr (!W::kFixed) {
      RunGeneric(g, p, u);
    } else if constexpr (L == kNcdhw) {
      U c[4];
      Decode<U, 3>(g.div, u, c);
      const int32_t ow0 = int32_t(c[0]) * V, oh = int32_t(c[1]),
                    od = int32_t(c[2]), plane = int32_t(c[3]);
      const M* xp = p.x + plane * (g.D * g.H * g.W);
      const int32_t o0 = ((plane * g.Do + od) * g.Ho + oh) * g.Wo + ow0;
      const int32_t st[3] = {g.H * g.W, g.W, 1};
      const int32_t d0 = od * W::sD - W::pD, h0 = oh * W::sH - W::pH, w0 = ow0 * W::sW - W::pW;
      Body(p, o0, g.Wo - ow0, xp, st, d0, h0, w0, W::sW, [&](auto mode, Best* best, const float* target) {
        (void)target;  // the column search finds maxima; a selection is checked against them (Body)
        NcdhwTaps<T, W, V>::template Search<decltype(mode)::value>(g, xp, od, oh, ow0, best);
      }, g);
    } else {
      U c[5];
      Decode<U, 4>(g.div, u, c);
      const int32_t c0 = int32_t(c[0]) * V, ow = int32_t(c[1]),
                    oh = int32_t(c[2]), od = int32_t(c[3]), n = int32_t(c[4]);
      const M* xp = p.x + n * (g.D * g.H * g.W * g.C) + c0;
      const int32_t o0 = (((n * g.Do + od) * g.Ho + oh) * g.Wo + ow) * g.C + c0;
      const int32_t st[3] = {g.H * g.W * g.C, g.W * g.C, g.C};
      const int32_t d0 = od * W::sD - W::pD, h0 = oh * W::sH - W::pH, w0 = ow * W::sW - W::pW;
      Body(p, o0, V, xp, st, d0, h0, w0, 0, [&](auto mode, Best* best, const float* target) {
        WindowSearch<T, V, decltype(mode)::value> search(target);
        NdhwcTaps<T, W, V>::Feed(g, xp, d0, h0, w0, search);
        search.Finish(best);
      }, g);
    }
  }

  // Searches the unit's V windows and writes what the mode asks: search(mode,
  // best, target) fills best[] for a mode (a std::integral_constant): kMax,
  // kIndices, or kSelect (the first tap equal to target[j]; a search that
  // answers kSelect with the first maximum instead is checked against the
  // targets here). Lane j's window starts at (d0, h0, w0 + j * lane_w) in the
  // input at xp + (lane_w ? 0 : j) (strides st): only the rare paths read it.
  // The outputs at o0 are `real` windows (fewer than V only at the end of a
  // ragged row: Fixed's kRaggedRows, whose outputs go element by element).
  template <class Search>
  POOL3D_HD static void Body(const Operands<M>& p, int32_t o0, int32_t real, const M* xp, const int32_t* st,
                             int32_t d0, int32_t h0, int32_t w0, int32_t lane_w, Search&& search,
                             const Launch<int32_t>& g) {
    Best best[V];
    if constexpr (Mode == kSelect) {
      float target[V];
      LoadOutputs(p.y_in + o0, real, target);
      int16_t idx[V];
      if constexpr (L == kNcdhw) {
        search(std::integral_constant<int, kIndices>{}, best, target);
#pragma unroll
        for (int j = 0; j < V; ++j) {
          if (target[j] != target[j]) {
            idx[j] = -1;  // a NaN equals nothing
          } else if (!HeldNan(best[j]) && best[j].m == target[j]) {
            idx[j] = int16_t(best[j].tap);  // the first maximum is the first tap equal to it
          } else if (j < real) {  // a target that is not the window's maximum
            idx[j] = int16_t(WindowFirstEqual<T>(g, xp + (lane_w ? 0 : j), st, d0, h0, w0 + j * lane_w,
                                                 Narrow<T>(target[j])));  // model: rare
          } else {
            idx[j] = -1;  // past the row: not stored
          }
        }
      } else {
        search(std::integral_constant<int, kSelect>{}, best, target);
#pragma unroll
        for (int j = 0; j < V; ++j) idx[j] = int16_t(best[j].tap);
      }
      StoreOutputs(p.idx + o0, real, idx);
    } else {
      search(std::integral_constant<int, Mode>{}, best, nullptr);
      int16_t idx[V];
#pragma unroll
      for (int j = 0; j < V; ++j) idx[j] = int16_t(HeldNan(best[j]) ? -1 : best[j].tap);
      if constexpr (Mode == kMax) {
        M y[V];
#pragma unroll
        for (int j = 0; j < V; ++j) {
          if (HeldNan(best[j])) {  // the window's first NaN, with its own bits (past the row: not stored)
            M m = M(0);
            int32_t t;
            if (j < real) WindowFirstMax<T>(g, xp + (lane_w ? 0 : j), st, d0, h0, w0 + j * lane_w, &m, &t);  // model: rare
            y[j] = m;
          } else if (best[j].m == 0.0f) {  // +0 where a tap holds +0, else -0
            y[j] = best[j].plus_zero ? M(0) : M(M(1) << (8 * sizeof(M) - 1));
          } else {
            y[j] = Narrow<T>(best[j].m);
          }
        }
        if (p.y != nullptr) StoreOutputs(p.y + o0, real, y);
      }
      if (p.idx != nullptr) StoreOutputs(p.idx + o0, real, idx);
    }
  }

  // Ragged NCDHW rows (Fixed's kRaggedRows): outputs element by element, the `real` first of V (no vector
  // fits rows that are no multiple of it); elsewhere one vector access.
  static constexpr bool kElementwise = L == kNcdhw && W::kRaggedRows;

  template <class E>
  POOL3D_HD static void StoreOutputs(E* out, int32_t real, const E* v) {
    if constexpr (kElementwise) {
#pragma unroll
      for (int j = 0; j < V; ++j)
        if (j < real) out[j] = v[j];
    } else {
      (void)real;
      StoreVec<E, V>(out, v);
    }
  }

  // The given outputs of V windows as search targets (past the row: the row's last, not stored).
  POOL3D_HD static void LoadOutputs(const M* y, int32_t real, float* target) {
    if constexpr (kElementwise) {
#pragma unroll
      for (int j = 0; j < V; ++j) target[j] = Wide<T>(y[j < real ? j : real - 1]);
    } else {
      (void)real;
      LoadTargets<T, V>(y, target);
    }
  }

  // Generic: V channels of one output position (units in output layout order, the channels' block
  // innermost in NDHWC, W in NCDHW), by the shared scans' rules, the loads of every lane batched
  // (generic_units.h).
  POOL3D_HD static void RunGeneric(const Launch<I>& g, const Operands<M>& p, U u) {
    U c[5];
    Decode<U, 4>(g.div, u, c);
    I n, cb, od, oh, ow;
    if (g.out_cl) {  // channels-last output: (channel block, w, h, d, n)
      cb = I(c[0]); ow = I(c[1]); oh = I(c[2]); od = I(c[3]); n = I(c[4]);
    } else {  // (w, h, d, channel block, n)
      ow = I(c[0]); oh = I(c[1]); od = I(c[2]); cb = I(c[3]); n = I(c[4]);
    }
    const I c0 = cb * I(V);
    I xo[V], yo[V];
    LaneOffsets<I, V>(n * g.xs[0], c0, g.C, g.xs[1], xo);
    LaneOffsets<I, V>(n * g.ys[0] + od * g.ys[2] + oh * g.ys[3] + ow * g.ys[4], c0, g.C, g.ys[1], yo);
    const M* xl[V];
#pragma unroll
    for (int j = 0; j < V; ++j) xl[j] = Opaque(p.x + xo[j]);
    const I d0 = od * g.sD - g.pD, h0 = oh * g.sH - g.pH, w0 = ow * g.sW - g.pW;
    LaneSearch<T, V, Mode> s;
    if constexpr (Mode == kSelect) {
#pragma unroll
      for (int j = 0; j < V; ++j) s.want[j] = Wide<T>(p.y_in[yo[j]]);
    }
    SearchLanes<T, V>(g, xl, g.xs + 2, d0, h0, w0, s);
    const I lanes = g.C - c0;  // lanes holding a channel (more than V: all)
#pragma unroll
    for (int j = 0; j < V; ++j) {
      if (j >= lanes) break;
      if constexpr (Mode == kSelect) {
        p.idx[yo[j]] = int16_t(s.tap[j]);
      } else {
        const bool nan = s.m[j] != s.m[j];
        if (p.idx != nullptr) p.idx[yo[j]] = int16_t(nan ? -1 : s.tap[j]);
        if constexpr (Mode == kMax) {
          if (p.y != nullptr) {
            M m = s.Maximum(j);
            if (nan) {  // the window's first NaN, with its own bits
              int32_t t;
              WindowFirstMax<T>(g, xl[j], g.xs + 2, d0, h0, w0, &m, &t);  // model: rare
            }
            p.y[yo[j]] = m;
          }
        }
      }
    }
  }
};

}  // namespace gpu
}  // namespace pool3d

#endif  // POOL3D_GPU_CUDA_WINDOW_UNITS_H_
