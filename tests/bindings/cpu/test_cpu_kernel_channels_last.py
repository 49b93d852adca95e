"""Tests of the lane kernels: the channels-last forward (lanes across channels,
stride-1 rows as (w, c) lanes), the channels-last backwards from indices and
from input by gather where windows do not overlap, the channels-last bf16
backward from indices by gather where windows overlap (the same bits as the
scatters), and the forward_output call (y only, both layouts).

Judged as tests/test_cpu_kernel_layer.py judges the layer calls (its numpy
statement of the contract, and XLA), over channel counts from 1 to 256
(odd ones, and non-multiples of every vector width: 8 f32 lanes, 16 int16
lanes, the 256-lane chunk), stride 1 and overlapping windows, and tie-heavy,
signed-zero, -inf and NaN inputs in f32, bf16 and f16.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jax import lax
from test_cpu_kernel_layer import (
    DTYPES,
    KINDS,
    bits,
    cast,
    check_against_spec,
    draw_problem,
    from_layout,
    make_x,
    spec_forward,
    to_layout,
    window_config,
)

from pool3d_pass.bindings import cpu, reference
from pool3d_pass.bindings.cpu import partitioned as cpu_partitioned
from pool3d_pass.contract import FORWARD_OUTPUT, TARGETS
from pool3d_pass.contract.sharding import sharding_rule

from kernel_examples import KernelExamples

# kernel, stride, padding
WINDOWS = [
    ((2, 2, 2), (2, 2, 2), (0, 0, 0)),  # no overlap: the gather backward
    ((3, 3, 3), (2, 2, 2), (1, 1, 1)),  # overlap
    ((3, 3, 3), (1, 1, 1), (1, 1, 1)),  # stride 1: (w, c) lanes
    ((2, 3, 2), (1, 2, 3), (1, 0, 1)),  # mixed; gaps along W
    ((1, 3, 3), (1, 1, 2), (0, 1, 1)),  # stride 1 along D and H only
    ((2, 2, 1), (3, 2, 2), (0, 1, 0)),  # no overlap, gaps along D and W, rows no window covers
]


def sweep(values, core):
    """Channel counts: those outside `core` carry the `channel_sweep` mark, which the JAX 0.9
    half of `make test` deselects (the Makefile's PASS_TESTS) to stay within CI's time."""
    return [v if v in core else pytest.param(v, marks=pytest.mark.channel_sweep) for v in values]


CHANNELS = sweep([1, 3, 7, 8, 15, 17, 33, 64, 100, 256, 257], core={1, 8, 17, 257})


def _ids(w):
    return f"k{w[0]}-s{w[1]}-p{w[2]}"


@functools.cache
def _forward_output(k, s, p, layout):
    a = dict(kernel_size=k, stride=s, padding=p, data_format=layout)
    return jax.jit(lambda x: cpu.max_pooling_3d_forward_output(x, **a))


@functools.cache
def _reduce_window(k, s, p, layout):
    win, st_, pad = window_config(layout, k, s, p)
    return jax.jit(lambda v: lax.reduce_window(v, jnp.array(-jnp.inf, v.dtype), lax.max, win, st_, pad))


def _same_nan_and_bits(ours, xla, msg):
    """Bit for bit where neither is NaN; a NaN of XLA's is a NaN of ours. (The
    converse fails on XLA:CPU's side: measured, jaxlib 0.10.2, its
    reduce_window sometimes drops a window's NaN, in f32 too; the contract's
    maximum, like IEEE maximum, is NaN.)"""
    ours, xla = np.asarray(ours), np.asarray(xla)
    nan_o, nan_x = np.isnan(ours.astype(np.float32)), np.isnan(xla.astype(np.float32))
    assert not np.any(nan_x & ~nan_o), f"{msg}: a NaN of XLA's is not NaN here"
    keep = ~nan_o & ~nan_x
    np.testing.assert_array_equal(bits(ours)[keep], bits(xla)[keep], err_msg=msg)


def check_forward_output(x32_ncdhw, dtype, k, s, p, layout, kind, check_xla=True, kernel=None):
    """forward_output == the forward call's output == the contract's maximum, bit for
    bit (NaN maxima: the window's first NaN); and XLA's reduce_window where XLA
    itself gives IEEE's maximum (see test_xla_reduce_window_signed_zeros).
    `kernel` (a KernelExamples) counts the call of the forward-output kernel."""
    x = to_layout(cast(x32_ncdhw, dtype), layout)
    k, s, p = tuple(k), tuple(s), tuple(p)
    y = np.asarray(_forward_output(k, s, p, layout)(x))
    if kernel is not None:
        kernel.reached()
    y_spec, _ = spec_forward(from_layout(x, layout), k, s, p)
    np.testing.assert_array_equal(bits(from_layout(y, layout)), bits(y_spec), err_msg=f"{kind}: contract maximum")
    y_fwd, _ = cpu.max_pooling_3d_forward(x, kernel_size=k, stride=s, padding=p, data_format=layout)
    np.testing.assert_array_equal(bits(y), bits(np.asarray(y_fwd)), err_msg=f"{kind}: forward's output")
    if check_xla and kind != "zeros":
        _same_nan_and_bits(y, _reduce_window(k, s, p, layout)(x), f"{kind}: XLA reduce_window")


@pytest.mark.parametrize("window", WINDOWS, ids=_ids)
@pytest.mark.parametrize("channels", CHANNELS)
def test_channels_last_layer_calls_over_channel_counts(window, channels):
    k, s, p = window
    for n, (dtype, kind) in enumerate((("f32", "ints"), ("bf16", "zeros"), ("f16", "nan"), ("f32", "neg_inf"))):
        x32 = make_x(kind, (2, channels, 4, 5, 6), seed=channels + n)
        check_against_spec(x32, DTYPES[dtype], k, s, p, "NDHWC", kind, check_xla=kind in ("ints", "zeros"))


@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("window", WINDOWS, ids=_ids)
def test_forward_output_follows_the_contract_and_xla(window, dtype, layout):
    k, s, p = window
    for kind in KINDS:
        for channels in (3, 17):
            check_forward_output(make_x(kind, (2, channels, 5, 6, 7)), DTYPES[dtype], k, s, p, layout, kind)


def test_forward_output_normal_values_match_xla_on_larger_shapes():
    rng = np.random.default_rng(3)
    for layout, dtype, window in (("NCDHW", "f32", WINDOWS[0]), ("NDHWC", "bf16", WINDOWS[1]),
                                  ("NDHWC", "f32", WINDOWS[2]), ("NCDHW", "f16", WINDOWS[3])):
        x32 = rng.standard_normal((2, 24, 9, 20, 20)).astype(np.float32)
        check_forward_output(x32, DTYPES[dtype], *window, layout, "normal")


def test_xla_reduce_window_signed_zeros():
    """Why forward_output is judged by the contract on mixed +0/-0 windows: on larger
    f32 tensors XLA:CPU's reduce_window max is not IEEE maximum there (measured, jaxlib
    0.10.2: the sign of a window mixing +0 and -0 depends on which tap holds which),
    while the kernel's is (+0 whenever the window holds a +0), as on small shapes."""
    rng = np.random.default_rng(0)
    x = rng.choice(np.array([0.0, -0.0], np.float32), (2, 16, 6, 8, 10))
    k = s = (2, 2, 2)
    y = np.asarray(_forward_output(k, s, (0, 0, 0), "NCDHW")(x))
    any_plus = ~np.signbit(x).reshape(2, 16, 3, 2, 4, 2, 5, 2).all(axis=(3, 5, 7))
    np.testing.assert_array_equal(~np.signbit(y), any_plus)


