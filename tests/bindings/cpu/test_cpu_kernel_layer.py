"""Tests of the CPU kernels of the layer calls: forward with indices, backward
from indices, and the fused backward from input.

Each call is compared with an independent numpy statement of the contract
(the window maximum with +0 over -0 and the first NaN; the first real tap
equal to it; index -1 for a NaN maximum; gradients summed in float64), with
XLA (forward: `lax.reduce_window` max, bit for bit wherever the maximum is not
NaN; gradients: the select_and_scatter of `jax.vjp` on JAX's explicit-pad
form, where that form follows the contract), and with each other:
backward_from_input == backward_from_indices(forward indices) ==
backward(forward output), bit for bit, in every element type.
"""

from __future__ import annotations

import functools
import itertools
import os

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jax import lax

from oracles.float_bits import float_bits
from pool3d_pass.bindings import cpu
from pool3d_pass.contract import NO_SELECTION, TARGETS, pooled_extent

from kernel_examples import KernelExamples

DTYPES = {"f32": np.dtype(np.float32), "bf16": np.dtype(ml_dtypes.bfloat16), "f16": np.dtype(np.float16)}
HALF_ULP = {"f32": 2.0**-24, "bf16": 2.0**-8, "f16": 2.0**-11}

# (B, C, D, H, W), kernel, stride, padding
GEOMETRIES = [
    ((2, 3, 4, 6, 8), (2, 2, 2), (2, 2, 2), (0, 0, 0)),  # no overlap, full cover
    ((1, 2, 5, 7, 9), (2, 2, 2), (3, 3, 2), (1, 0, 1)),  # gaps, tails, padding
    ((2, 3, 5, 6, 7), (3, 3, 3), (2, 2, 2), (1, 1, 1)),  # overlap
    ((1, 2, 6, 5, 6), (3, 3, 3), (1, 1, 1), (1, 1, 1)),  # overlap, stride 1
    ((1, 9, 4, 5, 6), (3, 3, 3), (1, 1, 1), (1, 1, 1)),  # NCDHW planes scattered in pairs, one alone
    ((2, 3, 4, 5, 3), (2, 3, 1), (1, 2, 1), (1, 1, 0)),  # asymmetric extents
    ((1, 2, 3, 2, 2), (1, 3, 3), (1, 1, 2), (0, 1, 1)),  # windows larger than H, W
    ((1, 2, 4, 5, 9), (2, 1, 2), (2, 1, 3), (1, 0, 1)),  # no overlap, sW > kW
    ((1, 2, 3, 6, 9), (1, 2, 3), (1, 2, 3), (0, 1, 1)),  # no overlap, kW = sW = 3
    ((1, 37, 3, 4, 5), (3, 2, 3), (2, 1, 2), (1, 1, 1)),  # full vector chunks of channels and a tail
    ((1, 3, 2, 4, 4), (3, 2, 2), (1, 2, 2), (1, 0, 0)),  # window deeper than the input
]
KINDS = ("ints", "zeros", "neg_inf", "nan")


def _ids(case):
    return f"{case[0]}-k{case[1]}-s{case[2]}-p{case[3]}"


# ---------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------


def make_x(kind, shape_ncdhw, seed=0):
    """float32 NCDHW values, exact in every element type, full of ties."""
    rs = np.random.RandomState(seed)
    v = rs.randint(-2, 3, size=shape_ncdhw).astype(np.float32)
    if kind == "zeros":  # +0 and -0 side by side, often the maximum
        v = np.minimum(v, 0.0)
        v[rs.rand(*v.shape) < 0.5] = -0.0
    elif kind == "neg_inf":  # -inf everywhere but a few places: all -inf windows
        v[rs.rand(*v.shape) < 0.85] = -np.inf
    elif kind == "nan":  # NaN in some windows, with payloads and both signs
        flat = v.reshape(-1)
        bits = flat.view(np.uint32)
        pick = rs.rand(flat.size) < 0.07
        payload = rs.randint(1, 1 << 6, size=flat.size).astype(np.uint32) << 16
        bits[pick] = (0x7F800000 | payload[pick] | (rs.randint(0, 2, size=flat.size)[pick].astype(np.uint32) << 31))
    elif kind != "ints":
        raise ValueError(kind)
    return v


def to_layout(a, layout):
    return a if layout == "NCDHW" else np.moveaxis(a, 1, -1)


