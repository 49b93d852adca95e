// The gather kernel's unit: the gradient from indices, each dx element
// written once, summed in f32 in ascending window order (no atomics).
#ifndef POOL3D_GPU_CUDA_GATHER_UNITS_H_
#define POOL3D_GPU_CUDA_GATHER_UNITS_H_

#include <cstdint>
#include <type_traits>

#include "fused_units.h"
#include "generic_units.h"
#include "unit_common.h"

namespace pool3d {
namespace gpu {

// ---------------------------------------------------------------------------
// One axis of an overlapping-window gather block (GatherUnit): P positions
// from i0 (a multiple of the stride S) are covered by the windows
// i0 / S + e, e in [kLo, kHi]; Tap(r, e) is position r's tap in window e, or
// -1 where that window does not cover it.
template <int K, int S, int Pad, int P>
struct GatherAxis {
  static constexpr int kLo = CeilDiv(Pad - K + 1, S);
  static constexpr int kHi = FloorDiv(P - 1 + Pad, S);
  static constexpr int kN = kHi - kLo + 1;
  POOL3D_HD static constexpr int Tap(int r, int e) {
    return r + Pad - e * S >= 0 && r + Pad - e * S < K ? r + Pad - e * S : -1;
  }
};

// The block of a Fixed window W in layout L with V lanes: positions per axis
// (NCDHW: V along W) and the three axes.
template <class W, int L, int V>
struct GatherBlockOf {
  static constexpr int kPD = GatherBlock(W::kD, W::sD), kPH = GatherBlock(W::kH, W::sH);
  static constexpr int kPW = L == kNcdhw ? V : GatherBlock(W::kW, W::sW);
  using AD = GatherAxis<W::kD, W::sD, W::pD, kPD>;
  using AH = GatherAxis<W::kH, W::sH, W::pH, kPH>;
  using AW = GatherAxis<W::kW, W::sW, W::pW, kPW>;
};

// ---------------------------------------------------------------------------
// The gather kernel's unit: the gradient from indices.

template <class T, class W, int L, int V>
struct GatherUnit {
  using M = typename T::M;
  using I = typename W::Offset;
  using U = typename std::make_unsigned<I>::type;

  POOL3D_HD static void Run(const Launch<I>& g, const Operands<M>& p, U u) {
    if constexpr (!W::kFixed) {
      RunGeneric(g, p, u);
    } else if constexpr (!W::kOverlap) {
      RunBlocks(g, p, u);
    } else if constexpr (L == kNcdhw) {
      RunOverlapNcdhw(g, p, u);
    } else {
      RunOverlapNdhwc(g, p, u);
    }
  }

  // Non-overlapping windows: a unit is V windows; their indices and
  // gradients read once, their whole block written.
  POOL3D_HD static void RunBlocks(const Launch<int32_t>& g,
                                  const Operands<M>& p, U u) {
    int16_t idx[V];
    int32_t tap[V];
    M gv[V];
    if constexpr (L == kNcdhw) {
      U c[4];
      Decode<U, 3>(g.div, u, c);
      const int32_t ow0 = int32_t(c[0]) * V, oh = int32_t(c[1]),
                    od = int32_t(c[2]), plane = int32_t(c[3]);
      const int32_t o0 = ((plane * g.Do + od) * g.Ho + oh) * g.Wo + ow0;
      LoadVec<int16_t, V>(p.idx_in + o0, idx);
      LoadGradient<T, V>(p.go + o0, gv);
#pragma unroll
      for (int j = 0; j < V; ++j) tap[j] = idx[j];
      WriteBlockNcdhw<T, W, V>(g, p.dx + plane * (g.D * g.H * g.W), od, oh,
                               ow0, tap, gv);
    } else {
      U c[5];
      Decode<U, 4>(g.div, u, c);
      const int32_t c0 = int32_t(c[0]) * V, ow = int32_t(c[1]),
                    oh = int32_t(c[2]), od = int32_t(c[3]), n = int32_t(c[4]);
      const int32_t o0 = (((n * g.Do + od) * g.Ho + oh) * g.Wo + ow) * g.C + c0;
      LoadVec<int16_t, V>(p.idx_in + o0, idx);
      LoadGradient<T, V>(p.go + o0, gv);
#pragma unroll
      for (int j = 0; j < V; ++j) tap[j] = idx[j];
      WriteBlockNdhwc<T, W, V>(g, p.dx + n * (g.D * g.H * g.W * g.C) + c0, od,
                               oh, ow, tap, gv);
    }
  }