DRAWN_EXAMPLES = 80


def test_drawn_channels_last_configurations():
    # Every draw is a configuration the kernels accept (padding below the window).
    layer, forward_output = KernelExamples(), KernelExamples()

    @settings(max_examples=DRAWN_EXAMPLES)
    @given(
        data=st.data(),
        dtype=st.sampled_from(sorted(DTYPES)),
        kind=st.sampled_from(KINDS),
    )
    def drawn(data, dtype, kind):
        k, s, p, shape = draw_problem(data, max_extent=6, max_channels=256)
        x32 = make_x(kind, shape, seed=data.draw(st.integers(0, 1000)))
        check_against_spec(x32, DTYPES[dtype], k, s, p, "NDHWC", kind, check_xla=False, kernel=layer)
        layout = data.draw(st.sampled_from(["NCDHW", "NDHWC"]))
        check_forward_output(x32, DTYPES[dtype], k, s, p, layout, kind, check_xla=False, kernel=forward_output)

    drawn()
    layer.assert_at_least(DRAWN_EXAMPLES)
    forward_output.assert_at_least(DRAWN_EXAMPLES)


def test_stride_one_rows_longer_than_a_lane_chunk():
    # (w, c) lanes: Wo * C = 40 * 33 lanes, several 256-lane chunks and a tail.
    x32 = make_x("ints", (1, 33, 3, 3, 42))
    for dtype in ("f32", "bf16"):
        check_against_spec(x32, DTYPES[dtype], (3, 3, 3), (1, 1, 1), (0, 1, 0), "NDHWC", "ints")
        check_forward_output(x32, DTYPES[dtype], (3, 3, 3), (1, 1, 1), (0, 1, 0), "NDHWC", "ints")