def from_layout(a, layout):
    return a if layout == "NCDHW" else np.moveaxis(a, -1, 1)


def cast(a32, dtype):
    """float32 values (exact in dtype) to dtype, NaN payloads kept (truncated)."""
    if dtype == np.float32:
        return a32.copy()
    bits = a32.view(np.uint32)
    if dtype == DTYPES["bf16"]:
        return (bits >> 16).astype(np.uint16).view(dtype)
    out = a32.astype(np.float16)
    nan = np.isnan(a32)
    sign = ((bits >> 16) & 0x8000).astype(np.uint16)
    out.view(np.uint16)[nan] = (0x7C00 | ((bits[nan] >> 16) & 0x3FF) | 0x1 | sign[nan]).astype(np.uint16)
    return out


def bits(a):
    """Every bit, NaN payloads included (the kernels keep the window's first NaN): oracles/float_bits.py."""
    return float_bits(a, nan="exact")


# ---------------------------------------------------------------------------
# The contract in numpy
# ---------------------------------------------------------------------------


def _taps(k):
    return list(itertools.product(range(k[0]), range(k[1]), range(k[2])))


def _padded(x, k, s, p, fill):
    """x (B, C, D, H, W) padded so that every tap of every window is in range."""
    Do, Ho, Wo = (pooled_extent(n, kk, ss, q, q) for n, kk, ss, q in zip(x.shape[2:], k, s, p))
    pads = [(q, kk + ss * o) for q, kk, ss, o in zip(p, k, s, (Do, Ho, Wo))]
    return np.pad(x, [(0, 0), (0, 0)] + pads, constant_values=fill), (Do, Ho, Wo)


def _tap_view(xp, t, s, out):
    td, th, tw = t
    return xp[:, :, td : td + s[0] * out[0] : s[0], th : th + s[1] * out[1] : s[1], tw : tw + s[2] * out[2] : s[2]]


def spec_forward(x, k, s, p):
    """(output, indices) of the contract for NCDHW x, output in x's dtype."""
    x = np.asarray(x)
    x32 = x.astype(np.float32)
    xp, out = _padded(x32, k, s, p, 0.0)
    xo, _ = _padded(x, k, s, p, 0)  # the original bits, for the NaN's
    real, _ = _padded(np.ones(x32.shape, bool), k, s, p, False)
    shape = x32.shape[:2] + out
    m = np.full(shape, -np.inf, np.float32)
    any_plus_zero = np.zeros(shape, bool)
    first_nan = np.zeros(shape, x.dtype)
    has_nan = np.zeros(shape, bool)
    taps = _taps(k)
    for t in taps:
        v, r = _tap_view(xp, t, s, out), _tap_view(real, t, s, out)
        new_nan = r & np.isnan(v) & ~has_nan
        first_nan[new_nan] = _tap_view(xo, t, s, out)[new_nan]
        has_nan |= new_nan
        m = np.where(r & (v > m), v, m)
        any_plus_zero |= r & (v == 0) & ~np.signbit(v)
    zero = m == 0
    m[zero] = np.where(any_plus_zero[zero], np.float32(0.0), np.float32(-0.0))
    idx = np.full(shape, NO_SELECTION, np.int16)
    for n, t in enumerate(taps):
        v, r = _tap_view(xp, t, s, out), _tap_view(real, t, s, out)
        idx = np.where((idx < 0) & ~has_nan & r & (v == m), np.int16(n), idx)
    y = m.astype(x.dtype)  # exact: m is one of x's values
    bits(y)[has_nan] = bits(first_nan)[has_nan]
    return y, idx


def spec_backward_from_indices(g, idx, input_shape, k, s, p):
    """float64 gradient of the contract (NCDHW): every window with a valid
    index adds its gradient at that tap; invalid ones (out of range, in
    padding) add nothing."""
    g64 = np.asarray(g).astype(np.float64)
    zeros = np.zeros(input_shape, np.float64)
    acc, out = _padded(zeros, k, s, p, 0.0)
    real, _ = _padded(np.ones(input_shape, bool), k, s, p, False)
    for n, t in enumerate(_taps(k)):
        sel = (idx == n) & _tap_view(real, t, s, out)
        _tap_view(acc, t, s, out)[...] += np.where(sel, g64, 0.0)  # one tap: distinct elements
    D, H, W = input_shape[2:]
    return acc[:, :, p[0] : p[0] + D, p[1] : p[1] + H, p[2] : p[2] + W]