  // The candidate windows of position q along one axis (kernel k, stride s,
  // padding pad, n_out windows): o = q / s - (kN - 1) + c for c in [0, kN)
  // (ascending), real where 0 <= o < n_out and q - o * s < k.
  template <int K, int S>
  POOL3D_HD static constexpr int Candidates() { return (K + S - 1) / S; }

  // A tap no int16 index equals: the index of a window outside the tensor.
  static constexpr int32_t kNoTap = -(1 << 20);

  // Overlapping windows: a unit is a block of input positions, P per axis
  // (GatherBlock: 2 along an axis with a window of stride 2, so that the block starts at
  // a multiple of the stride; NCDHW takes V positions along W). Which windows
  // cover each position, and at which tap, then depends only on the
  // position's place in the block (its parity): compile-time constants. The
  // block's windows are read once each, in ascending (od, oh, ow) order, and
  // each adds to the positions it covers: every position sums its windows in
  // that order, as the CPU kernels do. Windows outside the tensor read a
  // clamped real one and count for nothing; no branch but the final stores.
  POOL3D_HD static int32_t Clamp(int32_t o, int32_t n) { return o < 0 ? 0 : o >= n ? n - 1 : o; }

  POOL3D_HD static void RunOverlapNcdhw(const Launch<int32_t>& g,
                                        const Operands<M>& p, U u) {
    using B = GatherBlockOf<W, L, V>;
    using AD = typename B::AD;
    using AH = typename B::AH;
    using AW = typename B::AW;
    constexpr int kPD = B::kPD, kPH = B::kPH, kPW = B::kPW;
    U c[4];
    Decode<U, 3>(g.div, u, c);
    const int32_t w0 = int32_t(c[0]) * kPW, h0 = int32_t(c[1]) * kPH,
                  d0 = int32_t(c[2]) * kPD, plane = int32_t(c[3]);
    const int32_t obd = d0 / W::sD, obh = h0 / W::sH, obw = w0 / W::sW;
    const int16_t* ip = p.idx_in + plane * (g.Do * g.Ho * g.Wo);
    const M* gp = p.go + plane * (g.Do * g.Ho * g.Wo);
    // The block's windows along W: the kVecW from obw on are one aligned vector of indices and one of
    // gradients in each row of windows (inside the row: launch_plan.h's VectorWidth), the rest single
    // elements at their clamped column. Where rows of windows are ragged (Fixed's kRaggedRows: no row of
    // windows starts aligned, and the row ends one window short of the last block's vector) the first
    // kVecW - 1 of them are single elements at fixed offsets from one address, the rest clamped.
    constexpr int kVecW = V / W::sW;
    constexpr int kInner = W::kRaggedRows ? kVecW - 1 : kVecW;  // windows read without clamping
    constexpr int kVec0 = -AW::kLo;  // the first vector window's place among the kN
    static_assert(AW::kLo <= 0 && kVec0 + kVecW <= AW::kN, "the block's windows hold the aligned vector");
    int32_t wcol[AW::kN];
    bool wreal[AW::kN];
#pragma unroll
    for (int e = 0; e < AW::kN; ++e) {
      const int32_t ow = obw + AW::kLo + e;
      wreal[e] = ow >= 0 && ow < g.Wo;
      wcol[e] = Clamp(ow, g.Wo);
    }
    constexpr int kRows = AD::kN * AH::kN;
    int32_t wi[kRows][AW::kN];
    float wg[kRows][AW::kN];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {  // every load first
      const int32_t od = obd + AD::kLo + r / AH::kN, oh = obh + AH::kLo + r % AH::kN;
      const bool real = od >= 0 && od < g.Do && oh >= 0 && oh < g.Ho;
      const int32_t row = (Clamp(od, g.Do) * g.Ho + Clamp(oh, g.Ho)) * g.Wo;
      // (each row's own pointer: one instruction an address, where nvcc would add plane, row and column in
      // 64 bits for every load)
      const int16_t* irow = Opaque(ip + row);
      const M* grow = Opaque(gp + row);
      int16_t iv[kVecW];
      M gv[kVecW];
      if constexpr (W::kRaggedRows) {
#pragma unroll
        for (int i = 0; i < kInner; ++i) {
          iv[i] = LoadGlobal(irow + obw + i);
          gv[i] = LoadGlobal(grow + obw + i);
        }
      } else {
        LoadVec<int16_t, kVecW>(irow + obw, iv);
        LoadVec<M, kVecW>(grow + obw, gv);
      }
#pragma unroll
      for (int e = 0; e < AW::kN; ++e) {
        const bool inner = e >= kVec0 && e < kVec0 + kInner;
        const int32_t i = inner ? int32_t(iv[inner ? e - kVec0 : 0]) : int32_t(LoadGlobal(irow + wcol[e]));
        // a window outside the tensor names no tap: one select here, none per position
        wi[r][e] = real && (inner || wreal[e]) ? i : kNoTap;
        wg[r][e] = Wide<T>(inner ? gv[inner ? e - kVec0 : 0] : LoadGlobal(grow + wcol[e]));
      }
    }
    float acc[kPD][kPH][kPW];
#pragma unroll
    for (int rd = 0; rd < kPD; ++rd)
#pragma unroll
      for (int rh = 0; rh < kPH; ++rh)
#pragma unroll
        for (int rw = 0; rw < kPW; ++rw) acc[rd][rh][rw] = 0.0f;
#pragma unroll
    for (int ed = 0; ed < AD::kN; ++ed)
#pragma unroll
      for (int eh = 0; eh < AH::kN; ++eh)
#pragma unroll
        for (int ew = 0; ew < AW::kN; ++ew) {
          const int r = ed * AH::kN + eh;
#pragma unroll
          for (int rd = 0; rd < kPD; ++rd)
#pragma unroll
            for (int rh = 0; rh < kPH; ++rh)
#pragma unroll
              for (int rw = 0; rw < kPW; ++rw) {
                const int td = AD::Tap(rd, AD::kLo + ed), th = AH::Tap(rh, AH::kLo + eh),
                          tw = AW::Tap(rw, AW::kLo + ew);
                if (td >= 0 && th >= 0 && tw >= 0) {  // compile-time
                  if (wi[r][ew] == (td * W::kH + th) * W::kW + tw) acc[rd][rh][rw] += wg[r][ew];
                }
              }
        }
    M* dxp = p.dx + plane * (g.D * g.H * g.W);
#pragma unroll
    for (int rd = 0; rd < kPD; ++rd)
#pragma unroll
      for (int rh = 0; rh < kPH; ++rh) {
        if (d0 + rd >= g.D || h0 + rh >= g.H) continue;  // the block's overhang
        uint32_t out[WordsOf<T>(kPW)];
        NarrowWords<T, kPW>(acc[rd][rh], out);
        StoreVec<uint32_t, WordsOf<T>(kPW)>(reinterpret_cast<uint32_t*>(dxp + ((d0 + rd) * g.H + h0 + rh) * g.W + w0),
                                           out);
      }
  }

