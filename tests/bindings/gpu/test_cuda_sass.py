"""The CUDA kernels' sm_90a machine code without a GPU (checks/sass.py) and the speed model (checks/gpu_model.py).

The kernels' SASS must have no local memory (LDL/STL) in any kernel, no
run-time integer division in any kernel's main loop (the specialised
`Fixed<...>` kernels and the generic ones), and 128-bit global accesses in
every vector path (template argument V > 1);
the speed model must find a kernel for every bench row. Those tests need
nvcc, cuobjdump and nvdisasm (`cuda_build.find_tool`; the test extra installs
the CUDA 13 cuobjdump and nvdisasm wheels) and skip, saying which is missing,
without them. They read the package's built library where it is newer than
its sources, else build the sm_90a cubins once per session. A small probe
kernel file, compiled here too, shows that each detector fires on nvcc's
real output. The parser, the pipe table, the path cost and the model's
arithmetic are tested first on an embedded listing (no tools needed).
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess

import pytest

from checks import gpu_model, sass

pytestmark = pytest.mark.gpu

# A made-up kernel in cuobjdump's format: a grid-stride loop (0x40-0x150) holding a 32-bit division idiom,
# a branch whose fall-through side is heavier, an inner loop (0xd0-0xf0), a call of a 64-bit division
# subroutine (0x180), a 128-bit load, a 32-bit store and a local store; then an sm_80 copy to be skipped.
LISTING = """
Fatbin elf code:
================
arch = sm_90a

	code for sm_90a
		Function : _ZN6pool3d3gpu12WindowKernelINS_4F32TENS0_5FixedILi2ELi2ELi2ELi2ELi2ELi2ELi0ELi0ELi0EEELi1ELi4ELi1EEEvPKfPf
	.headerflags	@"EF_CUDA_ACCELERATORS EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                       /* 0x00000a00ff017b82 */
                                                                                /* 0x000fe20000000800 */
        /*0010*/                   S2R R0, SR_TID.X ;                           /* 0x0000000000007919 */
        /*0020*/                   ISETP.GE.AND P0, PT, R0, UR4, PT ;           /* 0x0000000400007c0c */
        /*0030*/               @P0 EXIT ;                                       /* 0x000000000000094d */
        /*0040*/                   LDG.E.128 R4, desc[UR6][R2.64] ;             /* 0x0000000602047981 */
        /*0050*/                   I2F.U32.RP R8, R9 ;                          /* 0x0000000900087306 */
        /*0060*/                   MUFU.RCP R8, R8 ;                            /* 0x0000000800087308 */
        /*0070*/                   F2I.FTZ.U32.TRUNC.NTZ R8, R8 ;               /* 0x0000000800087305 */
        /*0080*/              @P1 BRA 0xc0 ;                                    /* 0x0000000000041947 */
        /*0090*/                   IADD3 R10, R10, 0x1, RZ ;                    /* 0x000000010a0a7810 */
        /*00a0*/                   LOP3.LUT R10, R10, 0xff, RZ, 0xc0, !PT ;     /* 0x000000ff0a0a7812 */
        /*00b0*/                   SHF.L.U32 R10, R10, 0x1, RZ ;                /* 0x000000010a0a7819 */
        /*00c0*/                   FMNMX R11, R11, R4, !PT ;                    /* 0x000000040b0b7209 */
        /*00d0*/                   IMAD R12, R12, 0x3, RZ ;                     /* 0x000000030c0c7824 */
        /*00e0*/                   ISETP.NE.AND P2, PT, R12, RZ, PT ;           /* 0x000000ff0c00720c */
        /*00f0*/               @P2 BRA 0xd0 ;                                   /* 0xfffffffc00f42947 */
        /*0100*/                   CALL.REL.NOINC 0x180 ;                       /* 0x0000000000007944 */
        /*0110*/                   STG.E desc[UR6][R2.64], R11 ;                /* 0x0000000b02007986 */
        /*0120*/                   STL [R1], R11 ;                              /* 0x0000000b01007387 */
        /*0130*/                   UIADD3 UR4, UR4, 0x1, URZ ;                  /* 0x0000000104047890 */
        /*0140*/                   ISETP.LT.AND P0, PT, R0, UR4, PT ;           /* 0x0000000400007c0c */
        /*0150*/               @P0 BRA 0x40 ;                                   /* 0xfffffffc00b80947 */
        /*0160*/                   EXIT ;                                       /* 0x000000000000794d */
        /*0170*/                   BRA 0x170;                                   /* 0xfffffffc00fc7947 */
        /*0180*/                   I2F.U64.RP R14, R16 ;                        /* 0x00000010000e7312 */
        /*0190*/                   MUFU.RCP.64H R15, R17 ;                      /* 0x00000011000f7308 */
        /*01a0*/                   RET.REL.NODEC R20 0x0 ;                      /* 0x0000000014007950 */
		.......................

	code for sm_80
		Function : _Z6sm80_onlyv
        /*0000*/                   EXIT ;                                       /* 0x000000000000794d */