def overlapping(k, s):
    return any(ss < kk for kk, ss in zip(k, s))


# ---------------------------------------------------------------------------
# Calls
# ---------------------------------------------------------------------------


@functools.cache
def _from_indices_call(k, s, p, data_format, output_format, input_shape):
    a = dict(kernel_size=k, stride=s, padding=p, data_format=data_format, output_format=output_format)
    return jax.jit(lambda g, i: cpu.max_pooling_3d_backward_from_indices(g, i, input_shape=input_shape, **a))


@functools.cache
def _layer_program(k, s, p, data_format, output_format, input_shape):
    """The four calls in one program, (x, g) -> (y, idx, from_indices, from_input, backward):
    one XLA compile per configuration instead of four (the suite's time is mostly compiles).
    Custom calls are opaque to XLA, so each computes what it computes alone."""
    a = dict(kernel_size=k, stride=s, padding=p, data_format=data_format, output_format=output_format)

    def program(x, g):
        y, idx = cpu.max_pooling_3d_forward(x, **a)
        return (y, idx, cpu.max_pooling_3d_backward_from_indices(g, idx, input_shape=input_shape, **a),
                cpu.max_pooling_3d_backward_from_input(g, x, **a), cpu.max_pooling_3d_backward(g, x, y, **a))

    return jax.jit(program), lambda x: jax.eval_shape(lambda v: cpu.max_pooling_3d_forward(v, **a), x)[0]


def run_all(x, g_seed, k, s, p, data_format, output_format=None):
    """All four calls on x (in data_format); returns y, idx, g, dx (from_indices),
    after checking from_input and backward(y) equal dx bit for bit."""
    output_format = output_format or data_format
    program, y_type = _layer_program(tuple(k), tuple(s), tuple(p), data_format, output_format, tuple(x.shape))
    g = cast(np.random.RandomState(g_seed).randn(*y_type(x).shape).astype(np.float32), x.dtype)
    y, idx, dx, dx_from_x, dx_backward = program(x, g)
    assert idx.dtype == np.int16 and y.dtype == x.dtype and idx.shape == y.shape
    assert dx.shape == x.shape and dx.dtype == x.dtype
    np.testing.assert_array_equal(bits(dx_from_x), bits(dx), err_msg="from_input != from_indices")
    np.testing.assert_array_equal(bits(dx_backward), bits(dx), err_msg="backward(forward output) != from_indices")
    return np.asarray(y), np.asarray(idx), g, np.asarray(dx)


def window_config(layout, k, s, p):
    """(window_dimensions, window_strides, padding) of XLA's reduce_window for a rank-5 pool."""
    if layout == "NCDHW":
        return (1, 1) + k, (1, 1) + s, ((0, 0), (0, 0)) + tuple((q, q) for q in p)
    return (1,) + k + (1,), (1,) + s + (1,), ((0, 0),) + tuple((q, q) for q in p) + ((0, 0),)


def draw_problem(data, max_extent: int, max_channels: int):
    """A drawn window (k, s, p), each at most 3, and an NCDHW shape with a window in every dimension."""
    k = tuple(data.draw(st.integers(1, 3)) for _ in range(3))
    s = tuple(data.draw(st.integers(1, 3)) for _ in range(3))
    p = tuple(data.draw(st.integers(0, kk - 1)) for kk in k)
    spatial = tuple(data.draw(st.integers(max(1, kk - 2 * q), max_extent)) for kk, q in zip(k, p))
    return k, s, p, (data.draw(st.integers(1, 2)), data.draw(st.integers(1, max_channels))) + spatial


@functools.cache
def xla_pool(layout, k, s, p):
    """XLA's jitted max pool and its gradient (of x, given the output's cotangent) for one window."""
    win, st_, pad = window_config(layout, k, s, p)

    def fwd(v):
        return lax.reduce_window(v, -jnp.inf, lax.max, win, st_, pad)

    return jax.jit(fwd), jax.jit(lambda v, c: jax.vjp(fwd, v)[1](c)[0])


