"""Inference programs: a forward max pool with no gradient becomes the forward-output call, y bit for bit.

Through `pool3d_pass.jit` and `enable()` + `jax.jit` on CPU, for the
configurations the CPU binding accepts (bindings/cpu/speed.py: where its
kernel was measured faster than XLA's reduce_window), both layouts and every
element type: the compiled program holds the call and no reduce_window. Its
output equals the StableHLO spec's max pool (IEEE maximum: NaN propagates,
+0 > -0; a NaN matches any NaN and nothing else: oracles/float_bits.py,
nan="any") bit for bit on tie-heavy inputs with -inf, NaN, -0 and +0, and
equals jax.jit's bit for bit where XLA:CPU itself follows the
spec (no NaN, no mixed signed zeros; XLA:CPU's deviations: docs/contract.md). Configurations the binding
refuses keep XLA's reduce_window, with a remark; min pooling stays untouched;
neutral output never gets the call; a training step keeps its forward call,
and the forward a recompute gradient reads stays XLA's.
"""

from __future__ import annotations

import logging

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax

import pool3d_pass
from oracles.float_bits import assert_same_bits  # NaN matches NaN (any payload), never +0
from pool3d_pass.bindings.cpu import speed
from pool3d_pass.contract import TARGETS

pytestmark = pytest.mark.usefixtures("cpu_kernels", "switch_off")

FORWARD_OUTPUT = TARGETS["forward_output"]


def pool(layout, k, s, p, *, op=lax.max, init=-jnp.inf):
    def pooled(x):
        if layout == "NCDHW":
            window, strides, padding = (1, 1, k, k, k), (1, 1, s, s, s), ((0, 0), (0, 0), (p, p), (p, p), (p, p))
        else:
            window, strides, padding = (1, k, k, k, 1), (1, s, s, s, 1), ((0, 0), (p, p), (p, p), (p, p), (0, 0))
        return lax.reduce_window(x, np.array(init, x.dtype), op, window, strides, padding)  # concrete: differentiable

    return pooled


