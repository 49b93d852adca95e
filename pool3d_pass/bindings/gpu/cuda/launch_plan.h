// Which kernels a call runs, and how they are launched: host code only.
//
// PlanCall decides, for one validated call (shared_kernels/geometry.h's Geom):
// - the window class: a specialised Fixed<...> window (units.h) where the
//   call's window is one of kClasses and both tensors share one layout, else
//   the Generic kernels;
// - the vector width V: a Fixed class's 128-bit path where the extents and
//   every pointer allow it, else the Generic (scalar) path;
// - the kernels: backward and backward_from_input on non-overlapping windows
//   are ONE fused kernel (no indices in memory); elsewhere a window kernel
//   writes int16 indices to scratch and the gather reads them;
// - the launches: tensors are cut into chunks of whole planes (NCDHW Fixed)
//   or batch items (the rest) so that every offset inside a launch fits
//   int32 and every unit number fits uint32 with a grid stride added; a
//   plane or batch item that cannot fit takes the Generic kernels with int64
//   offsets (no 64-bit division: fast_div.h), as one launch;
// - blocks and threads, within CUDA's grid limits.
// kernels.cu runs the plan on a stream; the host test
// (tests/bindings/gpu/host/cuda_elements_host.cc) runs the same plan on the CPU,
// each launch's grid-stride loop thread by thread, so the loop bounds, grid
// sizes, chunk offsets and the offset-width decision are tested here.
#ifndef POOL3D_GPU_CUDA_LAUNCH_PLAN_H_
#define POOL3D_GPU_CUDA_LAUNCH_PLAN_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "fast_div.h"
#include "shared_kernels/calls.h"
#include "shared_kernels/geometry.h"
#include "units.h"

namespace pool3d {
namespace gpu {

enum class Kernel : int {
  kWindowMax = 0,     // x -> y and/or indices
  kWindowSelect = 1,  // x, y -> indices
  kGather = 2,        // g, indices -> dx
  kFusedFromInput = 3,   // x, g -> dx (non-overlapping windows)
  kFusedFromOutput = 4,  // x, y, g -> dx (non-overlapping windows)
  kWindowIndices = 5,    // x -> indices (no y: backward_from_input's first step)
};


// The specialised window classes (kernel, stride, padding per axis D, H, W):
// 2x2x2 stride 2 and C3D's (1,2,2) (non-overlapping), 3x3x3 stride 2 pad 1,
// 3x3x3 stride 1 pad 1, the 2-D 3x3 stride 2 pad 1 as (1,3,3), and 3x3x3
// stride 2 and 2x2x2 stride 1 without padding (PyTorch's MaxPool3d(3, 2) and
// MaxPool3d(2, 1): NCDHW rows of them end in part of a unit, Fixed's
// kRaggedRows).
enum class WindowClass : int {
  kGeneric = 0, kK2S2 = 1, kK122 = 2, kK3S2P1 = 3, kK3S1P1 = 4, kK133S2P1 = 5, kK3S2 = 6, kK2S1 = 7,
};
struct ClassWindow {
  WindowClass cls;
  int k[3], s[3], p[3];
};
constexpr ClassWindow kClasses[] = {
    {WindowClass::kK2S2, {2, 2, 2}, {2, 2, 2}, {0, 0, 0}},
    {WindowClass::kK122, {1, 2, 2}, {1, 2, 2}, {0, 0, 0}},
    {WindowClass::kK3S2P1, {3, 3, 3}, {2, 2, 2}, {1, 1, 1}},
    {WindowClass::kK3S1P1, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}},
    {WindowClass::kK133S2P1, {1, 3, 3}, {1, 2, 2}, {0, 1, 1}},
    {WindowClass::kK3S2, {3, 3, 3}, {2, 2, 2}, {0, 0, 0}},
    {WindowClass::kK2S1, {2, 2, 2}, {1, 1, 1}, {0, 0, 0}},
};

// Fixed's kRaggedRows for a call's window (the classes' NCDHW units that read
// and write outputs element by element).
inline bool RaggedRows(const Geom& g) {
  return FloorDiv(int(2 * g.pW - g.kW), int(g.sW)) + 1 != 0;
}

// Offsets inside one launch stay below this (int32, with room for a grid
// stride on top of the last unit number in uint32).
constexpr int64_t kNarrowLimit = int64_t{1} << 31;
constexpr int64_t kMaxBlocks = int64_t{1} << 16;

// What the handler knows beyond the Geom: the element size, whether every
// pointer the call reads or writes is 16-byte aligned, the threads per block
// and whether vector paths are allowed (POOL3D_CUDA_THREADS,
// POOL3D_CUDA_VECTOR=0: kernels.cu reads them).
struct PlanOptions {
  int elem_bytes = 4;
  bool aligned = true;
  int threads = 256;
  bool vector = true;
  // For the host test: chunk below this many elements, cap the grid at
  // max_blocks, and take int64 offsets whatever the size.
  int64_t narrow_limit = kNarrowLimit;
  int64_t max_blocks = kMaxBlocks;
  bool wide = false;
};

struct Step {
  Kernel kernel = Kernel::kWindowMax;
  WindowClass cls = WindowClass::kGeneric;
  int layout = kStrided;  // kNcdhw / kNdhwc for Fixed classes
  int V = 1;
  bool wide = false;      // Generic<int64_t>
  int64_t outer = 0;            // planes (NCDHW Fixed) or batch items
  int64_t per_chunk = 0;        // outer items per launch
  int64_t in_per_outer = 0, out_per_outer = 0;  // elements
  int64_t units_per_outer = 0;
  int threads = 256;
  int64_t max_blocks = kMaxBlocks;