"""


@pytest.fixture(scope="module")
def listed():
    if shutil.which("c++filt") is None:
        pytest.skip("no c++filt (binutils) to demangle the listing's names with")
    (fn,) = sass.parse(LISTING)
    return fn


# --- the parser, the pipe table and the cost (no tools) ----------------------------------------


def test_the_listing_is_split_into_sm_90a_functions_with_demangled_names(listed):
    assert listed.name.startswith("void pool3d::gpu::WindowKernel<pool3d::F32T, pool3d::gpu::Fixed<2, 2, 2")
    assert listed.mangled.startswith("_ZN6pool3d3gpu12WindowKernel")
    assert len(listed.instructions) == 27
    first = listed.instructions[4]
    assert (first.address, first.opcode, first.predicate, first.global_bits) == (0x40, "LDG.E.128", "", 128)
    assert listed.instructions[8].predicate == "@P1" and listed.instructions[8].target == 0xC0


@pytest.mark.parametrize(("opcode", "pipe"), [
    ("IADD3", "alu"), ("LOP3.LUT", "alu"), ("ISETP.GE.U32.AND", "alu"), ("FMNMX", "alu"), ("POPC", "xu"),
    ("IMAD.WIDE.U32", "fma"), ("IMAD.MOV.U32", "fma"), ("HFMA2.MMA", "fma"), ("FFMA", "fma"),
    ("I2F.U32.RP", "xu"), ("MUFU.RCP", "xu"), ("F2I.FTZ.U32.TRUNC.NTZ", "xu"),
    ("LDG.E.128.CONSTANT", "memory"), ("STL", "memory"), ("REDG.E.ADD.F32.FTZ.RN.STRONG.GPU", "memory"),
    ("ULDC.64", "uniform"), ("UIADD3", "uniform"), ("R2UR", "uniform"),
    ("BSSY", "control"), ("WARPSYNC", "control"), ("EXIT", "control"), ("S2R", "other"),
])
def test_each_opcode_has_one_pipe(opcode, pipe):
    assert sass.pipe(opcode) == pipe


def test_the_pipe_table_names_each_opcode_once():
    opcodes = [op for ops in sass.PIPES.values() for op in ops]
    assert len(opcodes) == len(set(opcodes))


def test_global_widths_read_the_size_modifier():
    def bits(opcode):
        return sass.Instruction(0, "", opcode, "").global_bits

    assert (bits("LDG.E.128.CONSTANT"), bits("STG.E.64"), bits("STG.E.U16"), bits("LDS.128")) == (128, 64, 32, None)


def test_the_main_loop_is_the_grid_stride_loop_and_the_trap_is_no_loop(listed):
    first, last = listed.main_range()
    assert (listed.instructions[first].address, listed.instructions[last].address) == (0x40, 0x150)
    assert [(listed.instructions[a].address, listed.instructions[b].address) for a, b in listed.inner_loops()] == [
        (0xD0, 0xF0)]
    assert listed.instructions[listed.body_end - 1].address == 0x160  # the BRA-to-self trap and the subroutine out


def test_the_detectors(listed):
    assert [ins.address for ins in listed.local_memory()] == [0x120]
    # the 32-bit idiom once (I2F.U32.RP) and one call of a subroutine holding the 64-bit idiom
    assert [ins.address for ins in listed.divisions()] == [0x50, 0x100]
    assert listed.global_widths() == {("LDG", 128): 1, ("STG", 32): 1}


def test_one_iteration_takes_the_heavier_side_inner_loops_per_trip_and_the_callee(listed):
    cost = listed.iteration_cost()
    # 0x40-0x80 (5), the fall-through side 0x90-0xb0 (3) over the taken branch, 0xc0 (1), the inner loop (3),
    # 0x100-0x150 (6) plus the subroutine's 3
    assert cost["total"] == 21
    assert {p: cost[p] for p in ("alu", "fma", "xu", "memory", "control", "uniform", "other")} == {
        "alu": 6, "fma": 1, "xu": 5, "memory": 3, "control": 5, "uniform": 1, "other": 0}
    assert listed.iteration_cost({1: 4})["total"] == 21 + 3 * 3


def test_a_function_without_a_loop_is_costed_whole():
    text = LISTING.split("code for sm_80")[0].replace("@P0 BRA 0x40", "@P0 BRA 0x160").replace("@P2 BRA 0xd0",
                                                                                                  "@P2 BRA 0x100")
    (fn,) = sass.parse(text)
    assert fn.main_loop is None and fn.main_range() == (0, fn.body_end - 1)


def _listing(*lines: str) -> str:
    body = "\n".join(f"        /*{16 * i:04x}*/                   {line} ;" for i, line in enumerate(lines))
    return f"\tcode for sm_90a\n\t\tFunction : _Z8unrolledv\n{body}\n"


def test_a_grid_stride_loop_unrolled_beside_its_remainder_loop_counts_its_copies():
    (fn,) = sass.parse(_listing(
        "S2R R0, SR_TID.X", "@P0 BRA 0x60",
        "LDG.E R2, desc[UR4][R4.64]", "STG.E desc[UR4][R6.64], R2", "ISETP.GE.AND P1, PT, R0, R8, PT",
        "@!P1 BRA 0x20",  # the remainder loop: one copy
        "LDG.E.64 R2, desc[UR4][R4.64]", "STG.E desc[UR4][R6.64], R2", "STG.E desc[UR4][R6.64+0x400], R3",
        "STG.E desc[UR4][R6.64+0x800], R2", "STG.E desc[UR4][R6.64+0xc00], R3", "ISETP.GE.AND P1, PT, R0, R8, PT",
        "@!P1 BRA 0x60",  # the unrolled loop: four copies
        "EXIT"))
    assert fn.mangled == "_Z8unrolledv" and fn.unroll == 4
    assert fn.instructions[fn.main_range()[0]].address == 0x60
    (single,) = sass.parse(LISTING)
    assert single.unroll == 1


def test_an_inner_loop_with_two_back_edges_is_one_loop_and_its_break_is_a_path():
    (fn,) = sass.parse(_listing(
        "S2R R0, SR_TID.X",
        "LDG.E R2, desc[UR4][R4.64]",  # 0x10: the grid-stride loop's head
        "IADD3 R3, R3, 0x1, RZ",  # 0x20: the inner loop's head
        "@P1 BRA 0x80",  # break: to a block no other path reaches
        "@P2 BRA 0x20", "ISETP.GE.AND P3, PT, R3, R8, PT", "@P3 BRA 0x20",  # two back edges (a continue)
        "BRA 0xb0",
        "LOP3.LUT R5, R5, 0x1, RZ, 0xc0, !PT", "LOP3.LUT R5, R5, 0x2, RZ, 0xc0, !PT",
        "LOP3.LUT R5, R5, 0x3, RZ, 0xc0, !PT",
        "ISETP.GE.AND P0, PT, R0, R9, PT", "@!P0 BRA 0x10",
        "EXIT"))
    assert [(fn.instructions[a].address, fn.instructions[b].address) for a, b in fn.loops] == [(0x10, 0xC0),
                                                                                               (0x20, 0x60)]
    # 0x10 (1), the inner loop (5), the break's block (3), 0xb0-0xc0 (2); not the plain exit 0x70 (1)
    assert fn.iteration_cost()["total"] == 11
    assert fn.iteration_cost({1: 2})["total"] == 16


def test_the_built_library_is_read_only_where_it_is_newer_than_its_sources(tmp_path, monkeypatch):
    from pool3d_pass.bindings.gpu.cuda import build as cuda_build
    from pool3d_pass.bindings.gpu.cuda import library as cuda_library

    library = tmp_path / "lib.so"
    library.write_bytes(b"")
    monkeypatch.setenv(cuda_library.LIBRARY_ENV, str(library))
    newest = max(os.path.getmtime(f) for f in cuda_build.depends() if os.path.exists(f))
    os.utime(library, (newest + 10, newest + 10))
    assert sass.fresh_library() == str(library)
    os.utime(library, (newest - 10, newest - 10))
    assert sass.fresh_library() is None
    library.unlink()
    assert sass.fresh_library() is None


# --- the model's arithmetic (no tools) ---------------------------------------------------------


def test_case_names_are_read_back():
    assert gpu_model.parse_case("NDHWC bf16 (128, 16, 64, 64, 64) k3 s2 p1") == dict(
        layout="NDHWC", dtype="bf16", shape=(128, 16, 64, 64, 64), kernel=(3, 3, 3), stride=(2, 2, 2),
        padding=(1, 1, 1))
    assert gpu_model.parse_case("NCDHW f32 (2, 4, 8, 16, 16) k1x2x2 s1x2x2")["kernel"] == (1, 2, 2)
    with pytest.raises(ValueError, match="not a rank-5 bench case name"):
        gpu_model.parse_case("NCHW f32 (4, 8, 28, 28) k3 s2 p1")


def test_template_arguments_split_at_the_top_level(listed):
    args = gpu_model.template_args(listed.name, "WindowKernel")
    assert args == ["pool3d::F32T", "pool3d::gpu::Fixed<2, 2, 2, 2, 2, 2, 0, 0, 0>", "1", "4", "1"]
    assert gpu_model.template_args(args[1], "Fixed") == ["2"] * 6 + ["0"] * 3
    assert [gpu_model._int(a) for a in ("4", "(pool3d::gpu::Layout)1", "8u", "-1l", "pool3d::F32T")] == [
        4, 1, 8, -1, None]


def test_the_newest_run_of_the_chosen_gpu_is_read(tmp_path, monkeypatch):
    for name in ("gpu-h200-2026-12-04-1746.jsonl", "gpu-h100-2026-12-05-0900.jsonl", "gpu-h200-2026-11-30-2359.jsonl"):
        (tmp_path / name).write_text("", encoding="utf-8")
    monkeypatch.setattr(gpu_model, "RESULTS_GLOB", str(tmp_path / "gpu-*.jsonl"))
    assert os.path.basename(gpu_model.newest_results("h200")) == "gpu-h200-2026-12-04-1746.jsonl"
    assert os.path.basename(gpu_model.newest_results("h100")) == "gpu-h100-2026-12-05-0900.jsonl"
    with pytest.raises(ValueError, match="no measured copy bandwidth"):
        gpu_model.load_rows(gpu_model.newest_results("h100"))


@pytest.fixture(scope="module")
def rows():
    path = gpu_model.newest_results()
    if path is None:
        pytest.skip("no stored device run in checks/device_check/results")
    return gpu_model.load_rows(path)


def test_the_stored_rows_and_the_model_bytes_agree_with_the_bench_floor(rows):
    assert {r.job for r in rows} == set(gpu_model.JOB_NAMES)
    assert {r.size_class for r in rows} == {"large", "small"}
    for row in rows:
        if row.job == "inference":
            exact = gpu_model.Role("window", 1).bytes(row)
        elif row.job == "gradient only" and not row.overlap:
            exact = gpu_model.Role("fused", 0).bytes(row)
        else:
            continue
        assert math.isclose(exact, row.floor_bytes, rel_tol=1e-9), row.case


def _named(name: str, fn):
    return sass.Function(name, fn.mangled, fn.instructions)


def test_the_row_class_specialised_kernel_is_chosen_else_the_generic_one(listed, rows):
    row = next(r for r in rows if r.job == "inference" and r.layout == "NDHWC" and r.dtype == "f32"
               and r.kernel == (2, 2, 2))
    fixed = "pool3d::gpu::Fixed<2, 2, 2, 2, 2, 2, 0, 0, 0>"
    names = [f"void pool3d::gpu::WindowKernel<pool3d::F32T, {fixed}, 1, 4, 0>(float const*, float*)",
             f"void pool3d::gpu::WindowKernel<pool3d::F32T, {fixed}, 1, 4, 3>(float const*, float*)",
             f"void pool3d::gpu::WindowKernel<pool3d::F32T, {fixed}, 0, 2, 0>(float const*, float*)",
             "void pool3d::gpu::WindowKernel<pool3d::F32T, pool3d::gpu::Generic<int>, 2, 4, 0>(float const*)",
             "void pool3d::gpu::WindowKernel<pool3d::F32T, pool3d::gpu::Generic<long>, 2, 1, 0>(float const*)",
             f"void pool3d::gpu::WindowKernel<pool3d::BF16T, {fixed}, 1, 8, 0>(float const*, float*)",
             f"void pool3d::gpu::FusedKernel<pool3d::F32T, {fixed}, 1, 4, 0>(float const*, float*)"]
    functions = [_named(n, listed) for n in names]
    fn, args = gpu_model.find_kernel(functions, gpu_model.Role("window", 1), row)
    assert fn.name == names[0] and args == {"V": 4, "specialised": True}
    assert gpu_model.find_kernel(functions, gpu_model.Role("window", 3), row)[0].name == names[1]
    k3 = next(r for r in rows if r.job == "inference" and r.layout == "NDHWC" and r.dtype == "f32"
              and r.kernel == (3, 3, 3))
    fn, args = gpu_model.find_kernel(functions, gpu_model.Role("window", 2), k3)
    assert fn.name == names[3] and args == {"V": 4, "specialised": False}
    assert gpu_model.find_kernel(functions, gpu_model.Role("gather"), row) is None
    # units: 4 outputs a specialised unit; 4 channels of an output a generic one, of an input position a generic
    # gather's
    assert gpu_model.units(gpu_model.Role("window", 1), row, {"V": 4, "specialised": True}) == row.m / 4
    assert gpu_model.units(gpu_model.Role("gather"), row, {"V": 4, "specialised": False}) == row.n / 4
    # an overlapping specialised gather: blocks of 2 input positions along D, H, W (NDHWC) by 4 of 64 channels
    assert gpu_model.units(gpu_model.Role("gather"), k3, {"V": 4, "specialised": True}) == 64 * 8 * 32 * 32 * 16
    ncdhw = next(r for r in rows if r.layout == "NCDHW" and r.dtype == "f32" and r.kernel == (3, 3, 3)
                 and r.size_class == "large")
    assert gpu_model.units(gpu_model.Role("gather"), ncdhw, {"V": 4, "specialised": True}) == 64 * 64 * 8 * 32 * 16
    # a generic kernel walks a window's real taps (27 inside, 18 or 12 at the border) or an input position's
    # covering windows (1 to 8) 4 a trip, a warp (8 positions of 16 channel blocks) as many as its busiest unit
    assert gpu_model.generic_batch() == 4
    assert gpu_model.trips(gpu_model.Role("window", 1), k3, {"V": 4, "specialised": False}) == {1: 6.6875}
    assert gpu_model.trips(gpu_model.Role("gather"), k3, {"V": 4, "specialised": False}) == {1: pytest.approx(1.205, abs=1e-3)}
    assert gpu_model.trips(gpu_model.Role("window", 1), k3, {"V": 4, "specialised": True}) == {1: 3, 2: 3, 3: 3}


def test_a_non_overlapping_gradient_is_the_fused_kernel_else_the_window_and_gather_pair(listed, rows):
    row = next(r for r in rows if r.job == "gradient only" and r.layout == "NDHWC" and r.dtype == "f32"
               and r.kernel == (2, 2, 2))
    fixed = "pool3d::gpu::Fixed<2, 2, 2, 2, 2, 2, 0, 0, 0>"
    generic = [_named(f"void pool3d::gpu::{k}<pool3d::F32T, pool3d::gpu::Generic<int>, 2, 1{m}>(int)", listed)
               for k, m in (("WindowKernel", ", 0"), ("GatherKernel", ""))]
    fused = _named(f"void pool3d::gpu::FusedKernel<pool3d::F32T, {fixed}, 1, 4, 0>(int)", listed)
    machine = gpu_model.GPUS["h200"]
    assert [l.tag for l in gpu_model.predict([fused, *generic], row, machine)] == ["F0sx4"]
    assert [l.tag for l in gpu_model.predict(generic, row, machine)] == ["W2g", "Gg"]


def test_a_launch_is_bytes_issue_or_latency_bound_plus_the_launch_overhead(listed, rows):
    row = next(r for r in rows if r.job == "inference" and r.size_class == "large")
    machine = gpu_model.GPUS["h200"]
    functions = [_named("void pool3d::gpu::WindowKernel<pool3d::F32T, pool3d::gpu::Generic<int>, 2, 1, 0>(int)",
                        listed)]
    row = gpu_model.Row(**{**row.__dict__, "dtype": "f32", "layout": "NCDHW", "kernel": (1, 1, 1),
                           "stride": (1, 1, 1), "padding": (0, 0, 0)})
    (got,) = gpu_model.predict(functions, row, machine)
    # trips of a generic window: the taps per axis, 1 here; the listing's path: 21 instructions, 5 on the XU
    # (16 lanes a clock an SM: 0.5 warp-instructions), its one LDG consumed once: one round trip a unit
    warps = row.m / 32
    issue_ms = warps * (5 / 0.5) / (machine.sms * machine.ghz * 1e9) * 1e3
    memory_ms = 2 * row.n * 4 / machine.bandwidth * 1e3
    assert math.isclose(got.issue_ms, issue_ms) and math.isclose(got.memory_ms, memory_ms)
    # unknown registers: the most resident threads (2048 an SM); a warp alone: 5 XU instructions at 0.125 a clock
    assert got.resident == 2048 and got.rounds == 1
    per_thread = row.m / (machine.sms * 2048)
    for latency in gpu_model.LATENCIES_NS:
        latency_ms = per_thread * (latency * 1e-9 + (5 / 0.125) / (machine.ghz * 1e9)) * 1e3
        assert math.isclose(got.latency_ms(latency), latency_ms, rel_tol=1e-12)
        assert math.isclose(got.ms_at(latency), max(issue_ms, memory_ms, latency_ms) + gpu_model.LAUNCH_US / 1e3,
                            rel_tol=1e-12)
    assert got.bound == max((("bytes", memory_ms), ("issue", issue_ms), ("latency", got.latency_ms(700.0))),
                            key=lambda t: t[1])[0]


# --- the kernels' SASS (nvcc, cuobjdump, nvdisasm) ---------------------------------------------

PROBE = r"""
#include <cstdint>
__global__ void divides32(const int* __restrict__ a, int* __restrict__ out, int d, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    out[i] = a[i] / (d + a[i + n]);
}
__global__ void divides64(const int64_t* __restrict__ a, int64_t* __restrict__ out, int64_t d, int64_t n) {
  for (int64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    out[i] = a[i] / (d + a[i + n]);
}
__global__ void vector128(const float4* __restrict__ a, float4* __restrict__ out, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    float4 v = a[i];
    out[i] = make_float4(v.y, v.x, v.w, v.z);
  }
}
__global__ void stack_array(const int* __restrict__ a, int* __restrict__ out, int n) {
  int t[32];
  for (int k = 0; k < 32; ++k) t[k] = a[k * n];
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = t[a[i] & 31];
}
"""


@pytest.fixture(scope="session")
def cuda_tools():
    try:
        return sass.tools()
    except sass.Unavailable as error:
        pytest.skip(f"SASS not checked: {error}")


@pytest.fixture(scope="session")
def kernel_sass(cuda_tools, tmp_path_factory):
    library = sass.fresh_library()
    if library is not None:
        return [f for f in sass.parse(sass.dump(library)) if "pool3d" in f.name]
    return sass.kernels(folder=str(tmp_path_factory.mktemp("sass")))


@pytest.fixture(scope="session")
def probe(cuda_tools, tmp_path_factory):
    folder = tmp_path_factory.mktemp("probe")
    source, cubin = folder / "probe.cu", folder / "probe.cubin"
    source.write_text(PROBE, encoding="utf-8")
    subprocess.run([cuda_tools[0], "-O3", "-cubin", sass.gencode(), str(source), "-o", str(cubin)], check=True,
                   capture_output=True)
    return {re.sub(r"\(.*", "", f.name): f for f in sass.parse(sass.dump(str(cubin)))}


def test_each_detector_fires_on_nvcc_output(probe):
    assert probe["divides32"].divisions() and probe["divides64"].divisions()
    assert not probe["vector128"].divisions() and not probe["stack_array"].divisions()
    assert probe["stack_array"].local_memory() and not probe["divides32"].local_memory()
    assert probe["vector128"].global_widths() == {("LDG", 128): 1, ("STG", 128): 1}
    assert all(bits == 32 for _, bits in probe["divides32"].global_widths())
    assert probe["vector128"].main_loop is not None and probe["vector128"].iteration_cost()["total"] < 20


def test_every_kernel_has_a_grid_stride_loop(kernel_sass):
    assert kernel_sass
    assert [f.name for f in kernel_sass if f.main_loop is None] == []


def test_no_kernel_uses_local_memory(kernel_sass):
    assert {f.name: [i.opcode for i in f.local_memory()] for f in kernel_sass if f.local_memory()} == {}


def specialised(functions) -> list:
    return [f for f in functions if "Fixed<" in f.name]


def dividing(functions) -> dict[str, list[str]]:
    """Each function with the division idiom in its main loop: where."""
    found = {f.name: [f"{i.address:#06x} {i.opcode}" for i in f.divisions()] for f in functions}
    return {name: where for name, where in found.items() if where}


def vector_width(fn) -> int:
    """The template argument V of a specialised (Fixed) kernel template (1 for any other function: a Generic
    kernel's V is its channels, not a vector)."""
    for template in gpu_model._TEMPLATES.values():
        args = gpu_model.template_args(fn.name, template)
        if args and len(args) >= 4 and gpu_model.template_args(args[1], "Fixed") is not None:
            return gpu_model._int(args[3]) or 1
    return 1


def vector_bits(fn) -> int:
    """The widest global access a specialised vector path must make: 128 bits, but 64 for the half-vector NDHWC
    units of 16-bit elements (launch_plan.h's HalfVectors: 4 channels a unit)."""
    for template in gpu_model._TEMPLATES.values():
        args = gpu_model.template_args(fn.name, template)
        sixteen = args and len(args) >= 4 and args[0].split("::")[-1] in ("BF16T", "F16T")
        if sixteen and gpu_model._int(args[2]) == 1:  # NDHWC
            return min(16 * vector_width(fn), 128)
    return 128


def scalar_vector_paths(functions) -> list[str]:
    """Vector paths (V > 1) with no global load or store of their vector's width (vector_bits) in their main
    loop."""
    return [f.name for f in functions if vector_width(f) > 1
            and not any(bits == vector_bits(f) for _, bits in f.global_widths(*f.main_range()))]


def test_the_checks_flag_a_dividing_specialised_kernel_and_a_scalar_vector_path(probe):
    name = "void pool3d::gpu::WindowKernel<pool3d::F32T, pool3d::gpu::Fixed<2, 2, 2, 2, 2, 2, 0, 0, 0>, 1, 4, {}>(int)"
    bad, good = _named(name.format(1), probe["divides32"]), _named(name.format(0), probe["vector128"])
    assert specialised([bad, good, probe["divides64"]]) == [bad, good] and vector_width(bad) == 4
    assert list(dividing([bad, good])) == [bad.name] and scalar_vector_paths([bad, good]) == [bad.name]


def test_no_kernel_divides_in_its_main_loop(kernel_sass):
    """Issue 46: no run-time integer division in any hot loop; the specialised (Fixed<...>) kernels above all."""
    assert specialised(kernel_sass), "no specialised (Fixed<...>) kernel in the build"
    assert dividing(kernel_sass) == {}


def test_vector_paths_use_128_bit_global_accesses(kernel_sass):
    assert any(vector_width(f) > 1 for f in kernel_sass), "no vector path (template argument V > 1) in the build"
    assert scalar_vector_paths(kernel_sass) == []


def test_the_model_finds_a_kernel_for_every_bench_row(kernel_sass, rows):
    machine = gpu_model.GPUS["h200"]
    for row in rows:
        launches = gpu_model.predict(kernel_sass, row, machine)
        assert launches and all(l.ms > gpu_model.LAUNCH_US / 1e3 for l in launches), row.case