def special_input(shape, dtype, seed=0, *, nan=True, negative_zero=True):
    """Tie-heavy small integers with -inf, NaN, -0.0 and +0.0 sprinkled in (NaN, -0.0 unless told not).

    (NaN windows and mixed signed zeros are where XLA:CPU departs from the spec.)"""
    rng = np.random.default_rng(seed)
    x = rng.integers(-2, 3, shape).astype(np.float32)
    flat = x.reshape(-1)
    picks = rng.choice(flat.size, size=(4, max(1, flat.size // 40)), replace=False)
    flat[picks[0]] = -np.inf
    flat[picks[1]] = np.nan if nan else 1.0
    flat[picks[2]] = -0.0 if negative_zero else 0.0
    flat[picks[3]] = 0.0
    return jnp.asarray(x.astype(dtype))


def spec_max_pool(x, layout, k, s, p) -> np.ndarray:
    """The spec's reduce_window max (IEEE maximum over the real elements), in float32."""
    axes = (2, 3, 4) if layout == "NCDHW" else (1, 2, 3)
    widths = [(p, p) if axis in axes else (0, 0) for axis in range(5)]
    padded = np.pad(np.asarray(x, np.float32), widths, constant_values=-np.inf)
    windows = np.lib.stride_tricks.sliding_window_view(padded, (k, k, k), axis=axes)
    windows = windows[tuple(slice(None, None, s) if axis in axes else slice(None) for axis in range(5))]
    flat = windows.reshape(*windows.shape[:5], -1)
    with np.errstate(invalid="ignore"):
        maxima = flat.max(axis=-1)  # NaN propagates
    positive_zero = np.any((flat == 0) & ~np.signbit(flat), axis=-1)
    return np.where(maxima == 0, np.where(positive_zero, np.float32(0.0), np.float32(-0.0)), maxima)


def layer_step(forward):
    """A layer's forward and its gradient (a training step's pooling layer)."""

    def step(x):
        y, vjp = jax.vjp(forward, x)
        return y, vjp(jnp.ones_like(y))[0]

    return step


def shape_of(layout, c=8):
    return (2, c, 8, 12, 12) if layout == "NCDHW" else (2, 8, 12, 12, c)


DTYPES = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f16": np.float16}
ACCEPTED = [case[:4] for case in speed.MEASURED_FASTER if case[4] == "f32"]
# every measured-faster row, and f16 wherever bf16 was measured (same kernel, same width)
ACCEPTED_WITH_TYPES = list(speed.MEASURED_FASTER) + [(*c[:4], "f16") for c in speed.MEASURED_FASTER if c[4] == "bf16"]


@pytest.mark.parametrize("layout,k,s,p,dtype", ACCEPTED_WITH_TYPES,
                         ids=[f"{c[0]}_k{c[1]}s{c[2]}p{c[3]}_{c[4]}" for c in ACCEPTED_WITH_TYPES])
@pytest.mark.parametrize("channels", [3, 32])
def test_accepted_inference_forwards_become_the_call_bit_for_bit(layout, k, s, p, dtype, channels):
    forward = pool(layout, k, s, p)
    x = special_input(shape_of(layout, channels), DTYPES[dtype])
    compiled = pool3d_pass.jit(forward).lower(x).compile()
    text = compiled.as_text()
    assert f'custom_call_target="{FORWARD_OUTPUT}"' in text and "reduce-window" not in text
    expected = spec_max_pool(x, layout, k, s, p).astype(DTYPES[dtype])
    assert_same_bits(np.asarray(compiled(x)), expected, "the spec's max pool")
    # where XLA:CPU follows the spec (no NaN, one sign of zero), bit for bit XLA's
    plain = special_input(x.shape, DTYPES[dtype], seed=1, nan=False, negative_zero=False)
    assert_same_bits(np.asarray(compiled(plain)), np.asarray(jax.jit(forward)(plain)), "jax.jit's")


def test_enable_rewrites_an_inference_program(caplog):
    layout, k, s, p = ACCEPTED[0]
    forward = pool(layout, k, s, p)
    x = special_input(shape_of(layout), np.float32)
    expected = None
    with caplog.at_level(logging.INFO, logger="pool3d_pass"), pool3d_pass.enabled():
        compiled = jax.jit(forward).lower(x).compile()
        got = compiled(x)
    assert f'custom_call_target="{FORWARD_OUTPUT}"' in compiled.as_text()
    assert any("1 forward max-pool(s) met after the gradients, 1 given the forward-output call" in r.getMessage()
               for r in caplog.records)
    assert_same_bits(np.asarray(got), spec_max_pool(x, layout, k, s, p), "the spec's max pool")
    del expected


@pytest.mark.parametrize("layout,k,s,p,dtype", speed.LEFT_TO_XLA,
                         ids=[f"{c[0]}_k{c[1]}s{c[2]}p{c[3]}_{c[4]}" for c in speed.LEFT_TO_XLA])
def test_refused_configurations_keep_xlas_reduce_window_with_a_remark(caplog, layout, k, s, p, dtype):
    forward = pool(layout, k, s, p)
    x = special_input(shape_of(layout), DTYPES[dtype])
    with caplog.at_level(logging.INFO, logger="pool3d_pass"):
        compiled = pool3d_pass.jit(forward).lower(x).compile()
    assert FORWARD_OUTPUT not in compiled.as_text()
    assert any("max-pool forward without gradient not rewritten" in r.getMessage()
               and "reduce_window measured faster" in r.getMessage() for r in caplog.records)
    assert_same_bits(np.asarray(compiled(x)), np.asarray(jax.jit(forward)(x)), "jax.jit's")


def test_min_pooling_is_left_alone():
    forward = pool("NCDHW", 2, 2, 0, op=lax.min, init=jnp.inf)
    x = special_input(shape_of("NCDHW"), np.float32)
    text = pool3d_pass.jit(forward).lower(x).compile().as_text()
    assert "custom-call" not in text


def test_neutral_output_never_gets_the_call():
    layout, k, s, p = ACCEPTED[0]
    module = jax.jit(pool(layout, k, s, p)).lower(special_input(shape_of(layout), np.float32)).as_text()
    text, report = pool3d_pass.rewrite_text(module)
    assert report.forward_alone == 0 and not report.events
    assert "forward_output" not in text and "stablehlo.reduce_window" in text


def test_a_training_step_keeps_the_forward_call():
    layout, k, s, p = ACCEPTED[0]
    step = layer_step(pool(layout, k, s, p))
    x = special_input(shape_of(layout), np.float32, nan=False, negative_zero=False)
    text = pool3d_pass.jit(step).lower(x).compile().as_text()
    assert f'custom_call_target="{TARGETS["forward"]}"' in text and FORWARD_OUTPUT not in text


def test_the_forward_a_recompute_gradient_reads_stays_xlas():
    # not a forward without gradient: the backward call reads its y (the recompute strategy as asked)
    layout, k, s, p = ACCEPTED[0]
    step = layer_step(pool(layout, k, s, p))
    x = special_input(shape_of(layout), np.float32, nan=False, negative_zero=False)
    compiled = pool3d_pass.jit(step, strategy="recompute").lower(x).compile()
    text = compiled.as_text()
    assert FORWARD_OUTPUT not in text and f'custom_call_target="{TARGETS["backward"]}"' in text
    for a, b in zip(compiled(x), jax.jit(step)(x), strict=True):
        assert_same_bits(np.asarray(a), np.asarray(b), "jax.jit's")