  int64_t Chunks() const { return per_chunk == 0 ? 0 : (outer + per_chunk - 1) / per_chunk; }
  int64_t ChunkOuter(int64_t c) const {
    return std::min(per_chunk, outer - c * per_chunk);
  }
  int64_t Blocks(int64_t units) const {
    return std::min<int64_t>((units + threads - 1) / threads, max_blocks);
  }
};

struct CallPlan {
  Step steps[2];
  int n = 0;
  size_t scratch_bytes = 0;  // int16 indices between steps[0] and steps[1]
};

inline WindowClass ClassOf(const Geom& g) {
  for (const ClassWindow& c : kClasses)
    if (g.kD == c.k[0] && g.kH == c.k[1] && g.kW == c.k[2] &&
        g.sD == c.s[0] && g.sH == c.s[1] && g.sW == c.s[2] &&
        g.pD == c.p[0] && g.pH == c.p[1] && g.pW == c.p[2])
      return c.cls;
  return WindowClass::kGeneric;
}

inline bool Overlapping(const Geom& g) {
  return g.sD < g.kD || g.sH < g.kH || g.sW < g.kW;
}

// The channels a Generic unit works on: kGenericLanes, one with int64
// offsets (planes of 2^31 elements or more, where lanes' 64-bit offsets would
// not fit the registers).
inline constexpr int GenericLanes(bool wide) { return wide ? 1 : kGenericLanes; }

// Blocks of `per` covering n.
inline int64_t Blocks(int64_t n, int64_t per) { return (n + per - 1) / per; }

// Whether NCDHW units of `kernel` read two vectors a row (window kernels of
// overlapping windows).
inline constexpr bool WideWindows(Kernel kernel, bool overlap) {
  return overlap && (kernel == Kernel::kWindowMax || kernel == Kernel::kWindowSelect ||
                     kernel == Kernel::kWindowIndices);
}

// Whether `kernel` has a one-lane (V = 1) Fixed unit for non-overlapping
// windows: where no 128-bit vector fits (C3D's pools in PyTorch's layout,
// rows of 28 or 56 bf16; a 3-channel input), these still run unrolled, every
// load of a unit first, instead of the Generic kernels.
inline constexpr bool ScalarUnits(Kernel kernel, bool overlap) {
  return !overlap && (kernel == Kernel::kWindowMax || kernel == Kernel::kGather ||
                      kernel == Kernel::kFusedFromInput || kernel == Kernel::kFusedFromOutput);
}

// The one-lane width (kScalarWidth) where ScalarUnits applies and the
// accesses align: NCDHW, a window's kW columns one access (rows of an even
// number of elements, each row covered by whole windows); NDHWC, single
// elements. Else 1 (the Generic kernels).
constexpr int kScalarWidth = -1;
inline int ScalarWidth(const Geom& g, Kernel kernel, int elem_bytes) {
  if (!ScalarUnits(kernel, Overlapping(g))) return 1;
  if (g.in_cl) return kScalarWidth;
  const int64_t bytes = g.kW * elem_bytes;  // a window's columns in one row
  if (bytes != 4 && bytes != 8 && bytes != 16) return 1;
  if (g.W != g.Wo * g.kW || (g.W * elem_bytes) % bytes != 0) return 1;
  return kScalarWidth;
}

// Whether NDHWC overlapping windows of 16-bit elements take units of half a
// 128-bit vector (4 channels, 64-bit accesses) where C is a multiple of 4 but
// not 8 (C = 12, 20, ...): those rows would otherwise run the Generic kernels.
inline bool HalfVectors(const Geom& g, int elem_bytes) {
  return g.in_cl && elem_bytes == 2 && Overlapping(g) && g.C % (8 / elem_bytes) == 0;
}

// The vector width of `kernel` for a Fixed class, or 1 where the extents do
// not allow the 128-bit path nor the one-lane one (then the Generic kernels
// run); kScalarWidth: the one-lane Fixed unit (V = 1).
inline int VectorWidth(const Geom& g, Kernel kernel, int elem_bytes) {
  const int lanes = 16 / elem_bytes;  // elements in 128 bits
  if (g.in_cl) {
    if (g.C % lanes == 0) return lanes;
    return HalfVectors(g, elem_bytes) ? lanes / 2 : ScalarWidth(g, kernel, elem_bytes);
  }
  // NCDHW: rows must start 16-byte aligned.
  if ((g.W * elem_bytes) % 16 != 0) return ScalarWidth(g, kernel, elem_bytes);
  const bool overlap = Overlapping(g);
  if (overlap && RaggedRows(g)) {  // outputs element by element (window_units.h, gather_units.h)
    if (kernel == Kernel::kGather) return g.W % lanes == 0 && lanes % g.sW == 0 ? lanes : 1;
    // two vectors of columns a unit (2 V windows), the last unit of a row inside it: its vectors start at
    // ow0 * sW with ow0 = (units a row - 1) * 2 V
    if (lanes % g.sW != 0) return 1;
    const int64_t V2 = 2 * (lanes / g.sW);
    return Blocks(g.Wo, V2) * V2 * g.sW <= g.W ? int(V2) : 1;
  }
  if (kernel == Kernel::kGather && overlap) {  // and lanes / sW windows' indices one vector
    return g.W % lanes == 0 && lanes % g.sW == 0 && g.Wo % (lanes / g.sW) == 0 &&
                   g.W <= g.Wo * g.sW
               ? lanes
               : 1;
  }
  // V outputs (windows) per unit: their input columns are one vector, inside
  // the row for every unit (window_units.h reads it unchecked). Overlapping
  // window kernels take two vectors a row where the row allows (WideWindows:
  // neighbouring windows share columns, so the more a unit holds, the fewer
  // columns it reads and searches twice).
  if (lanes % g.sW != 0) return 1;
  const int V = lanes / int(g.sW);
  if (g.Wo % V != 0) return 1;
  if (!overlap && g.W != g.Wo * g.kW) return 1;  // blocks cover each row
  if (g.Wo * g.sW > g.W) return 1;
  if (WideWindows(kernel, overlap) && g.Wo % (2 * V) == 0) return 2 * V;
  return V;
}

// Whether the Generic kernels select and write the gradient of a call in one
// pass (FusedUnit): windows that tile the input, k = s without padding (the
// fused unit owns its block, and the rows no window covers after the last).
inline bool Fusible(const Geom& g) {
  return g.kD == g.sD && g.kH == g.sH && g.kW == g.sW && g.pD == 0 && g.pH == 0 && g.pW == 0;
}

inline int64_t Product(int64_t a, int64_t b, int64_t c) { return a * b * c; }

// One step: class, width, chunks.
inline Step PlanStep(const Geom& g, Kernel kernel, const PlanOptions& o) {
  Step s;
  s.kernel = kernel;
  s.threads = o.threads;
  s.max_blocks = o.max_blocks;
  const int64_t in_sp = Product(g.D, g.H, g.W), out_sp = Product(g.Do, g.Ho, g.Wo);
  WindowClass cls = g.in_cl == g.out_cl && o.vector && o.aligned ? ClassOf(g)
                                                                  : WindowClass::kGeneric;
  int V = cls == WindowClass::kGeneric ? 1 : VectorWidth(g, kernel, o.elem_bytes);
  if (V == 1) cls = WindowClass::kGeneric;
  if (V == kScalarWidth) V = 1;  // a Fixed class, one lane a unit
  const bool fused = kernel == Kernel::kFusedFromInput || kernel == Kernel::kFusedFromOutput;
  if (fused && (cls == WindowClass::kGeneric || Overlapping(g))) {
    cls = WindowClass::kGeneric;  // PlanCall asks this only where Fusible
    V = 1;
  }
  if (cls != WindowClass::kGeneric) {
    s.layout = g.in_cl ? kNdhwc : kNcdhw;
    s.outer = g.in_cl ? g.B : g.B * g.C;
    s.in_per_outer = g.in_cl ? in_sp * g.C : in_sp;
    s.out_per_outer = g.in_cl ? out_sp * g.C : out_sp;
    if (kernel == Kernel::kGather && Overlapping(g)) {  // blocks of input positions
      const int64_t bd = Blocks(g.D, GatherBlock(int(g.kD), int(g.sD))),
                    bh = Blocks(g.H, GatherBlock(int(g.kH), int(g.sH)));
      s.units_per_outer = g.in_cl ? bd * bh * Blocks(g.W, GatherBlock(int(g.kW), int(g.sW))) * (g.C / V)
                                  : bd * bh * (g.W / V);
    } else if (!g.in_cl) {  // V windows of a row a unit (the last one partial in ragged rows)
      s.units_per_outer = g.Do * g.Ho * Blocks(g.Wo, V);
    } else {
      s.units_per_outer = s.out_per_outer / V;
    }
  } else {  // GenericLanes(wide) channels a unit
    s.layout = kStrided;
    s.outer = g.B;
    s.in_per_outer = in_sp * g.C;
    s.out_per_outer = out_sp * g.C;
  }
  s.cls = cls;
  s.V = V;
  const int64_t biggest = std::max(s.in_per_outer, s.out_per_outer);
  const bool wide = biggest >= o.narrow_limit || o.wide;
  if (cls == WindowClass::kGeneric) {
    s.V = GenericLanes(wide);
    s.units_per_outer = (kernel == Kernel::kGather ? in_sp : out_sp) * Blocks(g.C, s.V);
  }
  if (wide) {
    if (cls != WindowClass::kGeneric) {  // planes this large: Generic, int64
      Geom h = g;
      PlanOptions scalar = o;
      scalar.vector = false;
      Step t = PlanStep(h, kernel, scalar);
      t.wide = true;
      t.per_chunk = t.outer;
      return t;
    }
    s.wide = true;
    s.per_chunk = s.outer;
  } else {
    s.per_chunk = std::max<int64_t>(1, (o.narrow_limit - 1) / biggest);
    s.per_chunk = std::min(s.per_chunk, s.outer);
  }
  return s;
}

inline CallPlan PlanCall(const Geom& g, Call call, const PlanOptions& o) {
  CallPlan p;
  const int64_t windows = g.B * g.C * g.Do * g.Ho * g.Wo;
  switch (call) {
    case Call::kForward:
    case Call::kForwardOutput:
      p.steps[p.n++] = PlanStep(g, Kernel::kWindowMax, o);
      break;
    case Call::kFromIndices:
      p.steps[p.n++] = PlanStep(g, Kernel::kGather, o);
      break;
    case Call::kBackward:
    case Call::kFromInput: {
      const Kernel fused = call == Call::kBackward ? Kernel::kFusedFromOutput
                                                   : Kernel::kFusedFromInput;
      Step f = PlanStep(g, fused, o);
      if (f.cls != WindowClass::kGeneric || Fusible(g)) {
        p.steps[p.n++] = f;
        break;
      }
      p.steps[p.n++] = PlanStep(
          g, call == Call::kBackward ? Kernel::kWindowSelect : Kernel::kWindowIndices, o);
      p.steps[p.n++] = PlanStep(g, Kernel::kGather, o);
      p.scratch_bytes = size_t(windows) * sizeof(int16_t);
      break;
    }
  }
  return p;
}

// The launch parameters of chunk c of step s.
template <class I>
Launch<I> MakeLaunch(const Geom& g, const Step& s, int64_t c) {
  using U = typename std::make_unsigned<I>::type;
  Launch<I> l{};
  const int64_t outer = s.ChunkOuter(c);
  l.C = I(g.C); l.D = I(g.D); l.H = I(g.H); l.W = I(g.W);
  l.Do = I(g.Do); l.Ho = I(g.Ho); l.Wo = I(g.Wo);
  l.kD = I(g.kD); l.kH = I(g.kH); l.kW = I(g.kW);
  l.sD = I(g.sD); l.sH = I(g.sH); l.sW = I(g.sW);
  l.pD = I(g.pD); l.pH = I(g.pH); l.pW = I(g.pW);
  l.in_cl = g.in_cl; l.out_cl = g.out_cl;
  LayoutStrides<I>(g.in_cl, l.C, l.D, l.H, l.W, l.xs);
  LayoutStrides<I>(g.out_cl, l.C, l.Do, l.Ho, l.Wo, l.ys);
  l.units = U(outer * s.units_per_outer);
  const bool per_input = s.kernel == Kernel::kGather &&
                         (s.cls == WindowClass::kGeneric || Overlapping(g));
  int64_t dv[4];
  if (s.cls != WindowClass::kGeneric) {
    // Overlapping gathers count blocks of input positions (GatherBlock), the rest outputs.
    const int64_t W = per_input ? Blocks(g.W, g.in_cl ? GatherBlock(int(g.kW), int(g.sW)) : s.V)
                      : s.layout == kNcdhw ? Blocks(g.Wo, s.V) * s.V : g.Wo;
    const int64_t H = per_input ? Blocks(g.H, GatherBlock(int(g.kH), int(g.sH))) : g.Ho;
    const int64_t D = per_input ? Blocks(g.D, GatherBlock(int(g.kD), int(g.sD))) : g.Do;
    if (s.layout == kNcdhw) {
      dv[0] = per_input ? W : W / s.V; dv[1] = H; dv[2] = D; dv[3] = 1;
    } else {
      dv[0] = g.C / s.V; dv[1] = W; dv[2] = H; dv[3] = D;
    }
  } else {  // blocks of s.V channels
    const bool cl = per_input ? g.in_cl : g.out_cl;
    const int64_t W = per_input ? g.W : g.Wo, H = per_input ? g.H : g.Ho,
                  D = per_input ? g.D : g.Do, C = Blocks(g.C, s.V);
    if (cl) {
      dv[0] = C; dv[1] = W; dv[2] = H; dv[3] = D;
    } else {
      dv[0] = W; dv[1] = H; dv[2] = D; dv[3] = C;
    }
  }
  for (int i = 0; i < 4; ++i) l.div[i] = MakeFastDiv<U>(U(dv[i]));
  l.sdiv[0] = MakeFastDiv<U>(U(g.sD));
  l.sdiv[1] = MakeFastDiv<U>(U(g.sH));
  l.sdiv[2] = MakeFastDiv<U>(U(g.sW));
  return l;
}

// The threads a block of a kernel gets: the plan's, or, where that kernel
// cannot launch so many (cudaFuncGetAttributes' maxThreadsPerBlock: its
// registers or its __launch_bounds__), the most it can, a multiple of 32.
inline int FitThreads(int requested, int kernel_max) {
  if (kernel_max <= 0 || requested <= kernel_max) return requested;
  return std::max(32, kernel_max / 32 * 32);
}

// Element offsets of chunk c's first outer item: (input side, output side).
inline int64_t ChunkInputOffset(const Step& s, int64_t c) {
  return c * s.per_chunk * s.in_per_outer;
}
inline int64_t ChunkOutputOffset(const Step& s, int64_t c) {
  return c * s.per_chunk * s.out_per_outer;
}

}  // namespace gpu
}  // namespace pool3d

#endif  // POOL3D_GPU_CUDA_LAUNCH_PLAN_H_