def check_against_spec(x32_ncdhw, dtype, k, s, p, layout, kind, check_xla=True, kernel=None):
    """`kernel` (a KernelExamples) counts the call of the layer kernels."""
    x = to_layout(cast(x32_ncdhw, dtype), layout)
    y, idx, g, dx = run_all(x, 1, k, s, p, layout)
    if kernel is not None:
        kernel.reached()
    y_spec, idx_spec = spec_forward(from_layout(x, layout), k, s, p)
    y_n, idx_n, g_n = from_layout(y, layout), from_layout(idx, layout), from_layout(g, layout)
    np.testing.assert_array_equal(idx_n, idx_spec, err_msg=f"{kind}: indices")
    # Maxima bit for bit; NaN maxima are the window's first NaN, bits kept.
    np.testing.assert_array_equal(bits(y_n), bits(y_spec), err_msg=f"{kind}: maxima")
    exact = spec_backward_from_indices(g_n, idx_spec, from_layout(x, layout).shape, k, s, p)
    ours = from_layout(dx, layout).astype(np.float64)
    if not overlapping(k, s):
        np.testing.assert_array_equal(bits(from_layout(dx, layout)), bits(exact.astype(np.float32).astype(dtype)), err_msg=kind)
    else:
        # f32 summation in order, rounded once to the element type: half an
        # ulp of the result plus the f32 rounding of each partial sum.
        magnitude = spec_backward_from_indices(np.abs(g_n.astype(np.float32)), idx_spec, exact.shape, k, s, p)
        half_ulp = HALF_ULP[{np.float32: "f32", np.float16: "f16"}.get(dtype.type, "bf16")]
        bound = half_ulp * np.abs(exact) + np.prod(k) * 2.0**-24 * magnitude + 1e-30
        assert np.all(np.abs(ours - exact) <= bound), kind
    if check_xla:
        xla_fwd, xla_grad = xla_pool(layout, tuple(k), tuple(s), tuple(p))
        y_x = np.asarray(xla_fwd(x))
        np.testing.assert_array_equal(np.isnan(y_x.astype(np.float32)), np.isnan(y.astype(np.float32)), err_msg=kind)
        keep = ~np.isnan(y_x.astype(np.float32))
        np.testing.assert_array_equal(bits(y)[keep], bits(y_x)[keep], err_msg=f"{kind}: XLA reduce_window")
        # XLA's select_and_scatter differs by design on NaN windows and all
        # -inf windows (it may select padding); elsewhere it is the contract.
        if kind in ("ints", "zeros"):
            ref = np.asarray(xla_grad(x, g))
            if dtype == np.float32 and not overlapping(k, s):
                np.testing.assert_array_equal(bits(dx), bits(ref), err_msg=f"{kind}: XLA gradient")
            elif dtype == np.float32:
                np.testing.assert_allclose(dx, ref, rtol=1e-6, atol=1e-6, err_msg=f"{kind}: XLA gradient")
            elif not overlapping(k, s):
                np.testing.assert_array_equal(bits(dx), bits(ref), err_msg=f"{kind}: XLA gradient")


# ---------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
def test_layer_calls_follow_the_contract_and_xla(layout, dtype):
    for (shape, k, s, p), kind in itertools.product(GEOMETRIES, KINDS):
        x32 = make_x(kind, shape, seed=len(kind) + shape[2])
        check_against_spec(x32, DTYPES[dtype], k, s, p, layout, kind)


@pytest.mark.parametrize("data_format,output_format", [("NCDHW", "NDHWC"), ("NDHWC", "NCDHW")])
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_output_format_may_differ_from_data_format(data_format, output_format, dtype):
    # The mixed layouts take their own kernels (generic.cc): every input kind, +0/-0 ties
    # ("zeros") included, against the contract and against the same-layout kernels.
    perm = (0, 2, 3, 4, 1) if output_format == "NDHWC" else (0, 4, 1, 2, 3)
    for shape, k, s, p in (GEOMETRIES[1], GEOMETRIES[2]):
        for kind in KINDS:
            x = to_layout(cast(make_x(kind, shape), DTYPES[dtype]), data_format)
            y, idx, g, dx = run_all(x, 2, k, s, p, data_format)
            y2, idx2, g2, dx2 = run_all(x, 2, k, s, p, data_format, output_format)
            y_spec, idx_spec = spec_forward(from_layout(x, data_format), k, s, p)
            np.testing.assert_array_equal(bits(from_layout(y2, output_format)), bits(y_spec), err_msg=kind)
            np.testing.assert_array_equal(from_layout(idx2, output_format), idx_spec, err_msg=kind)
            np.testing.assert_array_equal(bits(y2), bits(np.transpose(y, perm)), err_msg=kind)
            np.testing.assert_array_equal(idx2, np.transpose(idx, perm), err_msg=kind)
            back = _from_indices_call(tuple(k), tuple(s), tuple(p), data_format, output_format, tuple(x.shape))
            np.testing.assert_array_equal(bits(back(np.transpose(g, perm), idx2)), bits(dx), err_msg=kind)
            y_only = cpu.max_pooling_3d_forward_output(x, kernel_size=k, stride=s, padding=p, data_format=data_format,
                                                       output_format=output_format)
            np.testing.assert_array_equal(bits(np.asarray(y_only)), bits(y2), err_msg=f"{kind}: forward_output")


