"""The CUDA kernels' launch plan and per-thread code, compiled for the host, against the CPU kernels.

`pool3d_pass/bindings/gpu/cuda/` keeps what each CUDA thread does (`units.h`)
and how a call's launches are planned (`launch_plan.h`, `run_plan.h`) in code
the host compiler builds too. `tests/bindings/gpu/host/cuda_elements_host.cc`
runs whole calls with it: each launch's grid-stride loop, block by block and
thread by thread, as the GPU would. Every result is compared, bit for bit,
with the CPU binding's kernels (same layouts) or with the pure-JAX reference
binding (mixed layouts, which the CPU kernels run through the same shared
scan code), after the output was poisoned, so an element left unwritten
fails. Covered: every specialised window class and the generic path, both
layouts and mixed ones, f32/bf16/f16, inputs with ties, NaN, +-inf and +-0,
padding, both offset widths, aligned and misaligned buffers (which take the
scalar path), several chunks per call and grids smaller than the work.
"""

from __future__ import annotations

import ctypes
import fcntl
import functools
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import jax
import ml_dtypes
import numpy as np
import pytest

from pool3d_pass.bindings import cpu
from pool3d_pass.bindings.gpu.cuda import build as cuda_build
from pool3d_pass.bindings.reference import calls as reference

pytestmark = [pytest.mark.usefixtures("cpu_kernels"), pytest.mark.gpu]

ROOT = Path(__file__).resolve().parents[3]
SOURCE = Path(__file__).resolve().parent / "host" / "cuda_elements_host.cc"
DTYPES = {"f32": (0, np.float32), "bf16": (1, ml_dtypes.bfloat16), "f16": (2, np.float16)}
FORWARD, FORWARD_OUTPUT, FROM_INDICES, BACKWARD, FROM_INPUT = range(5)
GENERIC = 0  # launch_plan.h's WindowClass::kGeneric
GENERIC_LANES = 4  # generic_units.h's kGenericLanes: channels a Generic unit (one with int64 offsets)
STEP = 12  # int64s per step in pool3d_plan's output

# (input shape in NCDHW order: B, C, D, H, W), kernel, stride, padding, specialised class
# (launch_plan.h's WindowClass; 0 generic). Shapes leave rows no window covers and put
# windows in the padding, with W and C sized so that the 128-bit paths apply.
CASES = {
    "k2s2": ((2, 3, 7, 9, 16), (2, 2, 2), (2, 2, 2), (0, 0, 0), 1),
    "k122": ((2, 2, 5, 9, 16), (1, 2, 2), (1, 2, 2), (0, 0, 0), 2),
    "k3s2p1": ((2, 3, 9, 8, 16), (3, 3, 3), (2, 2, 2), (1, 1, 1), 3),
    "k3s1p1": ((1, 2, 6, 7, 16), (3, 3, 3), (1, 1, 1), (1, 1, 1), 4),
    "k133s2p1": ((2, 3, 1, 9, 16), (1, 3, 3), (1, 2, 2), (0, 1, 1), 5),
    # ragged rows: 7 and 15 windows a row of 16 columns, the last unit of a row partial
    "k3s2": ((2, 3, 7, 9, 16), (3, 3, 3), (2, 2, 2), (0, 0, 0), 6),
    "k2s1": ((1, 2, 5, 6, 16), (2, 2, 2), (1, 1, 1), (0, 0, 0), 7),
    "generic_k2s2_pad": ((2, 3, 7, 6, 5), (2, 2, 2), (2, 2, 2), (1, 0, 1), 0),
    "generic_k3s2p1_odd": ((1, 4, 9, 8, 7), (3, 3, 3), (2, 2, 2), (1, 1, 1), 0),
    "generic_mixed": ((1, 3, 7, 5, 6), (1, 2, 3), (1, 2, 2), (0, 1, 1), 0),
    "generic_strides": ((1, 2, 5, 9, 4), (2, 3, 2), (3, 1, 2), (1, 2, 0), 0),
    # three blocks of Generic lanes, the last holding 3 channels (its other lane stores nothing)
    "generic_lanes": ((1, 11, 6, 5, 7), (3, 2, 2), (2, 1, 2), (0, 1, 0), 0),
}
# Channels-last versions of the specialised cases need C a multiple of 8 (bf16) and 4 (f32).
CHANNELS_LAST = {"k2s2": 8, "k122": 16, "k3s2p1": 8, "k3s1p1": 8, "k133s2p1": 8, "k3s2": 8, "k2s1": 8}
# Shapes where no 128-bit vector fits, or one vector a row but not two: the one-lane units of the
# non-overlapping classes (rows of 14 and 10 elements, 2 and 3 channels) and the window kernels' one-vector
# units (W = 24: bf16; W = 12: f32).
WIDTH_CASES = {
    "k2s2_one_lane": ((1, 2, 4, 6, 14), (2, 2, 2), (2, 2, 2), (0, 0, 0), 1),
    "k122_one_lane": ((2, 3, 3, 6, 10), (1, 2, 2), (1, 2, 2), (0, 0, 0), 2),
    "k3s2p1_w24": ((1, 2, 5, 6, 24), (3, 3, 3), (2, 2, 2), (1, 1, 1), 3),
    "k3s2p1_w12": ((1, 2, 5, 6, 12), (3, 3, 3), (2, 2, 2), (1, 1, 1), 3),
    # NDHWC 16-bit channels a multiple of 4, not 8: half-vector units of overlapping windows (NCDHW: Generic)
    "k3s2p1_c12": ((1, 12, 5, 6, 7), (3, 3, 3), (2, 2, 2), (1, 1, 1), 3),
    "k3s1p1_c4": ((1, 4, 4, 5, 6), (3, 3, 3), (1, 1, 1), (1, 1, 1), 4),
}


