"""PyTorch as an independent oracle for the rewritten max-pool gradient.

On NCDHW configurations that ``torch.nn.functional.max_pool3d`` accepts
(kernel k, stride s, symmetric padding p <= k // 2, no dilation, floor mode),
the gradient of the JAX program ``jax.vjp(lax.reduce_window(x, -inf, max,
(1, 1, k...), (1, 1, s...), padding))`` after ``pool3d_pass.rewrite_text``,
run on XLA:CPU with the pool3d CPU kernel, is compared with torch's
``max_pool3d(..., return_indices=True)`` + backward on the same float32 inputs.

The inputs are a random permutation of distinct values, so no window has a
tie: torch's tie rule (and its NaN handling) need not match the contract's
"first maximal element in row-major order". Without overlapping windows
(stride >= kernel) the results must be bit-exact; with overlap, equal up to the
rounding of the summation order (``contract_numpy.summation_tolerance``, with the
per-element contribution count taken from torch's own indices).

Needs torch: ``.venv/bin/pip install torch==2.13.0`` (the ``torch`` extra of
pyproject.toml); the module is skipped without it.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

pytestmark = pytest.mark.needs_torch

torch = pytest.importorskip(
    "torch",
    reason="PyTorch oracle: install it with `.venv/bin/pip install torch==2.13.0` (the 'torch' extra)",
)

import jax
import jax.numpy as jnp
from hypothesis import given, note, settings
from hypothesis import strategies as st
from jax import lax

import pool3d_pass
from oracles.contract_numpy import (
    assert_bit_exact,
    assert_within,
    eps_of,
    max_pool_grad_reference,
    summation_tolerance,
)
from oracles.xla_runner import run_stablehlo
from pool3d_pass.contract import pooled_extent

from corpus import BARE_GRADIENT_CALL as GRADIENT_CALL  # vjp of a pool: a bare gradient
from corpus import BARE_GRADIENT_STRATEGIES as STRATEGIES
from kernel_examples import KernelExamples

pytestmark = pytest.mark.usefixtures("cpu_kernels")


def _out(n, k, s, p):
    return pooled_extent(n, k, s, p, p)


# (shape NCDHW, kernel, stride, padding), each a per-axis triple; p <= k // 2.
CONFIGS = [
    ((2, 3, 6, 6, 6), (2, 2, 2), (2, 2, 2), (0, 0, 0)),  # no overlap
    ((2, 3, 7, 7, 7), (2, 2, 2), (2, 2, 2), (1, 1, 1)),  # no overlap, padding
    ((1, 2, 9, 8, 7), (3, 3, 3), (3, 3, 3), (1, 1, 0)),  # no overlap, odd sizes
    ((1, 2, 5, 6, 7), (1, 2, 3), (1, 2, 3), (0, 1, 1)),  # anisotropic, no overlap
    ((2, 3, 8, 8, 8), (3, 3, 3), (2, 2, 2), (1, 1, 1)),  # overlap (ResNet stem)
    ((2, 2, 6, 6, 6), (3, 3, 3), (1, 1, 1), (1, 1, 1)),  # heavy overlap, shape preserving
    ((1, 3, 7, 8, 9), (2, 3, 2), (1, 2, 1), (1, 1, 0)),  # anisotropic overlap
    ((1, 2, 9, 9, 9), (4, 4, 4), (3, 2, 1), (2, 1, 0)),  # even window with overlap
    ((3, 1, 5, 5, 5), (5, 5, 5), (2, 2, 2), (2, 2, 2)),  # window of 125 taps
    ((1, 4, 3, 4, 5), (2, 2, 2), (1, 3, 2), (1, 0, 1)),  # mixed overlap per axis
]


def _ids(cfg):
    shape, k, s, p = cfg
    return f"{'x'.join(map(str, shape))}-k{''.join(map(str, k))}-s{''.join(map(str, s))}-p{''.join(map(str, p))}"


def _lower(shape, k, s, p) -> str:
    window, strides = (1, 1, *k), (1, 1, *s)
    padding = ((0, 0), (0, 0), *((pi, pi) for pi in p))

    def grad(x, g):
        return jax.vjp(lambda x: lax.reduce_window(x, -jnp.inf, lax.max, window, strides, padding), x)[1](g)[0]

    out = shape[:2] + tuple(_out(n, ki, si, pi) for n, ki, si, pi in zip(shape[2:], k, s, p))
    return jax.jit(grad).lower(jax.ShapeDtypeStruct(shape, np.float32), jax.ShapeDtypeStruct(out, np.float32)).as_text()


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("cfg", CONFIGS, ids=_ids)
def test_rewritten_matches_torch_max_pool3d_backward(cfg, strategy):
    _check_against_torch(*cfg, strategy=strategy)


@st.composite
def torch_configs(draw):
    """Configurations torch and the pass both take: one axis surely pools (window >= 2;
    a window of ones is refused, tests/numerics/test_numerics_hypothesis.py), padding
    p <= k // 2 < k, so every window holds a real element even where the size is below
    the window. Nothing is filtered out."""
    anchor = draw(st.integers(0, 2))
    k = tuple(draw(st.integers(2 if axis == anchor else 1, 5)) for axis in range(3))
    s = tuple(draw(st.integers(1, 3)) for _ in range(3))
    p = tuple(draw(st.integers(0, ki // 2)) for ki in k)
    spatial = tuple(draw(st.integers(max(1, ki - 2 * pi), max(1, ki - 2 * pi) + 6)) for ki, pi in zip(k, p))
    shape = (draw(st.integers(1, 2)), draw(st.integers(1, 3)), *spatial)
    return shape, k, s, p


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_rewritten_matches_torch_drawn(strategy):
    kernel = KernelExamples()

    @given(cfg=torch_configs())
    def drawn(cfg):
        note(_ids(cfg))
        _check_against_torch(*cfg, strategy=strategy, kernel=kernel)

    drawn()
    kernel.assert_at_least(settings().max_examples)


def _check_against_torch(shape, k, s, p, *, strategy, kernel=None):
    assert all(pi <= ki // 2 for ki, pi in zip(k, p)), "torch requires padding <= kernel // 2"
    rng = np.random.default_rng(sum(itertools.chain(shape, k, s, p)))
    n = int(np.prod(shape))
    # distinct values: a random permutation of a spread of exactly representable floats
    x = (rng.permutation(n).astype(np.float32) - n / 2).reshape(shape) * np.float32(0.25)
    out = shape[:2] + tuple(_out(d, ki, si, pi) for d, ki, si, pi in zip(shape[2:], k, s, p))
    g = rng.standard_normal(out).astype(np.float32)

    # torch oracle
    xt = torch.from_numpy(x.copy()).requires_grad_(True)
    yt, idx = torch.nn.functional.max_pool3d(xt, k, s, p, return_indices=True)
    assert tuple(yt.shape) == out
    yt.backward(torch.from_numpy(g))
    dx_torch = xt.grad.numpy()

    # the rewritten JAX program
    new_text, report = pool3d_pass.rewrite_text(_lower(shape, k, s, p), strategy=strategy)
    window, strides = (1, 1, *k), (1, 1, *s)
    padding = ((0, 0), (0, 0), *((pi, pi) for pi in p))
    assert report.rewritten == 1, [m.reason for m in report.missed]
    assert f"custom_call @{GRADIENT_CALL[strategy]}(" in new_text
    (dx,) = run_stablehlo(new_text, [x, g])
    if kernel is not None:
        kernel.reached()

    ref = max_pool_grad_reference(x, g, window, strides, padding)
    # With distinct values torch's argmax and the contract's selection coincide:
    # map each window's selected tap to torch's flat index within the D*H*W plane.
    grids = np.meshgrid(*(np.arange(o) for o in out[2:]), indexing="ij")
    selected_flat = np.full(out, -1, dtype=np.int64)
    for i, tap in enumerate(itertools.product(*(range(ki) for ki in k))):
        d, h, w = (grids[a] * s[a] - p[a] + tap[a] for a in range(3))
        selected_flat = np.where(ref.selected == i, (d * shape[3] + h) * shape[4] + w, selected_flat)
    np.testing.assert_array_equal(selected_flat, idx.numpy(), err_msg="selection differs from torch's indices")

    if all(si >= ki for ki, si in zip(k, s)):
        assert_bit_exact(dx, dx_torch, "rewritten vs torch (no overlap)")
    else:
        tol = summation_tolerance(ref, eps_of(np.float32))
        assert_within(dx, dx_torch, tol, "rewritten vs torch (overlap)")
        assert_within(dx, ref.grad, tol, "rewritten vs float64 reference (overlap)")


def _lower_forward_and_gradient(shape, k, s, p) -> str:
    """The training-step job: (y, dx) from (x, g), the forward kept: the indices strategy replaces it."""
    window, strides = (1, 1, *k), (1, 1, *s)
    padding = ((0, 0), (0, 0), *((pi, pi) for pi in p))

    def step(x, g):
        y, vjp = jax.vjp(lambda x: lax.reduce_window(x, -jnp.inf, lax.max, window, strides, padding), x)
        return y, vjp(g)[0]

    out = shape[:2] + tuple(_out(n, ki, si, pi) for n, ki, si, pi in zip(shape[2:], k, s, p))
    return jax.jit(step).lower(jax.ShapeDtypeStruct(shape, np.float32), jax.ShapeDtypeStruct(out, np.float32)).as_text()


@pytest.mark.parametrize("cfg", CONFIGS, ids=_ids)
def test_forward_call_and_gradient_match_torch(cfg):
    shape, k, s, p = cfg
    rng = np.random.default_rng(sum(itertools.chain(shape, k, s, p)))
    n = int(np.prod(shape))
    x = (rng.permutation(n).astype(np.float32) - n / 2).reshape(shape) * np.float32(0.25)
    xt = torch.from_numpy(x.copy()).requires_grad_(True)
    yt = torch.nn.functional.max_pool3d(xt, k, s, p)
    g = rng.standard_normal(tuple(yt.shape)).astype(np.float32)
    yt.backward(torch.from_numpy(g))

    new_text, report = pool3d_pass.rewrite_text(_lower_forward_and_gradient(shape, k, s, p), strategy="indices")
    assert (report.forward_replaced, report.from_indices) == (1, 1), [m.reason for m in report.missed]
    y, dx = run_stablehlo(new_text, [x, g])

    assert_bit_exact(y, yt.detach().numpy(), "forward call vs torch max_pool3d")
    if all(si >= ki for ki, si in zip(k, s)):
        assert_bit_exact(dx, xt.grad.numpy(), "from-indices gradient vs torch (no overlap)")
    else:
        ref = max_pool_grad_reference(x, g, (1, 1, *k), (1, 1, *s), ((0, 0), (0, 0), *((pi, pi) for pi in p)))
        assert_within(dx, xt.grad.numpy(), summation_tolerance(ref, eps_of(np.float32)), "from-indices vs torch (overlap)")