def test_signed_zeros_and_all_neg_inf_windows():
    # One window per case, k (1, 1, 3), no padding: the maximum's bits and the
    # selected tap, as XLA's reduce_window max gives them (re-probed here).
    cases = [
        ([-0.0, 0.0, -0.0], 0.0, 0),
        ([0.0, -0.0, 0.0], 0.0, 0),
        ([-0.0, -0.0, -0.0], -0.0, 0),
        ([-1.0, -0.0, 0.0], 0.0, 1),
        ([-np.inf, -np.inf, -np.inf], -np.inf, 0),
        ([-np.inf, np.inf, np.inf], np.inf, 1),
        ([1.0, np.nan, 2.0], np.nan, NO_SELECTION),
    ]
    xla_fwd, _ = xla_pool("NCDHW", (1, 1, 3), (1, 1, 3), (0, 0, 0))
    for dtype in DTYPES.values():
        x = cast(np.array([c[0] for c in cases], np.float32).reshape(1, len(cases), 1, 1, 3), dtype)
        y, idx, _, _ = run_all(x, 3, (1, 1, 3), (1, 1, 3), (0, 0, 0), "NCDHW")
        want = cast(np.array([c[1] for c in cases], np.float32).reshape(1, len(cases), 1, 1, 1), dtype)
        nan = np.isnan(want.astype(np.float32))
        np.testing.assert_array_equal(bits(y)[~nan], bits(want)[~nan])
        np.testing.assert_array_equal(bits(y)[~nan], bits(np.asarray(xla_fwd(x)))[~nan])
        assert np.isnan(y.astype(np.float32)[nan]).all()
        np.testing.assert_array_equal(idx.reshape(-1), [c[2] for c in cases])
    # All -inf windows with padding: the first real -inf is selected, never padding.
    x = np.full((1, 1, 1, 1, 4), -np.inf, np.float32)
    y, idx, g, dx = run_all(x, 4, (1, 1, 3), (1, 1, 2), (0, 0, 1), "NCDHW")
    np.testing.assert_array_equal(idx.reshape(-1), [1, 0])  # windows over w = -1..1 and 1..3
    np.testing.assert_array_equal(dx.reshape(-1), [g.reshape(-1)[0], g.reshape(-1)[1], 0, 0])


def test_first_nan_of_the_window_with_its_payload():
    # Two NaNs in one window: the first in tap order, bits unchanged
    # (signalling, negative, with payload).
    x = np.zeros((1, 1, 2, 2, 2), np.float32)
    x.view(np.uint32)[0, 0, 1, 0, 0] = 0x7FC00001
    x.view(np.uint32)[0, 0, 0, 1, 1] = 0xFF800123  # signalling, negative: first in (d, h, w) order
    y, idx, g, dx = run_all(x, 5, (2, 2, 2), (2, 2, 2), (0, 0, 0), "NCDHW")
    assert bits(y).reshape(-1)[0] == 0xFF800123 and idx.reshape(-1)[0] == NO_SELECTION
    assert not dx.any()


