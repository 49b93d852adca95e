"""The gpu binding's Pallas kernels in interpret mode, on CPU, against the contract's references.

POOL3D_GPU_INTERPRET=1 runs the same kernel bodies as plain StableHLO
(bindings/gpu/calls.py). Judged against the float64 numpy statement
(oracles/contract_numpy.py: selection, gradient) and the pure-JAX reference binding
(bindings/reference.py: forward maxima bit for bit, as XLA's reduce_window
computes them): every call over hypothesis configurations (both layouts,
f32/bf16/f16, overlapping windows, padding), then the tie-heavy, -inf, NaN,
-0/+0 and corrupt-index inputs, the int64-offset variant, the unrolled
variant (what the GPU runs), and the fallback.

Interpret mode loops over the taps (a faster XLA:CPU compile); the unrolled
kernels the GPU runs are checked on a few configurations here, and lowered
for cuda in tests/bindings/gpu/test_gpu_lowering.py.
"""

from __future__ import annotations

import contextlib
import logging

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oracles.contract_numpy import assert_bit_exact, check_pool_gradient, max_pool_grad_reference
from oracles.float_bits import assert_same_bits
from pool3d_pass.bindings import reference as jax_reference
from pool3d_pass.bindings.gpu import calls
from pool3d_pass.bindings.gpu.pallas import kernels
from pool3d_pass.contract.pool_config import PoolConfig

from kernel_examples import KernelExamples

pytestmark = pytest.mark.gpu

DTYPES = {"f32": np.dtype(np.float32), "bf16": np.dtype(ml_dtypes.bfloat16), "f16": np.dtype(np.float16)}


@pytest.fixture(autouse=True)
def interpret(monkeypatch):
    monkeypatch.setenv(calls.INTERPRET_ENV, "1")


def to_ncdhw(a, layout):
    return np.moveaxis(a, -1, 1) if layout == "NDHWC" else a


def from_ncdhw(a, layout):
    return np.moveaxis(a, 1, -1) if layout == "NDHWC" else a


def all_calls(x, g, attrs):
    """Every call of the gpu binding on (x, g), in one jitted program (one XLA:CPU compile)."""

    def program(x, g):
        y, index = calls.max_pooling_3d_forward(x, **attrs)
        return {
            "y": y,
            "index": index,
            "y_only": calls.max_pooling_3d_forward_output(x, **attrs),
            "from_indices": calls.max_pooling_3d_backward_from_indices(g, index, input_shape=x.shape, **attrs),
            "backward": calls.max_pooling_3d_backward(g, x, y, **attrs),
            "from_input": calls.max_pooling_3d_backward_from_input(g, x, **attrs),
        }

    return {k: np.asarray(v) for k, v in jax.jit(program)(x, g).items()}


def assert_same_floats(actual, expected, what):
    """Bitwise, except that any NaN matches any NaN (payloads and signs are not in the contract)."""
    assert_same_bits(actual, expected, what, nan="any")


def check_all(x, g, kernel_size, stride, padding, layout, *, finite=True, kernel=None):
    """Every call against the references; x, g in `layout`, of one float dtype.
    `kernel` (a KernelExamples) counts the run of the kernels."""
    attrs = dict(kernel_size=kernel_size, stride=stride, padding=padding, data_format=layout)
    got = all_calls(x, g, attrs)
    if kernel is not None:
        kernel.reached()
    window, strides = (1, 1, *kernel_size), (1, 1, *stride)
    pads = [(0, 0), (0, 0)] + [(p, p) for p in padding]
    ref = max_pool_grad_reference(to_ncdhw(x, layout), to_ncdhw(g, layout), window, strides, pads)

    y_ref, index_ref = (np.asarray(a) for a in jax_reference.max_pooling_3d_forward(x, **attrs))
    assert_same_floats(got["y"], y_ref, "forward maxima vs XLA's reduce_window")
    assert_same_floats(got["y_only"], y_ref, "forward_output vs XLA's reduce_window")
    assert np.array_equal(got["index"], index_ref), "indices vs the reference binding"
    assert np.array_equal(to_ncdhw(got["index"], layout), ref.selected), "indices vs the numpy statement"
    for name in ("backward", "from_input"):
        assert_bit_exact(got[name], got["from_indices"], f"{name} vs from_indices")
    grad = to_ncdhw(got["from_indices"], layout)
    if finite:
        spec = np.asarray(jax_reference.max_pooling_3d_backward_from_indices(
            g, index_ref, input_shape=x.shape, **attrs))
        check_pool_gradient(to_ncdhw(x, layout), to_ncdhw(g, layout), window, strides, pads,
                            to_ncdhw(spec, layout), grad)
    else:  # the selection is exact; sums of at most a few small integers are exact in f32
        assert_bit_exact(grad, ref.grad.astype(grad.dtype), "gradient vs the numpy statement")
    return got


