"""The CUDA kernels' per-element code, compiled for the host, against the CPU kernels.

`pool3d_pass/bindings/gpu/cuda/elements.h` is what each CUDA thread runs (one
result element), built from the shared selection and geometry headers
(`cpu/kernels/common`, `POOL3D_HD`). Compiled here with the host's C++
compiler (no GPU, no nvcc), it is run over every element of every result and
compared, bit for bit, with the CPU binding's kernels on the same inputs: the
forward's maxima and indices, the recompute backward's selection, and the
gathered gradient (whose f32 sums run in the scatter's window order, so the
bits agree). Both offset types (int32 and int64) are checked.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
from pathlib import Path

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from pool3d_pass.bindings import cpu

pytestmark = [pytest.mark.usefixtures("cpu_kernels"), pytest.mark.gpu]

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "tests" / "kernels" / "host" / "cuda_elements_host.cc"
DTYPES = {"f32": (0, np.float32), "bf16": (1, ml_dtypes.bfloat16), "f16": (2, np.float16)}
FORWARD, FORWARD_OUTPUT, INDICES, SELECT, GATHER = range(5)

CASES = [
    # (input shape in NCDHW order: B, C, D, H, W), kernel, stride, padding
    ((2, 3, 7, 6, 5), (2, 2, 2), (2, 2, 2), (0, 0, 0)),
    ((1, 4, 9, 8, 7), (3, 3, 3), (2, 2, 2), (1, 1, 1)),
    ((2, 2, 6, 6, 6), (3, 3, 3), (1, 1, 1), (1, 1, 1)),
    ((1, 3, 7, 5, 6), (1, 2, 3), (1, 2, 2), (0, 1, 1)),
    ((1, 2, 5, 9, 4), (2, 3, 2), (3, 1, 2), (1, 2, 0)),
]


@pytest.fixture(scope="module")
def host_elements(tmp_path_factory):
    compiler = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if compiler is None:
        pytest.skip("no host C++ compiler (g++, c++ or clang++) to build the per-element code with")
    out = tmp_path_factory.mktemp("cuda_elements") / "elements.so"
    # e.g. POOL3D_ELEMENTS_CXXFLAGS="-fsanitize=address,undefined" (with libasan preloaded, as make sanitize does)
    extra = os.environ.get("POOL3D_ELEMENTS_CXXFLAGS", "").split()
    subprocess.run(
        [compiler, "-std=c++17", "-O1", "-shared", "-fPIC", *extra,
         f"-I{ROOT / 'pool3d_pass/bindings/cpu/kernels'}", f"-I{ROOT / 'pool3d_pass/bindings/gpu/cuda'}",
         str(SOURCE), "-o", str(out)],
        check=True,
    )
    library = ctypes.CDLL(str(out))
    library.pool3d_elements_run.restype = None
    return library


def _pointer(array):
    return None if array is None else array.ctypes.data_as(ctypes.c_void_p)


def run(library, kind, dtype, wide, shape, k, s, p, in_cl, out_cl, a, b=None, out0=None, out1=None):
    dims = np.asarray(shape, np.int64)
    ksp = np.asarray([*k, *s, *p], np.int64)
    library.pool3d_elements_run(
        kind, DTYPES[dtype][0], int(wide), _pointer(dims), _pointer(ksp), int(in_cl), int(out_cl),
        _pointer(a), _pointer(b), _pointer(out0), _pointer(out1),
    )


def to_layout(array_ncdhw, channels_last):
    return np.ascontiguousarray(array_ncdhw.transpose(0, 2, 3, 4, 1) if channels_last else array_ncdhw)


def inputs(rng, shape, dtype, special):
    """Tie-heavy values (few distinct), or with NaN, +-inf and signed zeros mixed in."""
    x = rng.integers(-3, 4, size=shape).astype(np.float32)
    if special:
        pick = rng.random(shape)
        x[pick < 0.04] = np.nan
        x[(pick >= 0.04) & (pick < 0.10)] = -np.inf
        x[(pick >= 0.10) & (pick < 0.13)] = np.inf
        x[(pick >= 0.13) & (pick < 0.30)] = -0.0
        x[(pick >= 0.30) & (pick < 0.45)] = 0.0
    return x.astype(DTYPES[dtype][1])


def bits(array):
    return np.asarray(array).view(np.uint32 if np.asarray(array).dtype.itemsize == 4 else np.uint16)


def cpu_results(x, g, k, s, p, layout, out_layout):
    attrs = dict(kernel_size=k, stride=s, padding=p, data_format=layout, output_format=out_layout)
    y, idx = jax.jit(lambda x: cpu.max_pooling_3d_forward(x, **attrs))(x)
    dx = jax.jit(lambda g, i: cpu.max_pooling_3d_backward_from_indices(g, i, input_shape=x.shape, **attrs))(g, idx)
    dx_recompute = jax.jit(lambda g, x, y: cpu.max_pooling_3d_backward(g, x, y, **attrs))(g, x, y)
    return np.asarray(y), np.asarray(idx), np.asarray(dx), np.asarray(dx_recompute)


@pytest.mark.parametrize("wide", [False, True], ids=["int32", "int64"])
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("layouts", [("NCDHW", "NCDHW"), ("NDHWC", "NDHWC"), ("NCDHW", "NDHWC")])
def test_elements_equal_the_cpu_kernels(host_elements, case, dtype, wide, layouts):
    shape, k, s, p = CASES[case]
    layout, out_layout = layouts
    in_cl, out_cl = layout == "NDHWC", out_layout == "NDHWC"
    rng = np.random.default_rng(case * 7 + len(dtype))
    special = case % 2 == 1
    x = to_layout(inputs(rng, shape, dtype, special), in_cl)
    out_ncdhw = (shape[0], shape[1], *((n + 2 * pp - kk) // ss + 1 for n, kk, ss, pp in zip(shape[2:], k, s, p)))
    g = to_layout(rng.standard_normal(out_ncdhw).astype(np.float32).astype(DTYPES[dtype][1]), out_cl)
    y_cpu, idx_cpu, dx_cpu, dx_recompute_cpu = cpu_results(x, g, k, s, p, layout, out_layout)
    args = (host_elements, None, dtype, wide, shape, k, s, p, in_cl, out_cl)

    def call(kind, a, b=None, out0=None, out1=None):
        run(args[0], kind, *args[2:], a, b, out0, out1)

    y, idx = np.empty_like(g), np.empty(g.shape, np.int16)
    call(FORWARD, x, out0=y, out1=idx)
    np.testing.assert_array_equal(idx, idx_cpu, err_msg="forward indices")
    # NaN payloads are not part of the contract; every other bit is.
    nan = np.isnan(y_cpu.astype(np.float32))
    np.testing.assert_array_equal(np.isnan(y.astype(np.float32)), nan)
    np.testing.assert_array_equal(bits(y)[~nan], bits(y_cpu)[~nan], err_msg="forward maxima")

    y_only = np.empty_like(g)
    call(FORWARD_OUTPUT, x, out0=y_only)
    np.testing.assert_array_equal(bits(y_only), bits(y))
    idx_only = np.full(g.shape, 7, np.int16)
    call(INDICES, x, out1=idx_only)
    np.testing.assert_array_equal(idx_only, idx_cpu)

    selected = np.full(g.shape, 7, np.int16)
    call(SELECT, x, y_cpu, out1=selected)
    # The recompute selection is the first tap equal to y: the forward's, except
    # where y is NaN (no tap equals NaN: -1 as well).
    np.testing.assert_array_equal(selected, idx_cpu, err_msg="select")

    dx = np.empty_like(x)
    call(GATHER, g, idx_cpu, out0=dx)
    np.testing.assert_array_equal(bits(dx), bits(dx_cpu), err_msg="gather from indices")
    dx_selected = np.empty_like(x)
    call(GATHER, g, selected, out0=dx_selected)
    np.testing.assert_array_equal(bits(dx_selected), bits(dx_recompute_cpu), err_msg="gather of the recompute selection")


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
    dx = np.full(shape, np.nan, np.float32)
    run(host_elements, GATHER, "f32", False, shape, k, s, p, False, False, g, idx, out0=dx)
    np.testing.assert_array_equal(bits(dx), bits(dx_cpu))
    assert not np.isnan(dx).any()