  // NDHWC: a unit is a block of 2 x 2 x 2 input positions (GatherBlock) by V channels. Its
  // windows' indices and gradients are read in kParts parts of V / kParts channels, and the windows in
  // batches of kBatch (every load of a batch first), so that they and the part's sums fit the registers;
  // a part's results wait, rounded and packed, for the others, and each position's V channels are
  // written as one vector.
  POOL3D_HD static void RunOverlapNdhwc(const Launch<int32_t>& g,
                                        const Operands<M>& p, U u) {
    using B = GatherBlockOf<W, L, V>;
    using AD = typename B::AD;
    using AH = typename B::AH;
    using AW = typename B::AW;
    constexpr int kPD = B::kPD, kPH = B::kPH, kPW = B::kPW;
    constexpr int kWindows = AD::kN * AH::kN * AW::kN, kPos = kPD * kPH * kPW;
    constexpr int kParts = sizeof(M) == 2 && V >= 8 && kPos > 1 ? 2 : 1, P = V / kParts;
    constexpr int kPerWindow = (P * 2 + P * int(sizeof(M)) + 3) / 4;  // registers a window's data takes
    // (several batches: the windows of one D offset each, in a loop whose body is one batch, so that
    // ptxas hoists no batch's loads into the registers of the batch before)
    constexpr int kBatch = kWindows * kPerWindow <= 56 ? kWindows : AH::kN * AW::kN;
    U c[5];
    Decode<U, 4>(g.div, u, c);
    const int32_t c0 = int32_t(c[0]) * V, w0 = int32_t(c[1]) * kPW,
                  h0 = int32_t(c[2]) * kPH, d0 = int32_t(c[3]) * kPD,
                  n = int32_t(c[4]);
    const int32_t obd = d0 / W::sD, obh = h0 / W::sH, obw = w0 / W::sW;
    const int32_t base = n * (g.Do * g.Ho * g.Wo * g.C) + c0;
    uint32_t out[kPos][WordsOf<T>(V)];
    // A window's element offset (at its clamped position) and whether it is real.
    auto window = [&](int k, bool* real) {
      const int32_t od = obd + AD::kLo + k / (AH::kN * AW::kN), oh = obh + AH::kLo + k / AW::kN % AH::kN,
                    ow = obw + AW::kLo + k % AW::kN;
      *real = od >= 0 && od < g.Do && oh >= 0 && oh < g.Ho && ow >= 0 && ow < g.Wo;
      return base + ((Clamp(od, g.Do) * g.Ho + Clamp(oh, g.Ho)) * g.Wo + Clamp(ow, g.Wo)) * g.C;
    };
    // One batch: every window's offset once, for all the parts.
    constexpr int kKept = kBatch == kWindows ? kWindows : 1;
    int32_t kept_at[kKept];
    bool kept_real[kKept];
    if constexpr (kBatch == kWindows) {
#pragma unroll
      for (int k = 0; k < kWindows; ++k) kept_at[k] = window(k, &kept_real[k]);
    }
#pragma unroll
    for (int part = 0; part < kParts; ++part) {
      float acc[kPos][P];
#pragma unroll
      for (int q = 0; q < kPos; ++q)
#pragma unroll
        for (int j = 0; j < P; ++j) acc[q][j] = 0.0f;
      // A batch of windows: every load first, then their sums in ascending window order.
      auto batch = [&](int k0, auto first_window) {
        constexpr int kFirst = decltype(first_window)::value;  // -1: k0 known only at run time
        int16_t wi[kBatch][P];
        M wm[kBatch][P];
        bool real[kBatch];
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
          int32_t at;
          if constexpr (kBatch == kWindows) {
            at = kept_at[b];
            real[b] = kept_real[b];
          } else {
            at = window(k0 + b, &real[b]);
          }
          at += part * P;
          LoadVec<int16_t, P>(p.idx_in + at, wi[b]);
          LoadVec<M, P>(p.go + at, wm[b]);
        }
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
          const int k = kFirst >= 0 ? kFirst + b : k0 + b;
          const int ed = k / (AH::kN * AW::kN), eh = k / AW::kN % AH::kN, ew = k % AW::kN;
          float wg[P];
#pragma unroll
          for (int j = 0; j < P; ++j) wg[j] = Wide<T>(wm[b][j]);
#pragma unroll
          for (int q = 0; q < kPos; ++q) {
            const int rd = q / (kPH * kPW), rh = q / kPW % kPH, rw = q % kPW;
            const int td = AD::Tap(rd, AD::kLo + ed), th = AH::Tap(rh, AH::kLo + eh),
                      tw = AW::Tap(rw, AW::kLo + ew);
            // a window outside the tensor, or not covering the position, names no tap: one select
            const int32_t t = real[b] && td >= 0 && th >= 0 && tw >= 0 ? (td * W::kH + th) * W::kW + tw : kNoTap;
#pragma unroll
            for (int j = 0; j < P; ++j)
              if (int32_t(wi[b][j]) == t) acc[q][j] += wg[j];
          }
        }
      };
      if constexpr (kBatch == kWindows) {
        batch(0, std::integral_constant<int, 0>{});
      } else {
        static_assert(kWindows % kBatch == 0, "whole batches of windows");
#pragma unroll 1
        for (int k0 = 0; k0 < kWindows; k0 += kBatch) batch(k0, std::integral_constant<int, -1>{});
      }
#pragma unroll
      for (int q = 0; q < kPos; ++q) NarrowWords<T, P>(acc[q], out[q] + part * WordsOf<T>(P));
    }
    M* dxp = p.dx + n * (g.D * g.H * g.W * g.C) + c0;
#pragma unroll
    for (int q = 0; q < kPos; ++q) {
      const int rd = q / (kPH * kPW), rh = q / kPW % kPH, rw = q % kPW;
      if (d0 + rd >= g.D || h0 + rh >= g.H || w0 + rw >= g.W) continue;  // the block's overhang
      StoreVec<uint32_t, WordsOf<T>(V)>(
          reinterpret_cast<uint32_t*>(dxp + (((d0 + rd) * g.H + h0 + rh) * g.W + w0 + rw) * g.C), out[q]);
    }
  }