@st.composite
def configurations(draw):
    layout = draw(st.sampled_from(["NCDHW", "NDHWC"]))
    dtype = draw(st.sampled_from(sorted(DTYPES)))
    kernel_size = tuple(draw(st.integers(1, 3)) for _ in range(3))
    stride = tuple(draw(st.integers(1, 3)) for _ in range(3))
    padding = tuple(draw(st.integers(0, k - 1)) for k in kernel_size)
    spatial = tuple(draw(st.integers(max(1, k - 2 * p), 7)) for k, p in zip(kernel_size, padding))
    batch, channels = draw(st.integers(1, 2)), draw(st.integers(1, 3))
    seed = draw(st.integers(0, 2**16))
    return layout, DTYPES[dtype], kernel_size, stride, padding, (batch, channels, *spatial), seed


def inputs(shape_ncdhw, kernel_size, stride, padding, layout, dtype, seed, *, ties=True):
    rng = np.random.default_rng(seed)
    out = tuple((n + 2 * p - k) // s + 1 for n, k, s, p in zip(shape_ncdhw[2:], kernel_size, stride, padding))
    x = rng.integers(-2, 3, shape_ncdhw) if ties else rng.standard_normal(shape_ncdhw)
    g = rng.integers(-4, 5, (*shape_ncdhw[:2], *out)) / 4 if ties else rng.standard_normal((*shape_ncdhw[:2], *out))
    return from_ncdhw(x.astype(dtype), layout), from_ncdhw(g.astype(dtype), layout)


DRAWN_EXAMPLES = 8  # each compiles every call anew in interpret mode (~10 s); the special cases below add the rest


def test_every_call_matches_the_references():
    # Every draw is a configuration the kernels accept (padding below the window).
    kernel = KernelExamples()

    @settings(max_examples=DRAWN_EXAMPLES, print_blob=True)
    @given(configurations(), st.booleans())
    def drawn(config, ties):
        layout, dtype, kernel_size, stride, padding, shape, seed = config
        x, g = inputs(shape, kernel_size, stride, padding, layout, dtype, seed, ties=ties)
        check_all(x, g, kernel_size, stride, padding, layout, kernel=kernel)

    drawn()
    kernel.assert_at_least(DRAWN_EXAMPLES)


SPECIAL_CASES = [
    ("NCDHW", (3, 3, 3), (2, 2, 2), (1, 1, 1)),
    ("NDHWC", (2, 2, 2), (1, 1, 1), (1, 0, 1)),
    ("NDHWC", (3, 1, 2), (1, 2, 2), (0, 0, 1)),
]


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("layout,kernel_size,stride,padding", SPECIAL_CASES)
def test_nan_inf_and_signed_zeros(layout, kernel_size, stride, padding, dtype):
    """NaN windows select nothing (index -1, output NaN); all -inf windows select their first real
    tap; -0 and +0 tie (the first is selected) while the maximum is +0."""
    rng = np.random.default_rng(7)
    shape = (2, 2, 5, 4, 6)
    x = from_ncdhw(_specials(shape, rng).astype(DTYPES[dtype]), layout)
    _, g = inputs(shape, kernel_size, stride, padding, layout, DTYPES[dtype], 3)
    got = check_all(x, g, kernel_size, stride, padding, layout, finite=False)
    y = to_ncdhw(got["y"].astype(np.float64), layout)
    index = to_ncdhw(got["index"], layout)
    assert np.array_equal(np.isnan(y), index == -1), "NaN maximum <=> no selection"
    assert np.isneginf(y[0, 0]).all() and (index[0, 0] >= 0).all(), "all -inf windows select a real tap"
    assert (y[1, 1] == 0).all() and (index[1, 1] >= 0).all()


def _specials(shape, rng):
    values = np.array([0.0, -0.0, 1.0, -np.inf, np.nan, -1.0, np.inf])
    x = rng.choice(values, size=shape, p=[0.25, 0.25, 0.1, 0.2, 0.05, 0.1, 0.05])
    x[0, 0] = -np.inf  # a plane of -inf only: every window all -inf
    x[1, 1] = rng.choice([0.0, -0.0], size=shape[2:])  # signed zeros only
    return x


def test_signed_zero_maximum_is_positive_and_the_first_zero_is_selected():
    x = np.array([-0.0, 0.0, -0.0, -0.0], np.float32).reshape(1, 1, 1, 1, 4)
    attrs = dict(kernel_size=(1, 1, 2), stride=(1, 1, 2), padding=(0, 0, 0), data_format="NCDHW")
    got = all_calls(x, np.ones((1, 1, 1, 1, 2), np.float32), attrs)
    assert got["y"].ravel().tolist() == [0.0, -0.0] and not np.signbit(got["y"].ravel()[0])
    assert np.signbit(got["y"].ravel()[1])
    assert got["index"].ravel().tolist() == [0, 0]
    assert got["from_indices"].ravel().tolist() == [1.0, 0.0, 1.0, 0.0]


def test_zero_gradient_sums_are_positive_zero():
    """grad_input starts at +0: a window's -0 gradient leaves +0 (XLA folds +0 + x in interpret mode)."""
    x = np.arange(8, dtype=np.float32).reshape(1, 1, 2, 2, 2)
    g = np.array(-0.0, np.float32).reshape(1, 1, 1, 1, 1)
    attrs = dict(kernel_size=(2, 2, 2), stride=(2, 2, 2), padding=(0, 0, 0), data_format="NCDHW")
    got = all_calls(x, g, attrs)
    for name in ("from_indices", "backward", "from_input"):
        assert not np.signbit(got[name]).any(), name


def test_corrupt_indices_select_nothing():
    """Indices outside [0, K), or naming a tap in the padding, write nothing and never out of bounds."""
    attrs = dict(kernel_size=(2, 2, 2), stride=(2, 2, 2), padding=(1, 1, 1), data_format="NCDHW")
    shape, out = (1, 2, 3, 3, 3), (1, 2, 2, 2, 2)
    index = np.full(out, 7, np.int16)  # the last tap: real in every window here
    index[0, 0, 0, 0, 0] = 0  # tap (0,0,0) of window 0 lies in the padding
    index[0, 0, 1, 1, 1] = 8  # out of range
    index[0, 1, 0, 0, 1] = -1
    index[0, 1, 1, 0, 0] = -32768
    index[0, 1, 1, 1, 0] = 32767
    g = np.arange(1, 17, dtype=np.float32).reshape(out)
    got = np.asarray(jax.jit(lambda g, i: calls.max_pooling_3d_backward_from_indices(
        g, i, input_shape=shape, **attrs))(g, index))
    expected = np.asarray(jax_reference.max_pooling_3d_backward_from_indices(g, index, input_shape=shape, **attrs))
    assert_bit_exact(got, expected, "corrupt indices vs the reference binding")
    assert got.sum() == g.sum() - sum(g[i] for i in [(0, 0, 0, 0, 0), (0, 0, 1, 1, 1), (0, 1, 0, 0, 1),
                                                     (0, 1, 1, 0, 0), (0, 1, 1, 1, 0)])


@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
def test_mixed_layouts(layout):
    """output_format may differ from data_format (the pass never emits it; bindings accept it)."""
    other = "NDHWC" if layout == "NCDHW" else "NCDHW"
    rng = np.random.default_rng(1)
    x = rng.integers(-2, 3, (2, 5, 4, 6, 3) if layout == "NDHWC" else (2, 3, 5, 4, 6)).astype(np.float32)
    attrs = dict(kernel_size=(3, 2, 2), stride=(2, 1, 2), padding=(1, 0, 1), data_format=layout, output_format=other)
    y, index = jax.jit(lambda x: calls.max_pooling_3d_forward(x, **attrs))(x)
    y_ref, index_ref = jax_reference.max_pooling_3d_forward(x, **attrs)
    assert_bit_exact(np.asarray(y), np.asarray(y_ref), "forward, mixed layouts")
    assert np.array_equal(np.asarray(index), np.asarray(index_ref))
    g = rng.integers(-3, 4, y.shape).astype(np.float32)
    dx = jax.jit(lambda g, x, y: calls.max_pooling_3d_backward(g, x, y, **attrs))(g, x, y)
    dx_ref = jax_reference.max_pooling_3d_backward(g, x, y_ref, **attrs)
    np.testing.assert_array_equal(np.asarray(dx), np.asarray(dx_ref))


@pytest.mark.parametrize("variant", ["unrolled", "int64 offsets", "loop over a large window"])
def test_kernel_variants(monkeypatch, variant):
    """What the GPU runs (taps unrolled), 64-bit offsets (forced on small tensors), a window past the unroll limit."""
    kernel_size, stride, padding = (3, 3, 2), (2, 1, 2), (1, 1, 0)
    if variant == "unrolled":
        monkeypatch.setattr(kernels, "INTERPRET_UNROLL_LIMIT", kernels.UNROLL_LIMIT)
    elif variant == "int64 offsets":
        monkeypatch.setattr(kernels, "needs_wide_offsets", lambda *sizes: True)
    else:
        kernel_size, stride, padding = (5, 4, 4), (1, 1, 2), (2, 1, 0)  # 80 taps, 20 covering windows
        monkeypatch.setattr(kernels, "INTERPRET_UNROLL_LIMIT", 16)
    shape = (1, 2, 6, 5, 7)
    # Interpret mode evaluates the kernel's int64 slices outside its trace: under x64 too.
    context = jax.enable_x64(True) if variant == "int64 offsets" else contextlib.nullcontext()
    for layout in ("NCDHW", "NDHWC") if variant == "int64 offsets" else ("NDHWC",):
        x, g = inputs(shape, kernel_size, stride, padding, layout, DTYPES["f32"], 11)
        with context:
            check_all(x, g, kernel_size, stride, padding, layout)


def test_wide_offsets_and_grid_limits_are_decided_by_size():
    assert not kernels.needs_wide_offsets(2**31 - 2 * kernels.BLOCK, 10)
    assert kernels.needs_wide_offsets(2**31, 10)
    g = kernels.Geometry(2**20, 2**20, (2**10, 2**10, 2**10), (1, 1, 1), PoolConfig((1, 1, 1), (1, 1, 1), (0, 0, 0)),
                         wide=True)
    assert "exceeds CUDA's" in kernels.launch_refusal(g)
    ok = kernels.Geometry(64, 64, (256, 256, 256), (128, 128, 128), PoolConfig((2, 2, 2), (2, 2, 2), (0, 0, 0)),
                          wide=True)
    assert kernels.launch_refusal(ok) is None  # 2^36 elements: a grid of 2^29 blocks


def test_empty_batch():
    x = np.zeros((0, 3, 4, 4, 4), np.float32)
    attrs = dict(kernel_size=(2, 2, 2), stride=(2, 2, 2), padding=(0, 0, 0), data_format="NCDHW")
    y, index = calls.max_pooling_3d_forward(x, **attrs)
    assert y.shape == index.shape == (0, 3, 2, 2, 2) and index.dtype == jnp.int16
    assert calls.max_pooling_3d_backward_from_input(np.zeros(y.shape, np.float32), x, **attrs).shape == x.shape


def test_fallback_is_the_reference_with_a_warning(monkeypatch, caplog):
    monkeypatch.setattr(calls, "_kernels", lambda: (None, "Pallas Triton backend unavailable (test)"))
    calls._warn_fallback.cache_clear()
    x, g = inputs((1, 2, 4, 5, 4), (2, 2, 2), (1, 2, 1), (1, 0, 0), "NCDHW", DTYPES["f32"], 5)
    attrs = dict(kernel_size=(2, 2, 2), stride=(1, 2, 1), padding=(1, 0, 0), data_format="NCDHW")
    with caplog.at_level(logging.WARNING, logger="pool3d_pass"):
        got = all_calls(x, g, attrs)
    y_ref, index_ref = jax_reference.max_pooling_3d_forward(x, **attrs)
    assert np.array_equal(got["index"], np.asarray(index_ref))
    assert_bit_exact(got["y_only"], np.asarray(y_ref), "fallback forward_output")
    assert any("pure-JAX reference" in r.getMessage() and "(test)" in r.getMessage() for r in caplog.records)
    calls._warn_fallback.cache_clear()