@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
@pytest.mark.parametrize("shape,k,s,p", [
    ((1, 9, 3, 4, 5), (2, 3, 3), (1, 2, 2), (1, 1, 1)),  # overlap; NCDHW scatters nine planes in pairs and one alone
    ((2, 16, 3, 4, 5), (2, 2, 2), (2, 2, 2), (1, 1, 1)),  # no overlap, padding: the gathers (16 channels)
])
def test_invalid_indices_select_nothing(layout, shape, k, s, p):
    # Out of range, other negatives, and taps in the padding: no write anywhere.
    x = to_layout(make_x("ints", shape), layout)
    y, idx, g, _ = run_all(x, 6, k, s, p, layout)
    rs = np.random.RandomState(0)
    bad = rs.randint(-400, 400, size=idx.shape).astype(np.int16)
    near = rs.rand(*idx.shape) < 0.5  # about the tap range: real taps and padding ones
    bad[near] = rs.randint(-2, int(np.prod(k)) + 2, size=int(near.sum()))
    bad[rs.rand(*idx.shape) < 0.15] = np.iinfo(np.int16).min
    bad[rs.rand(*idx.shape) < 0.15] = np.iinfo(np.int16).max
    for dtype in ("f32", "bf16"):
        gd = cast(g.astype(np.float32), DTYPES[dtype])
        back = _from_indices_call(k, s, p, layout, layout, x.shape)
        out = np.asarray(back(gd, bad))
        exact = spec_backward_from_indices(from_layout(gd, layout), from_layout(bad, layout), shape, k, s, p)
        np.testing.assert_allclose(from_layout(out, layout).astype(np.float64), exact, rtol=HALF_ULP[dtype] * 2)


def test_thread_counts_give_identical_bits():
    # Thread counts forced (POOL3D_CPU_THREADS), overlapping windows, ties.
    for layout, dtype in (("NCDHW", "f32"), ("NDHWC", "bf16"), ("NDHWC", "f32"), ("NCDHW", "f16")):
        x = to_layout(cast(make_x("ints", (2, 24, 8, 20, 20)), DTYPES[dtype]), layout)
        results = []
        saved = os.environ.get("POOL3D_CPU_THREADS")
        try:
            for n in ("1", "2", "3"):
                os.environ["POOL3D_CPU_THREADS"] = n
                results.append(run_all(x, 7, (3, 3, 3), (2, 2, 2), (1, 1, 1), layout))
        finally:
            if saved is None:
                os.environ.pop("POOL3D_CPU_THREADS", None)
            else:
                os.environ["POOL3D_CPU_THREADS"] = saved
        for other in results[1:]:
            for a, b in zip(results[0], other):
                np.testing.assert_array_equal(bits(a) if a.dtype != np.int16 else a, bits(b) if b.dtype != np.int16 else b)


DRAWN_EXAMPLES = 100


def test_drawn_configurations():
    # Every draw is a configuration the kernels accept (padding below the window,
    # so every window holds a real element even on an input smaller than it).
    kernel = KernelExamples()

    @settings(max_examples=DRAWN_EXAMPLES)
    @given(
        data=st.data(),
        layout=st.sampled_from(["NCDHW", "NDHWC"]),
        dtype=st.sampled_from(sorted(DTYPES)),
        kind=st.sampled_from(KINDS),
    )
    def drawn(data, layout, dtype, kind):
        k, s, p, shape = draw_problem(data, max_extent=7, max_channels=5)
        x32 = make_x(kind, shape, seed=data.draw(st.integers(0, 1000)))
        check_against_spec(x32, DTYPES[dtype], k, s, p, layout, kind, check_xla=False, kernel=kernel)

    drawn()
    kernel.assert_at_least(DRAWN_EXAMPLES)


# ---------------------------------------------------------------------------
# Invalid calls: a named error, never a crash
# ---------------------------------------------------------------------------

X = np.zeros((1, 2, 4, 4, 4), np.float32)
G = np.zeros((1, 2, 2, 2, 2), np.float32)
I16 = np.zeros((1, 2, 2, 2, 2), np.int16)
K2 = dict(kernel_size=(2, 2, 2), stride=(2, 2, 2), padding=(0, 0, 0))


def _attrs(**kw):
    a = dict(K2, data_format="NCDHW", output_format="NCDHW")
    a.update(kw)
    return {n: (np.asarray(v, np.int64) if n in K2 else v) for n, v in a.items()}


def _raw(kind, results, *args, **kw):
    cpu.register()
    call = jax.ffi.ffi_call(TARGETS[kind], results)
    return jax.block_until_ready(jax.jit(lambda *a: call(*a, **_attrs(**kw)))(*args))


SD = jax.ShapeDtypeStruct