@pytest.fixture(scope="module")
def host_elements(tmp_path_factory):
    compiler = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if compiler is None:
        pytest.skip("no host C++ compiler (g++, c++ or clang++) to build the per-thread code with")
    # e.g. POOL3D_ELEMENTS_CXXFLAGS="-fsanitize=address,undefined" (with libasan preloaded, as make sanitize does)
    extra = os.environ.get("POOL3D_ELEMENTS_CXXFLAGS", "").split()
    command = [compiler, "-std=c++17", "-O1", "-shared", "-fPIC", "-Wno-unknown-pragmas", *extra,
               *(f"-I{folder}" for folder in cuda_build.INCLUDE_DIRS),  # the library's own include folders
               str(SOURCE)]
    library = ctypes.CDLL(str(_built_once(tmp_path_factory, command)))
    library.pool3d_run.restype = ctypes.c_int64
    library.pool3d_plan.restype = None
    library.pool3d_misaligned.restype = ctypes.c_int64
    library.pool3d_fit_threads.restype = ctypes.c_int
    return library


def _built_once(tmp_path_factory, command: list[str]) -> Path:
    """The library `command` builds, built once a test run: pytest-xdist's workers share it.

    The build takes about a minute; each worker would otherwise make its own. The
    file is named by the command and every source it can include, so a changed
    header or flag builds anew.
    """
    sources = [SOURCE, *sorted(path for folder in cuda_build.INCLUDE_DIRS for path in Path(folder).rglob("*.h"))]
    key = hashlib.sha256("\0".join(command).encode() + b"".join(path.read_bytes() for path in sources)).hexdigest()
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    # Under xdist each worker's base folder sits in the run's own; alone, the base folder is the run's.
    shared = tmp_path_factory.getbasetemp().parent if worker else tmp_path_factory.getbasetemp()
    library = shared / f"cuda_elements-{key[:16]}.so"
    with open(shared / "cuda_elements.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one worker builds, the others wait and load its file
        if not library.exists():
            partial = library.with_suffix(f".{worker or 'main'}.partial")
            subprocess.run([*command, "-o", str(partial)], check=True)
            partial.replace(library)
    return library


def _pointer(array):
    return None if array is None else array.ctypes.data_as(ctypes.c_void_p)


def options(dtype="f32", aligned=True, threads=256, vector=True, narrow_limit=0, max_blocks=0, wide=False,
            kernel_max_threads=0, no_scratch=False):
    item = np.dtype(DTYPES[dtype][1]).itemsize
    return np.asarray([item, int(aligned), threads, int(vector), narrow_limit, max_blocks, int(wide),
                       kernel_max_threads, int(no_scratch)], np.int64)


def plan(library, call, shape, k, s, p, in_cl=False, out_cl=None, **opts):
    """pool3d_plan's output as a list of step dicts (and the scratch bytes)."""
    out_cl = in_cl if out_cl is None else out_cl
    out = np.zeros(2 + 2 * STEP, np.int64)
    library.pool3d_plan(call, _pointer(np.asarray(shape, np.int64)), _pointer(np.asarray([*k, *s, *p], np.int64)),
                        int(in_cl), int(out_cl), _pointer(options(**opts)), _pointer(out))
    names = ("kernel", "cls", "layout", "V", "wide", "chunks", "per_chunk", "units_per_outer", "blocks", "threads",
             "first_units", "last_units")
    return [dict(zip(names, map(int, out[2 + STEP * i: 2 + STEP * (i + 1)]))) for i in range(int(out[0]))], int(out[1])


def run(library, call, dtype, shape, k, s, p, in_cl, out_cl, opts, x=None, y_in=None, go=None, idx_in=None,
        y=None, idx=None, dx=None):
    library.pool3d_misaligned()
    launches = library.pool3d_run(
        call, DTYPES[dtype][0], _pointer(np.asarray(shape, np.int64)), _pointer(np.asarray([*k, *s, *p], np.int64)),
        int(in_cl), int(out_cl), _pointer(opts), _pointer(x), _pointer(y_in), _pointer(go), _pointer(idx_in),
        _pointer(y), _pointer(idx), _pointer(dx))
    assert launches > 0, "the host run could not execute its plan"
    assert library.pool3d_misaligned() == 0, "a vector access a device would fault on (pointer not aligned to its width)"
    return launches % 1000


def to_layout(array_ncdhw, channels_last):
    return np.ascontiguousarray(array_ncdhw.transpose(0, 2, 3, 4, 1) if channels_last else array_ncdhw)


def inputs(rng, shape, dtype, kind):
    """Tie-heavy integers; with NaN, +-inf and signed zeros; or only +0/-0 and one value."""
    x = rng.integers(-3, 4, size=shape).astype(np.float32)
    if kind == "specials":
        pick = rng.random(shape)
        x[pick < 0.04] = np.nan
        x[(pick >= 0.04) & (pick < 0.10)] = -np.inf
        x[(pick >= 0.10) & (pick < 0.13)] = np.inf
        x[(pick >= 0.13) & (pick < 0.30)] = -0.0
        x[(pick >= 0.30) & (pick < 0.45)] = 0.0
    elif kind == "zeros":
        x = np.where(rng.random(shape) < 0.5, -0.0, 0.0).astype(np.float32)
        x[rng.random(shape) < 0.1] = -1.0
    return x.astype(DTYPES[dtype][1])


def bits(array):
    a = np.asarray(array)
    return a.view(np.uint32 if a.dtype.itemsize == 4 else np.uint16)


def poisoned(shape, dtype):
    """A result buffer every bit of which must be overwritten: quiet-NaN-with-payload patterns."""
    a = np.empty(shape, dtype)
    bits(a)[...] = 0x7FC0DEAD if a.dtype.itemsize == 4 else 0x7E5A
    return a


def assert_same(got, want, what):
    got32, want32 = np.asarray(got).astype(np.float32), np.asarray(want).astype(np.float32)
    nan = np.isnan(want32)
    np.testing.assert_array_equal(np.isnan(got32), nan, err_msg=f"{what}: NaN positions")
    np.testing.assert_array_equal(bits(got)[~nan], bits(want)[~nan], err_msg=f"{what}: bits")


def expected(impl, x, g, k, s, p, layout, out_layout):
    """y, indices, dx from indices, dx of backward, dx of backward_from_input by `impl` (cpu or reference)."""
    attrs = dict(kernel_size=k, stride=s, padding=p, data_format=layout, output_format=out_layout)
    y, idx = jax.jit(lambda x: impl.max_pooling_3d_forward(x, **attrs))(x)
    dx = jax.jit(lambda g, i: impl.max_pooling_3d_backward_from_indices(g, i, input_shape=x.shape, **attrs))(g, idx)
    dx_recompute = jax.jit(lambda g, x, y: impl.max_pooling_3d_backward(g, x, y, **attrs))(g, x, y)
    dx_from_input = jax.jit(lambda g, x: impl.max_pooling_3d_backward_from_input(g, x, **attrs))(g, x)
    return [np.asarray(a) for a in (y, idx, dx, dx_recompute, dx_from_input)]


def check_call_set(library, case, dtype, layouts, kind, **opts):
    """Runs all five calls of one configuration on the host and compares each result."""
    shape, k, s, p, _ = {**CASES, **WIDTH_CASES}[case]
    layout, out_layout = layouts
    in_cl, out_cl = layout == "NDHWC", out_layout == "NDHWC"
    if in_cl and case in CHANNELS_LAST:
        shape = (shape[0], CHANNELS_LAST[case], *shape[2:])
    rng = np.random.default_rng(abs(hash((case, dtype, layouts, kind))) % 2**32)
    x = to_layout(inputs(rng, shape, dtype, kind), in_cl)
    out_ncdhw = (shape[0], shape[1], *((n + 2 * pp - kk) // ss + 1 for n, kk, ss, pp in zip(shape[2:], k, s, p)))
    g = to_layout(rng.standard_normal(out_ncdhw).astype(np.float32).astype(DTYPES[dtype][1]), out_cl)
    g.reshape(-1)[:: 7] = -0.0  # -0 gradients come out +0 (the scatter's 0 + g)
    # Mixed layouts: the CPU kernels run them with the same shared scans as the
    # generic path here, so the independent reference is the pure-JAX binding.
    impl = cpu if layout == out_layout else reference
    y_want, idx_want, dx_want, dx_recompute_want, dx_from_input_want = expected(impl, x, g, k, s, p, layout, out_layout)
    o = options(dtype, **opts)
    common = (library, None, dtype, shape, k, s, p, in_cl, out_cl, o)

    def call(which, **buffers):
        return run(common[0], which, *common[2:], **buffers)

    y, idx = poisoned(g.shape, g.dtype), np.full(g.shape, 0x5A5A, np.int16)
    call(FORWARD, x=x, y=y, idx=idx)
    np.testing.assert_array_equal(idx, idx_want, err_msg="forward indices")
    assert_same(y, y_want, "forward maxima")

    y_only = poisoned(g.shape, g.dtype)
    call(FORWARD_OUTPUT, x=x, y=y_only)
    assert_same(y_only, y_want, "forward_output")

    dx = poisoned(x.shape, x.dtype)
    call(FROM_INDICES, go=g, idx_in=idx_want, dx=dx)
    assert_same(dx, dx_want, "backward_from_indices")

    dx = poisoned(x.shape, x.dtype)
    call(BACKWARD, x=x, y_in=y_want, go=g, dx=dx)
    assert_same(dx, dx_recompute_want, "backward (recompute)")

    dx = poisoned(x.shape, x.dtype)
    call(FROM_INPUT, x=x, go=g, dx=dx)
    assert_same(dx, dx_from_input_want, "backward_from_input")


# f16 shares bf16's packed code path (16-bit pairs): one input kind for it keeps the suite short.
DTYPE_KINDS = [(d, k) for d in DTYPES for k in ("ints", "specials", "zeros") if d != "f16" or k == "specials"]


@pytest.mark.parametrize("dtype,kind", DTYPE_KINDS, ids=[f"{d}-{k}" for d, k in DTYPE_KINDS])
@pytest.mark.parametrize("layouts", [("NCDHW", "NCDHW"), ("NDHWC", "NDHWC")], ids=["ncdhw", "ndhwc"])
@pytest.mark.parametrize("case", list(CASES))
def test_every_call_equals_the_cpu_kernels(host_elements, case, dtype, layouts, kind):
    check_call_set(host_elements, case, dtype, layouts, kind)


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("layouts", [("NCDHW", "NCDHW"), ("NDHWC", "NDHWC")], ids=["ncdhw", "ndhwc"])
@pytest.mark.parametrize("case", list(WIDTH_CASES))
def test_narrower_units_equal_the_cpu_kernels(host_elements, case, layouts, dtype):
    """One-lane units of non-overlapping windows, one-vector units of overlapping ones, half-vector NDHWC units
    (the plan checked: test_the_plan_takes_the_narrower_units)."""
    check_call_set(host_elements, case, dtype, layouts, "specials")


def test_the_plan_takes_the_narrower_units(host_elements):
    def step(case, call, dtype, **kw):
        shape, k, s, p, _ = WIDTH_CASES[case]
        return plan(host_elements, call, shape, k, s, p, dtype=dtype, **kw)[0][0]

    for dtype in ("f32", "bf16"):  # NCDHW rows of 14 / 10 elements: one window a unit, its columns one access
        for case in ("k2s2_one_lane", "k122_one_lane"):
            got = step(case, FROM_INPUT, dtype)
            assert (got["cls"], got["V"], got["kernel"]) == (WIDTH_CASES[case][4], 1, 3), (case, dtype)
    got = step("k122_one_lane", FORWARD, "bf16", in_cl=True)  # 3 channels
    assert (got["cls"], got["V"]) == (2, 1)
    # overlapping windows: two vectors a row (W = 24 f32: 2 x 2 windows), one (bf16: Wo = 12 is no multiple of 8)
    assert step("k3s2p1_w24", FORWARD, "f32")["V"] == 4 and step("k3s2p1_w24", FORWARD, "bf16")["V"] == 4
    assert step("k3s2p1_w12", FORWARD, "f32")["V"] == 2
    assert step("k3s2p1_w12", FORWARD, "bf16")["cls"] == GENERIC  # rows of 24 bytes
    # NDHWC overlapping windows, 16-bit channels a multiple of 4 but not 8: 4 channels a unit (64-bit accesses)
    for case, call in (("k3s2p1_c12", FORWARD), ("k3s2p1_c12", FROM_INPUT), ("k3s1p1_c4", FROM_INPUT)):
        for dtype in ("bf16", "f16"):
            steps, _ = plan(host_elements, call, *WIDTH_CASES[case][:4], in_cl=True, dtype=dtype)
            assert all((st["cls"], st["V"], st["layout"]) == (WIDTH_CASES[case][4], 4, 1) for st in steps), case
    # misaligned operands: the Generic kernels, whatever the class (host builds count the faults they avoid)
    got = step("k2s2_one_lane", FROM_INPUT, "f32", aligned=False)
    assert (got["cls"], got["V"]) == (GENERIC, GENERIC_LANES)


@pytest.mark.parametrize("kind", ["specials", "zeros"])
@pytest.mark.parametrize("case", ["k3s2p1", "generic_mixed", "k2s2"])
@pytest.mark.parametrize("layouts", [("NCDHW", "NDHWC"), ("NDHWC", "NCDHW")], ids=["to_cl", "from_cl"])
def test_mixed_layouts_equal_the_reference_binding(host_elements, case, layouts, kind):
    check_call_set(host_elements, case, "bf16", layouts, kind)


@pytest.mark.parametrize("variant", ["scalar", "misaligned", "int64", "chunked", "small_grid", "threads_64",
                                     "threads_fitted"])
@pytest.mark.parametrize("case", ["k2s2", "k3s2p1", "generic_strides"])
@pytest.mark.parametrize("layouts", [("NCDHW", "NCDHW"), ("NDHWC", "NDHWC")], ids=["ncdhw", "ndhwc"])
def test_launch_variants_give_the_same_bits(host_elements, case, layouts, variant):
    """The scalar (generic) path, misaligned buffers, int64 offsets, several chunks, grid-stride loops that
    go round more than once, and another block size all give the CPU kernels' results."""
    opts = {
        "scalar": dict(vector=False),
        "misaligned": dict(aligned=False),
        "int64": dict(wide=True),
        "chunked": dict(narrow_limit=2000),
        "small_grid": dict(max_blocks=3, threads=64),
        "threads_64": dict(threads=64),
        "threads_fitted": dict(threads=1024, kernel_max_threads=512),  # blocks fitted to the kernel's limit
    }[variant]
    check_call_set(host_elements, case, "f32", layouts, "specials", **opts)


def test_the_plan_picks_the_specialised_kernels(host_elements):
    """Fixed classes take their 128-bit paths; non-overlapping gradients are one fused kernel, no scratch."""
    for name, (shape, k, s, p, cls) in CASES.items():
        steps, scratch = plan(host_elements, FROM_INPUT, shape, k, s, p, dtype="bf16")
        overlapping = any(ss < kk for kk, ss in zip(k, s))
        if cls == GENERIC:
            assert all(st["cls"] == GENERIC and st["V"] == GENERIC_LANES for st in steps), name
        elif overlapping:
            assert [st["kernel"] for st in steps] == [5, 2] and scratch > 0, name  # window (indices only), gather
            assert all(st["cls"] == cls and st["V"] > 1 for st in steps), name
        else:
            assert [st["kernel"] for st in steps] == [3] and scratch == 0, name  # fused
            assert steps[0]["cls"] == cls and steps[0]["V"] == 4, name  # bf16: 4 windows of 2 = 8 columns
    # NDHWC: 8 bf16 channels a unit; f32: 4.
    steps, _ = plan(host_elements, FORWARD, (2, 16, 8, 8, 8), (2, 2, 2), (2, 2, 2), (0, 0, 0), in_cl=True, dtype="bf16")
    assert steps[0]["V"] == 8 and steps[0]["layout"] == 1
    steps, _ = plan(host_elements, FORWARD, (2, 16, 8, 8, 8), (2, 2, 2), (2, 2, 2), (0, 0, 0), in_cl=True)
    assert steps[0]["V"] == 4
    # Not a multiple of the vector: non-overlapping classes take their one-lane units, the rest the generic path.
    steps, _ = plan(host_elements, FORWARD, (2, 12, 8, 8, 8), (2, 2, 2), (2, 2, 2), (0, 0, 0), in_cl=True, dtype="bf16")
    assert steps[0]["cls"] == CASES["k2s2"][4] and steps[0]["V"] == 1
    steps, _ = plan(host_elements, FORWARD, (2, 6, 8, 8, 8), (3, 3, 3), (2, 2, 2), (1, 1, 1), in_cl=True, dtype="bf16")
    assert steps[0]["cls"] == GENERIC and steps[0]["V"] == GENERIC_LANES
    # (12 channels: half vectors, test_the_plan_takes_the_narrower_units)


ELEMENTS_31 = 2**31


@pytest.mark.parametrize("plane,wide", [
    ((2047, 1024, 1024), False),  # 2^31 - 2^20 elements a plane: one plane a launch, int32
    ((1, 8, 2**28 - 4), False),  # 2^31 - 32: just below
    ((2048, 1024, 1024), True),  # 2^31: int64 offsets (the generic kernels), one launch
    ((2049, 1024, 1024), True),
    ((64, 256, 256), False),  # 2^22: all 64 planes in one launch
])
def test_offset_width_at_the_int32_boundary(host_elements, plane, wide):
    """Planes below 2^31 elements are chunked with int32 offsets; a plane of 2^31 or more takes int64."""
    elems = plane[0] * plane[1] * plane[2]
    planes = 64
    # C3D's (1,2,2) window: a specialised class, whose NCDHW launches are cut into whole planes
    steps, _ = plan(host_elements, FROM_INDICES, (1, planes, *plane), (1, 2, 2), (1, 2, 2), (0, 0, 0))
    st = steps[0]
    assert bool(st["wide"]) == wide == (elems >= ELEMENTS_31)
    if wide:
        assert st["chunks"] == 1 and st["cls"] == GENERIC and st["V"] == 1  # one channel a unit
    else:
        assert st["per_chunk"] == min(planes, max(1, (ELEMENTS_31 - 1) // elems))
        assert st["chunks"] == -(-planes // st["per_chunk"])
        # each launch's offsets and unit numbers stay below 2^31, a grid stride on top fits uint32
        assert st["per_chunk"] * elems < ELEMENTS_31
        assert st["first_units"] < ELEMENTS_31 and st["first_units"] + st["blocks"] * st["threads"] < 2**32
        assert st["last_units"] == (planes - (st["chunks"] - 1) * st["per_chunk"]) * st["units_per_outer"]
    assert 1 <= st["blocks"] <= 2**16  # far inside CUDA's 2^31 - 1 blocks


def test_chunks_cover_input_larger_and_smaller_than_output(host_elements):
    """Gathers count units over the input (larger than the output), window kernels over the output;
    chunks hold whole planes and together cover every plane."""
    shape, k, s, p = (4, 8, 64, 128, 128), (3, 3, 3), (2, 2, 2), (1, 1, 1)
    steps, _ = plan(host_elements, FROM_INPUT, shape, k, s, p, narrow_limit=2**21)
    window, gather = steps
    planes = shape[0] * shape[1]
    assert window["units_per_outer"] * window["V"] == 32 * 64 * 64  # outputs of one plane
    # blocks of 2 x 2 x V input positions (D, H, W) of one plane
    assert gather["units_per_outer"] * gather["V"] * 2 * 2 == 64 * 128 * 128
    for st in steps:
        assert (st["chunks"] - 1) * st["per_chunk"] < planes <= st["chunks"] * st["per_chunk"]
        assert st["per_chunk"] * 64 * 128 * 128 < 2**21


def test_a_plan_sending_misaligned_operands_down_a_vector_path_is_caught(host_elements):
    """The host build copies vectors element by element, so a misaligned vector access gives the right bits here;
    it counts each one instead (a device faults): an input shifted by one element under a plan told it is aligned
    must be counted, the same input planned as misaligned (the Generic kernels) must not."""
    shape, k, s, p, _ = CASES["k2s2"]
    x_all = inputs(np.random.default_rng(5), (int(np.prod(shape)) + 1,), "f32", "ints")
    x = x_all[1:].reshape(shape)  # 4 bytes past a 16-byte boundary
    assert x.ctypes.data % 16 != 0
    y, idx = poisoned((*shape[:2], 3, 4, 8), np.float32), np.zeros((*shape[:2], 3, 4, 8), np.int16)
    host_elements.pool3d_misaligned()
    host_elements.pool3d_run(FORWARD, 0, _pointer(np.asarray(shape, np.int64)), _pointer(np.asarray([*k, *s, *p])),
                             0, 0, _pointer(options()), _pointer(x), None, None, None, _pointer(y), _pointer(idx), None)
    assert host_elements.pool3d_misaligned() > 0
    run(host_elements, FORWARD, "f32", shape, k, s, p, False, False, options(aligned=False), x=x, y=y, idx=idx)


def test_a_block_larger_than_a_kernel_launches_is_fitted_to_it(host_elements):
    """POOL3D_CUDA_THREADS=1024 where a kernel launches at most 512 (cudaFuncGetAttributes): kernels.cu's launches
    fit the block (FitThreads) instead of failing the program; the host executor fits them the same way and counts
    them (1000 a fitted launch in pool3d_run's answer), and the results are the CPU kernels' (the launch variants)."""
    shape, k, s, p, _ = CASES["k3s2p1"]
    out = (*shape[:2], 5, 4, 8)
    rng = np.random.default_rng(3)
    x, g = inputs(rng, shape, "f32", "ints"), rng.standard_normal(out).astype(np.float32)
    dx = poisoned(shape, np.float32)
    got = host_elements.pool3d_run(FROM_INPUT, 0, _pointer(np.asarray(shape, np.int64)),
                                   _pointer(np.asarray([*k, *s, *p], np.int64)), 0, 0,
                                   _pointer(options(threads=1024, kernel_max_threads=512)), _pointer(x), None,
                                   _pointer(g), None, None, None, _pointer(dx))
    assert got == 2 + 2 * 1000  # window and gather, both fitted
    attrs = dict(kernel_size=k, stride=s, padding=p, data_format="NCDHW", output_format="NCDHW")
    want = np.asarray(jax.jit(lambda g, x: cpu.max_pooling_3d_backward_from_input(g, x, **attrs))(g, x))
    assert_same(dx, want, "fitted launches")
    assert host_elements.pool3d_fit_threads(1024, 512) == 512 and host_elements.pool3d_fit_threads(256, 512) == 256
    assert host_elements.pool3d_fit_threads(1024, 0) == 1024 and host_elements.pool3d_fit_threads(1024, 100) == 96


def test_no_scratch_is_an_error_before_any_launch(host_elements):
    """Overlapping windows need int16 indices between two kernels, from XLA's scratch allocator: where it has
    none, the call fails with kernels.cu's resource-exhausted error (RunStatus::kNoScratch) before launching
    anything; non-overlapping windows (one fused kernel) need none."""
    rng = np.random.default_rng(4)
    for name, want in (("k3s2p1", -2), ("k2s2", 1)):
        shape, k, s, p, _ = CASES[name]
        out = (*shape[:2], *((n + 2 * pp - kk) // ss + 1 for n, kk, ss, pp in zip(shape[2:], k, s, p)))
        x, g = inputs(rng, shape, "f32", "ints"), rng.standard_normal(out).astype(np.float32)
        dx = poisoned(shape, np.float32)
        got = host_elements.pool3d_run(FROM_INPUT, 0, _pointer(np.asarray(shape, np.int64)),
                                       _pointer(np.asarray([*k, *s, *p], np.int64)), 0, 0,
                                       _pointer(options(no_scratch=True)), _pointer(x), None, _pointer(g), None, None,
                                       None, _pointer(dx))
        assert got == want, name
    shape, k, s, p, _ = CASES["k3s2p1"]
    dx = poisoned(shape, np.float32)
    host_elements.pool3d_run(FROM_INPUT, 0, _pointer(np.asarray(shape, np.int64)),
                             _pointer(np.asarray([*k, *s, *p], np.int64)), 0, 0, _pointer(options(no_scratch=True)),
                             _pointer(inputs(rng, shape, "f32", "ints")), None,
                             _pointer(np.zeros((*shape[:2], 5, 4, 8), np.float32)), None, None, None, _pointer(dx))
    assert (bits(dx) == 0x7FC0DEAD).all()  # nothing launched


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_ragged_rows_store_only_their_windows(host_elements, dtype):
    """k2 s1 and k3 s2 without padding (Fixed's kRaggedRows): NCDHW rows of 15 and 7 windows end in part of a
    two-vector unit, whose other lanes store nothing: the poison after the last output stays, whatever order
    the grid runs the rows in (one block of 64 threads: a row's unit may run before the one before it)."""
    for name in ("k2s1", "k3s2"):
        shape, k, s, p, _ = CASES[name]
        out = (*shape[:2], *((n + 2 * pp - kk) // ss + 1 for n, kk, ss, pp in zip(shape[2:], k, s, p)))
        count = int(np.prod(out))
        x = inputs(np.random.default_rng(8), shape, dtype, "specials")
        y_all, idx_all = poisoned((count + 16,), DTYPES[dtype][1]), np.full(count + 16, 0x5A5A, np.int16)
        y, idx = y_all[:count].reshape(out), idx_all[:count].reshape(out)
        run(host_elements, FORWARD, dtype, shape, k, s, p, False, False, options(dtype, max_blocks=1, threads=64),
            x=x, y=y, idx=idx)
        attrs = dict(kernel_size=k, stride=s, padding=p, data_format="NCDHW", output_format="NCDHW")
        y_want, idx_want = jax.jit(functools.partial(cpu.max_pooling_3d_forward, **attrs))(x)
        np.testing.assert_array_equal(idx, np.asarray(idx_want), err_msg=name)
        assert_same(y, np.asarray(y_want), name)
        assert (idx_all[count:] == 0x5A5A).all() and (bits(y_all[count:]) == bits(poisoned((16,), y.dtype))).all()


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("case", ["k3s2p1", "k2s2", "k2s1"])
def test_a_given_output_that_is_not_the_maximum_selects_the_first_equal_tap(host_elements, case, dtype):
    """backward's selection where y is not its window's maximum (the NCDHW kernels find the maximum and check it
    against y; a y that is not the maximum takes the rare path): the first tap equal to y, else nothing."""
    shape, k, s, p, _ = CASES[case]
    rng = np.random.default_rng(6)
    x = inputs(rng, shape, dtype, "ints")
    out = (*shape[:2], *((n + 2 * pp - kk) // ss + 1 for n, kk, ss, pp in zip(shape[2:], k, s, p)))
    y = rng.integers(-3, 4, out).astype(np.float32).astype(DTYPES[dtype][1])  # often not the maximum
    g = rng.standard_normal(out).astype(np.float32).astype(DTYPES[dtype][1])
    attrs = dict(kernel_size=k, stride=s, padding=p, data_format="NCDHW", output_format="NCDHW")
    want = np.asarray(jax.jit(lambda g, x, y: cpu.max_pooling_3d_backward(g, x, y, **attrs))(g, x, y))
    dx = poisoned(shape, x.dtype)
    run(host_elements, BACKWARD, dtype, shape, k, s, p, False, False, options(dtype), x=x, y_in=y, go=g, dx=dx)
    assert_same(dx, want, "backward with a given y")


def test_corrupt_indices_select_nothing(host_elements):
    """Indices out of range or naming a padding tap write nothing (the CPU kernels agree)."""
    shape, k, s, p = (1, 2, 5, 5, 5), (3, 3, 3), (2, 2, 2), (1, 1, 1)
    out_shape = (1, 2, 3, 3, 3)
    rng = np.random.default_rng(0)
    g = rng.standard_normal(out_shape).astype(np.float32)
    idx = rng.integers(-40, 60, size=out_shape).astype(np.int16)
    idx[0, 0, 0, 0, 0] = 0  # tap (0, 0, 0) of the corner window: padding
    attrs = dict(kernel_size=k, stride=s, padding=p, data_format="NCDHW", output_format="NCDHW")
    dx_cpu = np.asarray(
        jax.jit(lambda g, i: cpu.max_pooling_3d_backward_from_indices(g, i, input_shape=shape, **attrs))(g, idx)
    )
    dx = poisoned(shape, np.float32)
    run(host_elements, FROM_INDICES, "f32", shape, k, s, p, False, False, options(), go=g, idx_in=idx, dx=dx)
    np.testing.assert_array_equal(bits(dx), bits(dx_cpu))
    assert not np.isnan(dx).any()
