// The CUDA kernels' host-side plan and per-thread work
// (pool3d_pass/bindings/gpu/cuda/: launch_plan.h, run_plan.h, units.h)
// compiled for the CPU: tests/bindings/gpu/test_cuda_elements.py runs whole calls
// here, launch by launch and thread by thread as the GPU would run the
// grid-stride loops, and compares the results with the CPU kernels. POOL3D_HD
// is empty here, so this is the same source the device code is compiled
// from; only the 32- to 128-bit accesses become element loops, each counted
// where its pointer is not aligned to its width (a device would fault).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "launch_plan.h"
#include "run_plan.h"

namespace {

using pool3d::Call;
using pool3d::CallOperands;
using pool3d::Geom;
using namespace pool3d::gpu;

// Runs each launch's grid-stride loop: every (block, thread) of the grid,
// each over its units, as kernels.cu's GridStride does. Where max_threads is
// set (a kernel's limit, as cudaFuncGetAttributes would give it), blocks are
// fitted to it as kernels.cu's CudaExec fits them (FitThreads), and counted.
struct HostExec {
  int64_t launches = 0;
  int max_threads = 0;
  int64_t fitted = 0;
  template <Kernel K, class Unit, class I, class M>
  bool Launch(const pool3d::gpu::Launch<I>& l, const Operands<M>& p,
              int64_t blocks, int threads) {
    using U = typename std::make_unsigned<I>::type;
    ++launches;
    if (l.units == 0) return true;
    const int fit = FitThreads(threads, max_threads);
    if (fit != threads) {
      ++fitted;
      blocks = std::min<int64_t>((int64_t(l.units) + fit - 1) / fit, kMaxBlocks);
      threads = fit;
    }
    const U stride = U(blocks) * U(threads);
    for (int64_t b = 0; b < blocks; ++b)
      for (int t = 0; t < threads; ++t)
        for (U u = U(b) * U(threads) + U(t); u < l.units; u += stride)
          Unit::Run(l, p, u);
    return true;
  }
};

Geom MakeGeom(const int64_t* dims, const int64_t* ksp, int in_cl, int out_cl) {
  Geom g{};
  g.B = dims[0]; g.C = dims[1]; g.D = dims[2]; g.H = dims[3]; g.W = dims[4];
  g.kD = ksp[0]; g.kH = ksp[1]; g.kW = ksp[2];
  g.sD = ksp[3]; g.sH = ksp[4]; g.sW = ksp[5];
  g.pD = ksp[6]; g.pH = ksp[7]; g.pW = ksp[8];
  g.Do = (g.D + 2 * g.pD - g.kD) / g.sD + 1;
  g.Ho = (g.H + 2 * g.pH - g.kH) / g.sH + 1;
  g.Wo = (g.W + 2 * g.pW - g.kW) / g.sW + 1;
  g.in_cl = in_cl != 0;
  g.out_cl = out_cl != 0;
  g.overlap = g.sD < g.kD || g.sH < g.kH || g.sW < g.kW;
  return g;
}

// opts: elem_bytes, aligned, threads, vector, narrow_limit, max_blocks, wide,
// then (pool3d_run only) a kernel's thread limit and whether scratch fails
PlanOptions MakeOptions(const int64_t* opts) {
  PlanOptions o;
  o.elem_bytes = int(opts[0]);
  o.aligned = opts[1] != 0;
  o.threads = int(opts[2]);
  o.vector = opts[3] != 0;
  if (opts[4] > 0) o.narrow_limit = opts[4];
  if (opts[5] > 0) o.max_blocks = opts[5];
  o.wide = opts[6] != 0;
  return o;
}

pool3d::ElementType TypeOf(int dtype) {
  return dtype == 0 ? pool3d::ElementType::kF32
                    : dtype == 1 ? pool3d::ElementType::kBF16
                                 : pool3d::ElementType::kF16;
}

}  // namespace

// The plan of one call, as flat int64s: [n_steps, scratch_bytes, then per
// step: kernel, class, layout, V, wide, chunks, per_chunk, units_per_outer,
// blocks of chunk 0, threads, units of chunk 0, units of the last chunk].
extern "C" void pool3d_plan(int call, const int64_t* dims, const int64_t* ksp,
                            int in_cl, int out_cl, const int64_t* opts,
                            int64_t* out) {
  const Geom g = MakeGeom(dims, ksp, in_cl, out_cl);
  const CallPlan p = PlanCall(g, Call(call), MakeOptions(opts));
  out[0] = p.n;
  out[1] = int64_t(p.scratch_bytes);
  for (int i = 0; i < p.n; ++i) {
    const Step& s = p.steps[i];
    int64_t* o = out + 2 + 12 * i;
    o[0] = int64_t(s.kernel); o[1] = int64_t(s.cls); o[2] = s.layout;
    o[3] = s.V; o[4] = s.wide; o[5] = s.Chunks(); o[6] = s.per_chunk;
    o[7] = s.units_per_outer;
    const int64_t first = s.ChunkOuter(0) * s.units_per_outer;
    const int64_t last = s.ChunkOuter(s.Chunks() - 1) * s.units_per_outer;
    o[8] = s.Blocks(first); o[9] = s.threads; o[10] = first; o[11] = last;
  }
}

// launch_plan.h's FitThreads, for the test.
extern "C" int pool3d_fit_threads(int requested, int kernel_max) {
  return FitThreads(requested, kernel_max);
}

// The accesses so far that a device would have faulted on (a vector access at
// a pointer not aligned to its width; unit_common.h counts them), then zero.
extern "C" int64_t pool3d_misaligned() {
  return MisalignedAccesses().exchange(0);
}

// Runs one call: 0 forward (x -> y, idx), 1 forward_output (x -> y),
// 2 backward_from_indices (g, idx -> dx), 3 backward (x, y, g -> dx),
// 4 backward_from_input (x, g -> dx). dtype 0 f32, 1 bf16, 2 f16. The plan
// runs as kernels.cu runs it (run_plan.h's RunPlan), its scratch a poisoned
// vector (opts[8]: none given, as an exhausted allocator). Returns the number
// of launches (plus 1000 times those fitted to opts[7] threads), -1 where
// the plan could not run, -2 where it had no scratch.
extern "C" int64_t pool3d_run(int call, int dtype, const int64_t* dims,
                              const int64_t* ksp, int in_cl, int out_cl,
                              const int64_t* opts, const void* x,
                              const void* y_in, const void* go,
                              const int16_t* idx_in, void* y, int16_t* idx,
                              void* dx) {
  const Geom g = MakeGeom(dims, ksp, in_cl, out_cl);
  const CallPlan p = PlanCall(g, Call(call), MakeOptions(opts));
  HostExec exec;
  exec.max_threads = int(opts[7]);
  // Scratch indices poisoned: the gather must read only what step 0 wrote.
  std::vector<int16_t> scratch;
  auto alloc = [&](size_t bytes) -> void* {
    if (opts[8] != 0) return nullptr;
    scratch.assign(bytes / sizeof(int16_t), int16_t(0x5a5a));
    return scratch.data();
  };
  CallOperands ops;
  ops.x = x;
  ops.y_in = y_in;
  ops.go = go;
  ops.idx_in = idx_in;
  ops.y = y;
  ops.idx = idx;
  ops.dx = dx;
  switch (RunPlan(exec, alloc, g, TypeOf(dtype), p, ops)) {
    case RunStatus::kOk:
      return exec.launches + 1000 * exec.fitted;
    case RunStatus::kNoScratch:
      return -2;
    case RunStatus::kLaunchFailed:
      break;
  }
  return -1;
}