  // Generic: V channels of one input position (units in input layout order, the channels' block
  // innermost in NDHWC, W in NCDHW): the windows covering it (division-free: the strides' FastDiv), in
  // ascending order, the loads of every lane batched (generic_units.h).
  POOL3D_HD static void RunGeneric(const Launch<I>& g, const Operands<M>& p, U u) {
    U c[5];
    Decode<U, 4>(g.div, u, c);
    I n, cb, d, h, w;
    if (g.in_cl) {  // channels-last input: (channel block, w, h, d, n)
      cb = I(c[0]); w = I(c[1]); h = I(c[2]); d = I(c[3]); n = I(c[4]);
    } else {
      w = I(c[0]); h = I(c[1]); d = I(c[2]); cb = I(c[3]); n = I(c[4]);
    }
    const I c0 = cb * I(V);
    I yo[V], xo[V];
    LaneOffsets<I, V>(n * g.ys[0], c0, g.C, g.ys[1], yo);
    LaneOffsets<I, V>(n * g.xs[0] + d * g.xs[2] + h * g.xs[3] + w * g.xs[4], c0, g.C, g.xs[1], xo);
    float acc[V];
    GenericGather<T, V, I, U>(g, p, yo, d, h, w, acc);
    const I lanes = g.C - c0;  // lanes holding a channel (more than V: all)
#pragma unroll
    for (int j = 0; j < V; ++j) {
      if (j >= lanes) break;
      p.dx[xo[j]] = T::FromF32(acc[j]);
    }
  }
};
}  // namespace gpu
}  // namespace pool3d

#endif  // POOL3D_GPU_CUDA_GATHER_UNITS_H_