# Windows that neither overlap nor reach into padding (the forward's one
# shared tap list; fewer channels than a vector: staged rows): kernel, stride.
DISJOINT = [
    ((2, 2, 2), (2, 2, 2)),  # whole 2 x 2 x 2 windows: the unrolled search
    ((3, 3, 3), (3, 3, 3)),  # an odd tap count
    ((1, 2, 3), (2, 2, 4)),  # gaps between windows
]


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("channels", sweep([3, 8, 16, 20, 24, 32, 64, 256], core={3, 20, 256}))
@pytest.mark.parametrize("window", DISJOINT, ids=lambda w: f"k{w[0]}-s{w[1]}")
def test_disjoint_windows_over_channel_counts(window, channels, dtype):
    k, s = window
    for n, kind in enumerate(KINDS):
        x32 = make_x(kind, (2, channels, 4, 6, 20), seed=channels + n)
        check_against_spec(x32, DTYPES[dtype], k, s, (0, 0, 0), "NDHWC", kind, check_xla=kind == "ints")


@pytest.mark.parametrize("dtype", sorted(DTYPES))
def test_disjoint_windows_with_both_infinities(dtype):
    # +inf and -inf in one window: the f32 search's NaN check (a sum of the
    # taps) raises a false alarm, which the scalar redo must resolve exactly.
    x32 = make_x("neg_inf", (2, 32, 4, 6, 8), seed=5)
    x32[:, :, ::3, ::2, 1::3] = np.inf
    for channels in (3, 32):
        check_against_spec(x32[:, :channels], DTYPES[dtype], (2, 2, 2), (2, 2, 2), (0, 0, 0), "NDHWC", "infs")


def test_forward_output_in_the_contract_and_every_binding():
    assert TARGETS[FORWARD_OUTPUT] == "pool3d.max_pooling_3d_forward_output"
    x = cast(make_x("ints", (2, 5, 6, 7, 8)), DTYPES["bf16"])
    a = dict(kernel_size=(3, 3, 3), stride=(2, 2, 2), padding=(1, 1, 1), data_format="NCDHW")
    y = np.asarray(cpu.max_pooling_3d_forward_output(x, **a))
    np.testing.assert_array_equal(bits(np.asarray(jax.jit(lambda v: reference.max_pooling_3d_forward_output(v, **a))(x))), bits(y))
    np.testing.assert_array_equal(bits(np.asarray(jax.jit(lambda v: cpu_partitioned.max_pooling_3d_forward_output(v, **a))(x))), bits(y))
    rule = sharding_rule(FORWARD_OUTPUT, "NDHWC")  # batch i and channels j kept, pooled factors apart
    assert rule.operands == (("i", "n", "o", "p", "j"),) and rule.results == (("i", "k", "l", "m", "j"),)


def test_forward_output_rejects_a_wrong_result_shape():
    cpu.register()
    call = jax.ffi.ffi_call(TARGETS[FORWARD_OUTPUT], jax.ShapeDtypeStruct((1, 2, 3, 2, 2), np.float32))
    attrs = dict(kernel_size=np.array([2, 2, 2], np.int64), stride=np.array([2, 2, 2], np.int64),
                 padding=np.array([0, 0, 0], np.int64), data_format="NCDHW", output_format="NCDHW")
    with pytest.raises(Exception, match="max_pooling_3d_forward_output"):
        jax.block_until_ready(call(np.zeros((1, 2, 4, 4, 4), np.float32), **attrs))


