// Running a launch plan (launch_plan.h): the one mapping from a plan's step
// to the unit type (units.h) that does its work, shared by the CUDA launches
// (kernels.cu) and the host test (tests/bindings/gpu/host/cuda_elements_host.cc).
//
// An executor `exec` is called as
//   exec.template Launch<Kernel, Unit>(launch, operands, blocks, threads)
// once per chunk: kernels.cu launches the __global__ kernel of that unit on
// the call's stream; the host test runs its grid-stride loop on the CPU.
#ifndef POOL3D_GPU_CUDA_RUN_PLAN_H_
#define POOL3D_GPU_CUDA_RUN_PLAN_H_

#include <cstdint>
#include <type_traits>

#include "launch_plan.h"
#include "shared_kernels/dispatch.h"
#include "units.h"

namespace pool3d {
namespace gpu {

// The window type of a Fixed class.
template <class Fn>
void ForWindowClass(WindowClass c, Fn&& fn) {
  switch (c) {
    case WindowClass::kK2S2: fn(Fixed<2, 2, 2, 2, 2, 2, 0, 0, 0>{}); return;
    case WindowClass::kK122: fn(Fixed<1, 2, 2, 1, 2, 2, 0, 0, 0>{}); return;
    case WindowClass::kK3S2P1: fn(Fixed<3, 3, 3, 2, 2, 2, 1, 1, 1>{}); return;
    case WindowClass::kK3S1P1: fn(Fixed<3, 3, 3, 1, 1, 1, 1, 1, 1>{}); return;
    case WindowClass::kK133S2P1: fn(Fixed<1, 3, 3, 1, 2, 2, 0, 1, 1>{}); return;
    case WindowClass::kK3S2: fn(Fixed<3, 3, 3, 2, 2, 2, 0, 0, 0>{}); return;
    case WindowClass::kK2S1: fn(Fixed<2, 2, 2, 1, 1, 1, 0, 0, 0>{}); return;
    case WindowClass::kGeneric: return;
  }
}

// The vector widths launch_plan.h's VectorWidth can give a Fixed window W, as
// compile-time constants (the plan's V is checked against them): the one
// vector a row, and (NCDHW overlapping window kernels) two (0: none). Classes
// with ragged NCDHW rows have window kernels of two vectors only there.
template <class T, class W, int L>
constexpr int FixedWidth(Kernel k) {
  constexpr int lanes = 16 / int(sizeof(typename T::M));
  if (L == kNdhwc) return lanes;
  if (k == Kernel::kGather && W::kOverlap) return lanes;
  if (W::kRaggedRows && WideWindows(k, W::kOverlap)) return 2 * (lanes / W::sW);
  return lanes / W::sW;
}
template <class T, class W, int L>
constexpr int WideWidth(Kernel k) {
  return L == kNcdhw && WideWindows(k, W::kOverlap) && !W::kRaggedRows ? 2 * FixedWidth<T, W, L>(k) : 0;
}
// The half-vector width of NDHWC overlapping windows of 16-bit elements
// (launch_plan.h's HalfVectors), 0: none.
template <class T, class W, int L>
constexpr int HalfWidth() {
  return L == kNdhwc && sizeof(typename T::M) == 2 && W::kOverlap ? 8 / int(sizeof(typename T::M)) : 0;
}
// The one-lane width (ScalarUnits), 0: none.
template <class W>
constexpr int OneLane(Kernel k) {
  return ScalarUnits(k, W::kOverlap) ? 1 : 0;
}

// The pointers of chunk c of step s.
template <class M>
Operands<M> ChunkOperands(const Operands<M>& all, const Step& s, int64_t c) {
  const int64_t in = ChunkInputOffset(s, c), out = ChunkOutputOffset(s, c);
  Operands<M> p;
  p.x = all.x ? all.x + in : nullptr;
  p.dx = all.dx ? all.dx + in : nullptr;
  p.y_in = all.y_in ? all.y_in + out : nullptr;
  p.go = all.go ? all.go + out : nullptr;
  p.idx_in = all.idx_in ? all.idx_in + out : nullptr;
  p.y = all.y ? all.y + out : nullptr;
  p.idx = all.idx ? all.idx + out : nullptr;
  return p;
}

// The unit type of kernel K for window W (void: no such kernel).
template <Kernel K, class T, class W, int L, int V>
struct UnitOf {
  using type = void;
};
template <class T, class W, int L, int V>
struct UnitOf<Kernel::kWindowMax, T, W, L, V> { using type = WindowUnit<T, W, L, V, kMax>; };
// (The selection and the indices alone feed a gather: PlanCall plans them only where windows
// overlap, or for the Generic kernels; none is built for the non-overlapping classes.)
template <class T, class W, int L, int V>
struct UnitOf<Kernel::kWindowSelect, T, W, L, V> {
  using type = std::conditional_t<W::kOverlap, WindowUnit<T, W, L, V, kSelect>, void>;
};
// Indices only: nothing of what y needs.
template <class T, class W, int L, int V>
struct UnitOf<Kernel::kWindowIndices, T, W, L, V> {
  using type = std::conditional_t<W::kOverlap, WindowUnit<T, W, L, V, kIndices>, void>;
};
template <class T, class W, int L, int V>
struct UnitOf<Kernel::kGather, T, W, L, V> { using type = GatherUnit<T, W, L, V>; };
// (Fixed: non-overlapping classes; Generic: any, PlanCall fuses only where Fusible)
template <class T, class W, int L, int V>
struct UnitOf<Kernel::kFusedFromInput, T, W, L, V> {
  using type = std::conditional_t<!W::kFixed || !W::kOverlap,
                                  FusedUnit<T, W, L, V, kByMax>, void>;
};
template <class T, class W, int L, int V>
struct UnitOf<Kernel::kFusedFromOutput, T, W, L, V> {
  using type = std::conditional_t<!W::kFixed || !W::kOverlap,
                                  FusedUnit<T, W, L, V, kByOutput>, void>;
};

template <Kernel K, class T, class W, int L, int V, class Exec>
bool LaunchUnits(Exec& exec, const Geom& g, const Step& s,
                 const Operands<typename T::M>& all) {
  using I = typename W::Offset;
  using Unit = typename UnitOf<K, T, W, L, V>::type;
  if constexpr (std::is_void_v<Unit>) {
    return false;  // PlanCall fuses only non-overlapping Fixed windows
  } else {
    for (int64_t c = 0; c < s.Chunks(); ++c) {
      const Launch<I> l = MakeLaunch<I>(g, s, c);
      if (!exec.template Launch<K, Unit>(l, ChunkOperands(all, s, c),
                                         s.Blocks(int64_t(l.units)), s.threads))
        return false;
    }
    return true;
  }
}

// Calls fn(std::integral_constant<Kernel, K>) for s's kernel.
template <class Fn>
void ForKernel(Kernel k, Fn&& fn) {
  switch (k) {
    case Kernel::kWindowMax: fn(std::integral_constant<Kernel, Kernel::kWindowMax>{}); return;
    case Kernel::kWindowSelect: fn(std::integral_constant<Kernel, Kernel::kWindowSelect>{}); return;
    case Kernel::kGather: fn(std::integral_constant<Kernel, Kernel::kGather>{}); return;
    case Kernel::kFusedFromInput: fn(std::integral_constant<Kernel, Kernel::kFusedFromInput>{}); return;
    case Kernel::kFusedFromOutput: fn(std::integral_constant<Kernel, Kernel::kFusedFromOutput>{}); return;
    case Kernel::kWindowIndices: fn(std::integral_constant<Kernel, Kernel::kWindowIndices>{}); return;
  }
}

// Runs step s of a plan for element type t; false: the executor failed (or
// a step the plan cannot make).
template <class Exec>
bool RunStep(Exec& exec, const Geom& g, const Step& s, ElementType t, const CallOperands& ops) {
  bool ok = false;
  ForElementType(t, [&](auto tag) {
    using T = decltype(tag);
    using M = typename T::M;
    Operands<M> all;
    all.x = static_cast<const M*>(ops.x);
    all.y_in = static_cast<const M*>(ops.y_in);
    all.go = static_cast<const M*>(ops.go);
    all.idx_in = ops.idx_in;
    all.y = static_cast<M*>(ops.y);
    all.idx = ops.idx;
    all.dx = static_cast<M*>(ops.dx);
    ForKernel(s.kernel, [&](auto kernel) {
      constexpr Kernel K = decltype(kernel)::value;
      if (s.cls == WindowClass::kGeneric) {
        if (s.wide) {
          ok = LaunchUnits<K, T, Generic<int64_t>, kStrided, GenericLanes(true)>(exec, g, s, all);
        } else {
          ok = LaunchUnits<K, T, Generic<int32_t>, kStrided, GenericLanes(false)>(exec, g, s, all);
        }
        return;
      }
      ForWindowClass(s.cls, [&](auto win) {
        using W = decltype(win);
        auto with_layout = [&](auto layout) {
          constexpr int L = decltype(layout)::value;
          constexpr int V = FixedWidth<T, W, L>(K), V2 = WideWidth<T, W, L>(K), V1 = OneLane<W>(K),
                        Vh = HalfWidth<T, W, L>();
          if constexpr (Vh > 0) {
            if (s.V == Vh) {
              ok = LaunchUnits<K, T, W, L, Vh>(exec, g, s, all);
              return;
            }
          }
          if constexpr (V2 > 0) {
            if (s.V == V2) {
              ok = LaunchUnits<K, T, W, L, V2>(exec, g, s, all);
              return;
            }
          }
          if constexpr (V1 > 0) {
            if (s.V == V1) {
              ok = LaunchUnits<K, T, W, L, V1>(exec, g, s, all);
              return;
            }
          }
          ok = s.V == V && LaunchUnits<K, T, W, L, V>(exec, g, s, all);
        };
        if (s.layout == kNdhwc) {
          with_layout(std::integral_constant<int, kNdhwc>{});
        } else {
          with_layout(std::integral_constant<int, kNcdhw>{});
        }
      });
    });
  });
  return ok;
}

// How running a plan ended.
enum class RunStatus : int {
  kOk = 0,
  kNoScratch = 1,   // the allocator gave no memory for the indices between two steps
  kLaunchFailed = 2,  // the executor refused or failed a launch
};

// Runs a whole plan: one step, or two with the int16 indices between them in
// plan.scratch_bytes of memory from alloc(bytes) (nullptr: none; the caller
// owns it and keeps it until both steps are done: XLA's scratch allocator
// frees it when the handler returns, stream-ordered behind the launches).
template <class Exec, class Alloc>
RunStatus RunPlan(Exec& exec, Alloc&& alloc, const Geom& g, ElementType t, const CallPlan& plan,
                  const CallOperands& ops) {
  if (plan.n == 1) return RunStep(exec, g, plan.steps[0], t, ops) ? RunStatus::kOk : RunStatus::kLaunchFailed;
  int16_t* indices = static_cast<int16_t*>(alloc(plan.scratch_bytes));
  if (indices == nullptr) return RunStatus::kNoScratch;
  CallOperands first, second;
  first.x = ops.x;
  first.y_in = ops.y_in;
  first.idx = indices;
  second.go = ops.go;
  second.idx_in = indices;
  second.dx = ops.dx;
  return RunStep(exec, g, plan.steps[0], t, first) && RunStep(exec, g, plan.steps[1], t, second)
             ? RunStatus::kOk
             : RunStatus::kLaunchFailed;
}

}  // namespace gpu
}  // namespace pool3d

#endif  // POOL3D_GPU_CUDA_RUN_PLAN_H_