@pytest.mark.parametrize(
    "kind,results,args,kw,message",
    [
        ("forward", (SD(G.shape, np.float32), SD(G.shape, np.int32)), (X,), {}, r"forward: result 1 \(indices\) element type must be s16, got s32"),
        ("forward", (SD(G.shape, np.float16), SD(G.shape, np.int16)), (X,), {}, r"result 0 \(output\) element type f16 differs from the input element type f32"),
        ("forward", (SD((1, 2, 2, 2, 3), np.float32), SD(G.shape, np.int16)), (X,), {}, r"result 0 \(output\) shape \[1, 2, 2, 2, 3\].*expected \[1, 2, 2, 2, 2\]"),
        ("forward", (SD(G.shape, np.float32), SD(G.shape, np.int16)), (X,), {"kernel_size": (2**21, 2**21, 2**22)}, r"forward: kernel_size elements must be in \[1, 4096\], got \[2097152, 2097152, 4194304\]"),
        ("forward", (SD(G.shape, np.float32), SD(G.shape, np.int16)), (X,), {"padding": (2, 0, 0)}, r"padding\[0\] = 2 must be smaller than kernel_size\[0\] = 2"),
        ("forward", (SD(G.shape, np.float32), SD(G.shape, np.int16)), (X,), {"padding": (2**30, 0, 0)}, r"padding elements must be in \[0, kernel_size - 1\]"),
        ("forward", (SD(G.shape, np.float32), SD(G.shape, np.int16)), (X,), {"stride": (2**30 + 1, 2, 2)}, r"stride elements must be in \[1, 2\^30\]"),
        ("forward", (SD((1, 2, 1, 2, 2), np.float32), SD((1, 2, 1, 2, 2), np.int16)), (X[:, :, :0],), {"kernel_size": (3, 2, 2), "padding": (2, 0, 0)}, r"input shape \[1, 2, 0, 4, 4\] \(NCDHW\) has a zero D extent"),
        ("forward", (SD(G.shape, np.int32), SD(G.shape, np.int16)), (X.astype(np.int32),), {}, r"input element type must be f32, bf16 or f16, got s32"),
        ("backward_from_indices", SD(X.shape, np.float32), (G, I16.astype(np.int32)), {}, r"backward_from_indices: indices element type must be s16, got s32"),
        ("backward_from_indices", SD(X.shape, np.float32), (G, I16[:, :1]), {}, r"indices shape \[1, 1, 2, 2, 2\] differs from the grad_output shape"),
        ("backward_from_indices", SD((1, 2, 4, 4, 6), np.float32), (G, I16), {}, r"grad_output shape \[1, 2, 2, 2, 2\].*expected \[1, 2, 2, 2, 3\]"),
        ("backward_from_indices", SD(X.shape, np.float16), (G, I16), {}, r"result \(grad_input\) element type f16 differs from the grad_output element type f32"),
        ("backward_from_indices", SD(X.shape, np.float32), (G, I16), {"data_format": "NHWC"}, r'data_format must be "NCDHW" or "NDHWC", got "NHWC"'),
        ("backward_from_input", SD(X.shape, np.float32), (G, X), {"stride": (2, 2)}, r"backward_from_input: stride must have 3 elements"),
        ("backward_from_input", SD(X.shape, np.float32), (G.astype(np.float16), X), {}, r"grad_output element type f16 differs from the input element type f32"),
        ("backward_from_input", SD(X.shape, np.float32), (G, X), {"kernel_size": (3, 2, 2)}, r"grad_output shape .*expected \[1, 2, 1, 2, 2\]"),
    ],
    ids=lambda v: v if isinstance(v, str) and " " not in v else None,
)
def test_invalid_calls_raise_a_named_error(kind, results, args, kw, message):
    with pytest.raises(Exception, match=message):
        _raw(kind, results, *args, **kw)


def test_zero_sized_batch_gives_empty_results():
    for shape in ((0, 2, 4, 4, 4), (2, 0, 4, 4, 4)):
        x = np.zeros(shape, np.float32)
        y, idx = cpu.max_pooling_3d_forward(x, **K2)
        assert y.shape == idx.shape == shape[:2] + (2, 2, 2)
        assert cpu.max_pooling_3d_backward_from_indices(y, idx, input_shape=shape, **K2).shape == shape
        assert cpu.max_pooling_3d_backward_from_input(y, x, **K2).shape == shape