def test_forward_output_zero_batch():
    x = np.zeros((0, 4, 4, 4, 3), np.float32)
    y = cpu.max_pooling_3d_forward_output(x, kernel_size=(2, 2, 2), stride=(2, 2, 2), padding=(0, 0, 0),
                                          data_format="NDHWC")
    assert y.shape == (0, 2, 2, 2, 3)


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_few_channels_on_a_large_plane_gather_without_an_accumulator(dtype):
    # bf16/f16 with fewer channels than a vector scatter through an f32
    # accumulator of a few depth slices, unless that would pass 8 MiB
    # (FromIndicesGatherPays): 900 x 900 x 3 lanes is 9.7 MB, so this plane
    # takes the gather with 3 lanes a pixel.
    x32 = make_x("ints", (1, 3, 1, 900, 900), seed=11)
    check_against_spec(x32, DTYPES[dtype], (1, 2, 2), (1, 2, 2), (0, 0, 0), "NDHWC", "ints", check_xla=False)


# Overlapping bf16 windows of at least 32 channels (a last vector overlapping
# the one before where C is no multiple of 16) take the
# gather (common/overlap_gather.h): kernel, stride, padding.
OVERLAP_GATHER = [
    ((3, 3, 3), (2, 2, 2), (1, 1, 1)),
    ((3, 3, 3), (1, 1, 1), (1, 1, 1)),
    ((3, 3, 3), (1, 1, 1), (0, 0, 0)),  # no padding, edges covered by fewer windows
    ((2, 3, 2), (1, 2, 3), (1, 0, 1)),  # gaps along W
    ((3, 2, 3), (2, 1, 2), (1, 1, 0)),
]


@pytest.mark.parametrize("channels", sweep([32, 40, 48, 64, 100, 128], core={40, 100}))
@pytest.mark.parametrize("window", OVERLAP_GATHER, ids=_ids)
def test_overlapping_bf16_gather_matches_the_scatter_bit_for_bit(window, channels):
    # The gather adds each element's windows in (od, oh, ow) order in f32 and
    # rounds once, as the channels-first scatter and the fused channels-last
    # scatter do: the same bits, also for NaN, inf and -0 gradients.
    k, s, p = window
    bf16 = DTYPES["bf16"]
    for n, kind in enumerate(KINDS):
        x32 = make_x(kind, (2, channels, 5, 7, 9), seed=channels + n)
        check_against_spec(x32, bf16, k, s, p, "NDHWC", kind, check_xla=kind == "ints")
        x = jnp.asarray(cast(x32, bf16))
        first = dict(kernel_size=k, stride=s, padding=p, data_format="NCDHW")
        last = dict(first, data_format="NDHWC")
        _, idx = cpu.max_pooling_3d_forward(x, **first)
        rng = np.random.default_rng(n)
        g = rng.standard_normal(idx.shape).astype(np.float32) * 3
        g[rng.random(g.shape) < 0.05] = -0.0
        g[rng.random(g.shape) < 0.01] = np.nan
        g[rng.random(g.shape) < 0.01] = np.inf
        g = g.astype(bf16)
        cl = (0, 2, 3, 4, 1)
        dx_first = cpu.max_pooling_3d_backward_from_indices(g, idx, input_shape=x.shape, **first)
        dx_last = cpu.max_pooling_3d_backward_from_indices(
            np.transpose(g, cl), jnp.transpose(idx, cl), input_shape=tuple(np.array(x.shape)[list(cl)]), **last)
        np.testing.assert_array_equal(bits(np.transpose(np.asarray(dx_first), cl)), bits(np.asarray(dx_last)), err_msg=kind)
        dx_fused = cpu.max_pooling_3d_backward_from_input(np.transpose(g, cl), jnp.transpose(x, cl), **last)
        np.testing.assert_array_equal(bits(np.asarray(dx_fused)), bits(np.asarray(dx_last)), err_msg=f"{kind}: from_input")
