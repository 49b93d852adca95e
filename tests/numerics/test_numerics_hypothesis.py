"""Property-based end-to-end numerics: JAX max-pool gradients, original vs rewritten.

Every example draws a pooling configuration (rank 4-6, 1-3 contiguous pooled
dimensions placed last (NCDHW-like) or followed by parallel dimensions
(NDHWC-like), window 1-5, stride 1-3, no / symmetric / asymmetric explicit
padding with lo <= hi and with lo > hi, each side below the window, sizes
from the window up, f32 / bf16 / f16: only what the pass rewrites; the
refusals are tested by name at the end),
lowers ``jax.vjp`` of ``lax.reduce_window(x, -inf, max, ...)`` with JAX on CPU,
rewrites the text with ``pool3d_pass.rewrite_text`` under each strategy
(recompute: the backward call; indices: the fused from-input call), runs both modules on
XLA:CPU and compares them with each other and with the float64 reference of
the contract (oracles/contract_numpy.py):

* f32, no overlap (stride >= window): bit-exact, and equal to the reference.
* f32, overlap: equal up to the rounding of the summation order (bound in
  ``contract_numpy.summation_tolerance``, never looser than 1e-6 of the magnitude).
* bf16/f16: no overlap bit-exact; with overlap the rewritten program (f32
  accumulation, one rounding) is within half an ulp of the float64 reference
  and no worse than XLA (which accumulates in the element type), up to the f32
  accumulation slack.

Inputs are full of ties: small integers, ReLU of normals (many zeros),
constants. The documented differences of docs/contract.md get dedicated tests
instead of being hidden: ``-inf`` inputs are checked against the reference
(``test_neg_inf_inputs_match_contract_reference``), an all ``-inf`` window with
explicit JAX padding shows XLA sending the gradient into the padding
(``test_all_neg_inf_window_documented_difference``), and a NaN window shows the
kernel selecting nothing (``test_nan_window_documented_difference``). Each
property asserts that at least 9 in 10 of its examples ran a kernel
(tests/support/kernel_examples.py).

Compile budget: an XLA select_and_scatter costs ~0.3-0.6 s to compile on 2
cores, the rewritten module ~0.07 s; with the ``ci`` profile (tests/conftest.py)
the file takes 30-70 s there (the low-precision test draws 3/4 of the profile's
examples). ``--hypothesis-profile=long`` runs ~1000 examples
per test.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from hypothesis import example, given, note, settings
from hypothesis import strategies as st
from jax import lax

import pool3d_pass
from oracles.contract_numpy import (
    assert_bit_exact,
    assert_within,
    check_pool_gradient,
    eps_of,
    max_pool_grad_reference,
    output_shape,
    overlaps,
    parallel_gap,
    summation_tolerance,
    window_in_padding,
)
from oracles.xla_runner import run_stablehlo

# Each gradient is a bare gradient (vjp of the pool).
from corpus import BARE_GRADIENT_CALL as GRADIENT_CALL
from corpus import BARE_GRADIENT_STRATEGIES as STRATEGIES
from kernel_examples import KernelExamples

F32, BF16, F16 = np.dtype(np.float32), np.dtype(ml_dtypes.bfloat16), np.dtype(np.float16)


pytestmark = [pytest.mark.usefixtures("cpu_kernels"), pytest.mark.slow]


# --------------------------------------------------------------------------
# configurations


@dataclasses.dataclass(frozen=True)
class Config:
    shape: tuple[int, ...]
    window: tuple[int, ...]
    strides: tuple[int, ...]
    padding: tuple[tuple[int, int], ...]
    dtype: np.dtype
    layout: str  # "leading" (parallel dims, then pooled) or "trailing" (parallel dims after pooled)
    pad_kind: str  # "valid", "symmetric", "lo<hi", "lo>hi"

    @property
    def out_shape(self) -> tuple[int, ...]:
        return output_shape(self.shape, self.window, self.strides, self.padding)

    @property
    def overlapping(self) -> bool:
        return overlaps(self.window, self.strides)

    @property
    def trivial(self) -> bool:
        """Every dimension is parallel: no pooling, the pass refuses it by design."""
        return all(k == 1 and s == 1 and p == (0, 0) for k, s, p in zip(self.window, self.strides, self.padding))

    def short(self) -> str:
        return (
            f"shape={self.shape} window={self.window} strides={self.strides} "
            f"padding={self.padding} dtype={self.dtype.name} layout={self.layout} pad={self.pad_kind}"
        )


PAD_KINDS = ("valid", "symmetric", "lo<hi", "lo>hi")


@st.composite
def configs(draw, dtypes=(F32,), pad_kinds=PAD_KINDS, max_elements=6000):
    """Only configurations the pass rewrites and the kernels accept.

    Per pooled dimension: padding on each side below the window (`lo < k`,
    `hi < k`) and a size of at least the window, so that every window holds a
    real element (first window: it ends at `k - 1 - lo >= 0`; last window: it
    starts at most at `n + hi - k <= n - 1`). One pooled dimension (the
    "anchor") surely pools (window >= 2) and carries the padding kind's
    asymmetry, so no draw is a window of ones or lacks its asymmetry, and none
    is filtered out. Too many elements set the largest parallel dimensions to
    1, then halve the pooled sizes' excess over the window (5**3 elements at
    the end of that road, far below `max_elements`).
    The refusals (a window wholly in padding, a window of ones, pooled
    dimensions spread too far) have their own tests below.
    """
    rank = draw(st.integers(4, 6), label="rank")
    n_pooled = draw(st.integers(1, 3), label="pooled dims")
    n_parallel = rank - n_pooled
    layout = draw(st.sampled_from(["leading", "trailing"]), label="layout")
    n_trailing = 0 if layout == "leading" else draw(st.integers(1, n_parallel), label="trailing dims")
    n_leading = n_parallel - n_trailing
    pad_kind = draw(st.sampled_from(pad_kinds), label="padding kind")
    anchor = draw(st.integers(0, n_pooled - 1), label="anchor dim")

    pooled_shape, window, strides, padding = [], [], [], []
    for d in range(n_pooled):
        k = draw(st.integers(2 if d == anchor else 1, 5))
        s = draw(st.integers(1, 3))
        top = min(2, k - 1)  # padding below the window
        if pad_kind == "valid":
            lo = hi = 0
        elif pad_kind == "symmetric":
            lo = hi = draw(st.integers(0, top))
        elif d == anchor:  # the kind's asymmetry, surely
            small = draw(st.integers(0, k - 2))
            large = draw(st.integers(small + 1, k - 1))
            lo, hi = (small, large) if pad_kind == "lo<hi" else (large, small)
        elif pad_kind == "lo<hi":
            lo = draw(st.integers(0, top))
            hi = draw(st.integers(lo, k - 1))
        else:  # "lo>hi"
            hi = draw(st.integers(0, top))
            lo = draw(st.integers(hi, k - 1))
        pooled_shape.append(draw(st.integers(k, k + 6)))
        window.append(k)
        strides.append(s)
        padding.append((lo, hi))

    lead = [draw(st.integers(1, 3)) for _ in range(n_leading)]
    trail = [draw(st.integers(1, 3)) for _ in range(n_trailing)]
    while int(np.prod(lead + pooled_shape + trail)) > max_elements:
        if any(n > 1 for n in lead + trail):
            parallel = lead + trail
            i = parallel.index(max(parallel))
            (lead if i < len(lead) else trail)[i if i < len(lead) else i - len(lead)] = 1
        else:
            i = max(range(n_pooled), key=lambda d: pooled_shape[d] - window[d])
            pooled_shape[i] = window[i] + (pooled_shape[i] - window[i]) // 2
    shape = tuple(lead + pooled_shape + trail)
    unit = ((1, 1, (0, 0)),)
    par_lead, par_trail = unit * n_leading, unit * n_trailing
    dims = par_lead + tuple(zip(window, strides, padding)) + par_trail
    dtype = draw(st.sampled_from(dtypes), label="dtype")
    return Config(
        shape=shape,
        window=tuple(d[0] for d in dims),
        strides=tuple(d[1] for d in dims),
        padding=tuple(d[2] for d in dims),
        dtype=np.dtype(dtype),
        layout=layout,
        pad_kind=pad_kind,
    )


# --------------------------------------------------------------------------
# inputs


X_KINDS = ("smallint", "relu", "constant", "smallint+constant")


def make_x(rng: np.random.Generator, shape, dtype, kind: str) -> np.ndarray:
    """Inputs full of ties, exactly representable in ``dtype``."""
    if kind == "smallint":
        x = rng.integers(-2, 3, size=shape).astype(np.float64)
    elif kind == "relu":
        x = np.maximum(rng.standard_normal(shape), 0.0)
    elif kind == "constant":
        x = np.full(shape, float(rng.integers(-3, 4)))
    elif kind == "smallint+constant":
        x = rng.integers(-1, 2, size=shape).astype(np.float64)
        x[rng.random(shape) < 0.5] = 1.0
    else:  # pragma: no cover
        raise ValueError(kind)
    return x.astype(dtype)


def make_g(rng: np.random.Generator, shape, dtype) -> np.ndarray:
    """Cotangents with fractional parts, so overlapping sums really round."""
    return rng.standard_normal(shape).astype(dtype)


# --------------------------------------------------------------------------
# lowering, rewriting, running


def lower(cfg: Config) -> str:
    window, strides, padding = cfg.window, cfg.strides, cfg.padding

    def grad(x, g):
        return jax.vjp(lambda x: lax.reduce_window(x, -jnp.inf, lax.max, window, strides, padding), x)[1](g)[0]

    x = jax.ShapeDtypeStruct(cfg.shape, cfg.dtype)
    g = jax.ShapeDtypeStruct(cfg.out_shape, cfg.dtype)
    return jax.jit(grad).lower(x, g).as_text()


def _note(message: str) -> None:
    """hypothesis.note inside a @given test, nothing elsewhere."""
    from hypothesis.control import _current_build_context

    if _current_build_context.value is not None:
        note(message)


def rewrite(cfg: Config, text: str, strategy: str = "recompute") -> str:
    """The rewritten text; the configuration must be one the pass rewrites (configs() draws only those)."""
    new_text, report = pool3d_pass.rewrite_text(text, strategy=strategy)
    _note(f"report: rewritten={report.rewritten} missed={[(m.location, m.reason) for m in report.missed]}")
    assert not cfg.trivial and not parallel_gap(cfg.window, cfg.strides, cfg.padding), cfg.short()
    assert not window_in_padding(cfg.shape, cfg.window, cfg.strides, cfg.padding), cfg.short()
    assert report.rewritten == 1, (cfg.short(), [m.reason for m in report.missed])
    assert new_text.count(f"custom_call @{GRADIENT_CALL[strategy]}(") == 1
    assert "select_and_scatter" not in new_text
    return new_text


def refused(cfg: Config, reason: str, strategy: str) -> tuple[str, str]:
    """(original, rewritten) text of a configuration the pass must leave alone for `reason`."""
    text = lower(cfg)
    new_text, report = pool3d_pass.rewrite_text(text, strategy=strategy)
    reasons = [m.reason for m in report.missed]
    assert report.rewritten == 0 and reasons and all(reason in r for r in reasons), reasons
    assert "custom_call" not in new_text and "select_and_scatter" in new_text
    return text, new_text


def run(text: str, x: np.ndarray, g: np.ndarray) -> np.ndarray:
    (out,) = run_stablehlo(text, [x, g])
    return out


def run_rewritten(text: str, strategy: str, x: np.ndarray, g: np.ndarray, kernel: KernelExamples) -> np.ndarray:
    """Run a rewritten program, which calls the strategy's kernel; count the example."""
    assert f"custom_call @{GRADIENT_CALL[strategy]}(" in text
    out = run(text, x, g)
    kernel.reached()
    return out


def compare(cfg: Config, x: np.ndarray, g: np.ndarray, xla: np.ndarray, rewritten: np.ndarray) -> None:
    """The comparison rules of this file (module docstring), for finite inputs."""
    check_pool_gradient(x, g, cfg.window, cfg.strides, cfg.padding, xla, rewritten)


# --------------------------------------------------------------------------
# the properties


def check_drawn(cfg: Config, x_kind: str, seed: int, strategy: str, kernel: KernelExamples) -> None:
    """Original and rewritten program on drawn inputs, compared as `compare` says."""
    note(cfg.short())
    rng = np.random.default_rng(seed)
    x = make_x(rng, cfg.shape, cfg.dtype, x_kind)
    g = make_g(rng, cfg.out_shape, cfg.dtype)
    text = lower(cfg)
    new_text = rewrite(cfg, text, strategy)
    compare(cfg, x, g, run(text, x, g), run_rewritten(new_text, strategy, x, g, kernel))


# Each property is a @given function run inside a plain test, which then
# asserts how many of its examples called the kernel (settings().max_examples
# is the profile's: 40 under "ci", 1000 under "long").


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_f32_rewritten_matches_xla(strategy: str):
    kernel = KernelExamples()

    @given(cfg=configs(dtypes=(F32,)), x_kind=st.sampled_from(X_KINDS), seed=st.integers(0, 2**32 - 1))
    @example(  # NCDHW k3 s2 p1: the classic overlapping case
        cfg=Config((2, 3, 5, 5, 5), (1, 1, 3, 3, 3), (1, 1, 2, 2, 2), ((0, 0), (0, 0), (1, 1), (1, 1), (1, 1)), F32, "leading", "symmetric"),
        x_kind="smallint", seed=0,
    )
    @example(  # NDHWC, asymmetric lo > hi on the explicit-pad form: accepted by the pass
        cfg=Config((2, 5, 4, 3, 2), (1, 3, 2, 2, 1), (1, 2, 1, 2, 1), ((0, 0), (2, 1), (1, 0), (0, 0), (0, 0)), F32, "trailing", "lo>hi"),
        x_kind="relu", seed=1,
    )
    def f32(cfg: Config, x_kind: str, seed: int):
        check_drawn(cfg, x_kind, seed, strategy, kernel)

    f32()
    kernel.assert_at_least(settings().max_examples)


LOW_PRECISION_EXAMPLES = max(1, settings().max_examples * 3 // 4)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_low_precision_rewritten_vs_xla_and_reference(strategy: str):
    kernel = KernelExamples()

    @settings(max_examples=LOW_PRECISION_EXAMPLES)
    @given(cfg=configs(dtypes=(BF16, F16)), x_kind=st.sampled_from(X_KINDS), seed=st.integers(0, 2**32 - 1))
    @example(
        cfg=Config((1, 2, 6, 6, 6), (1, 1, 3, 3, 3), (1, 1, 1, 1, 1), ((0, 0), (0, 0), (1, 1), (1, 1), (1, 1)), BF16, "leading", "symmetric"),
        x_kind="constant", seed=2,
    )
    @example(
        cfg=Config((1, 6, 6, 6, 2), (1, 3, 3, 3, 1), (1, 1, 1, 1, 1), ((0, 0), (1, 1), (1, 1), (1, 1), (0, 0)), F16, "trailing", "symmetric"),
        x_kind="constant", seed=3,
    )
    def low_precision(cfg: Config, x_kind: str, seed: int):
        check_drawn(cfg, x_kind, seed, strategy, kernel)

    low_precision()
    kernel.assert_at_least(LOW_PRECISION_EXAMPLES)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_neg_inf_inputs_match_contract_reference(strategy: str):
    kernel = KernelExamples()

    @given(
        cfg=configs(dtypes=(F32,), pad_kinds=("valid", "symmetric", "lo<hi")),
        neg_inf_fraction=st.sampled_from([0.3, 0.7, 0.95, 1.0]),
        seed=st.integers(0, 2**32 - 1),
    )
    def neg_inf(cfg: Config, neg_inf_fraction: float, seed: int):
        check_neg_inf(cfg, neg_inf_fraction, seed, strategy, kernel)

    neg_inf()
    kernel.assert_at_least(settings().max_examples)


def check_neg_inf(cfg: Config, neg_inf_fraction: float, seed: int, strategy: str, kernel: KernelExamples) -> None:
    """-inf inputs: the rewritten program against the contract reference only.

    XLA is not the oracle here: on JAX's explicitly padded operand it may hand
    an all -inf window's gradient to a padded element (see the next test).
    With lo <= hi the pass folds the symmetric part into the kernel and keeps
    only a HIGH-side remainder as an explicit pad; the first non-padding tap of
    a window that has a real element is then always real, so the rewritten
    program equals the contract exactly. (lo > hi: see
    ``test_lo_greater_than_hi_neg_inf_window``.)
    """
    note(cfg.short())
    rng = np.random.default_rng(seed)
    x = rng.integers(-2, 3, size=cfg.shape).astype(np.float32)
    x[rng.random(cfg.shape) < neg_inf_fraction] = -np.inf
    g = make_g(rng, cfg.out_shape, cfg.dtype)
    new_text = rewrite(cfg, lower(cfg), strategy)  # a missed rewrite would leave XLA's -inf behaviour
    rewritten = run_rewritten(new_text, strategy, x, g, kernel)
    ref = max_pool_grad_reference(x, g, cfg.window, cfg.strides, cfg.padding)
    if cfg.overlapping:
        assert_within(rewritten, ref.grad, summation_tolerance(ref, eps_of(F32)), "rewritten vs reference (-inf)")
    else:
        assert_bit_exact(rewritten, ref.grad.astype(np.float32), "rewritten vs reference (-inf, no overlap)")


# --------------------------------------------------------------------------
# the documented differences, shown on purpose


def _cfg_1d(n, k, s, lo, hi, dtype=F32) -> Config:
    """NCDHW-like rank-5 config pooling only the last dimension."""
    return Config((1, 1, 1, 1, n), (1, 1, 1, 1, k), (1, 1, 1, 1, s), ((0, 0),) * 4 + ((lo, hi),), np.dtype(dtype), "leading", "symmetric" if lo == hi else ("lo<hi" if lo < hi else "lo>hi"))


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_all_neg_inf_window_documented_difference(strategy):
    """docs/contract.md: an all -inf window with explicit JAX padding.

    x = [-inf, -inf, -inf, -inf, 5], k=3, s=2, padding (1, 1): windows cover
    positions {-1,0,1}, {1,2,3}, {3,4,5}. Window 0 holds padding first: XLA's
    select_and_scatter on the explicitly -inf-padded operand selects the padded
    element and its gradient is sliced away; the kernel never selects padding
    and gives it to the first real -inf (x[0]). Window 1 is all real -inf: both
    pick x[1]. Window 2 has max 5: both pick x[4].
    """
    cfg = _cfg_1d(5, 3, 2, 1, 1)
    x = np.array([-np.inf, -np.inf, -np.inf, -np.inf, 5.0], np.float32).reshape(cfg.shape)
    g = np.array([10.0, 20.0, 40.0], np.float32).reshape(cfg.out_shape)
    text = lower(cfg)
    new_text = rewrite(cfg, text, strategy)
    xla, rewritten = run(text, x, g).ravel(), run(new_text, x, g).ravel()
    ref = max_pool_grad_reference(x, g, cfg.window, cfg.strides, cfg.padding).grad.ravel()
    np.testing.assert_array_equal(xla, [0.0, 20.0, 0.0, 0.0, 40.0])  # window 0's 10 went to padding
    np.testing.assert_array_equal(rewritten, [10.0, 20.0, 0.0, 0.0, 40.0])  # first real element
    np.testing.assert_array_equal(rewritten, ref)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_lo_greater_than_hi_neg_inf_window(strategy):
    """lo > hi on JAX's explicit-pad form: the low remainder is explicit padding.

    The pass folds min(lo, hi) into the kernel and keeps the rest as an
    explicit -inf pad in front of the kernel (pool3d_pass/matching/window.py);
    on the explicit form it accepts lo > hi because XLA itself may select
    padding there. For an all -inf window that starts in that low remainder
    the kernel picks the remainder's -inf (not a real element), so the
    gradient is dropped, like XLA, and unlike the contract reference.
    x = [-inf, -inf, 3], k=2, s=1, padding (1, 0): windows {pad, x0},
    {x0, x1}, {x1, x2}.
    """
    cfg = _cfg_1d(3, 2, 1, 1, 0)
    x = np.array([-np.inf, -np.inf, 3.0], np.float32).reshape(cfg.shape)
    g = np.array([10.0, 20.0, 40.0], np.float32).reshape(cfg.out_shape)
    text = lower(cfg)
    new_text = rewrite(cfg, text, strategy)
    xla, rewritten = run(text, x, g).ravel(), run(new_text, x, g).ravel()
    ref = max_pool_grad_reference(x, g, cfg.window, cfg.strides, cfg.padding).grad.ravel()
    np.testing.assert_array_equal(ref, [30.0, 0.0, 40.0])  # contract: windows 0 and 1 pick x0
    np.testing.assert_array_equal(xla, [20.0, 0.0, 40.0])  # window 0 picks padding, dropped
    np.testing.assert_array_equal(rewritten, xla)  # the remainder pad behaves like XLA's


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_nan_window_documented_difference(strategy):
    """docs/contract.md: a window whose maximum is NaN selects nothing in the kernel.

    x = [1, NaN, 3, 2 | 4, 0], k=4 then k=2 (s=4, VALID), one window per group.
    Forward max of window 0 is NaN (XLA's max propagates NaN). XLA's
    select_and_scatter (GE) switches away from NaN on the next compare and
    gives the gradient to 3, the element after the NaN that wins the rest of
    the walk; the kernel finds no element equal to NaN and gives it to no one.
    Window 1 is ordinary: both give 4 its gradient.
    """
    cfg = _cfg_1d(6, 4, 4, 0, 0)
    cfg = dataclasses.replace(cfg, shape=(1, 1, 1, 1, 8))
    x = np.array([1.0, np.nan, 3.0, 2.0, 4.0, 0.0, -1.0, -2.0], np.float32).reshape(cfg.shape)
    g = np.array([10.0, 20.0], np.float32).reshape(cfg.out_shape)
    text = lower(cfg)
    new_text = rewrite(cfg, text, strategy)
    xla, rewritten = run(text, x, g).ravel(), run(new_text, x, g).ravel()
    ref = max_pool_grad_reference(x, g, cfg.window, cfg.strides, cfg.padding).grad.ravel()
    np.testing.assert_array_equal(xla, [0, 0, 10, 0, 20, 0, 0, 0])
    np.testing.assert_array_equal(rewritten, [0, 0, 0, 0, 20, 0, 0, 0])
    np.testing.assert_array_equal(rewritten, ref)


def test_parallel_dimension_between_pooled_ones_is_rewritten():
    """Minimal case: NCDHW (1, 1, 4, 3, 4), window (1, 1, 2, 1, 2), stride (1, 1, 2, 1, 2), VALID."""
    cfg = Config((1, 1, 4, 3, 4), (1, 1, 2, 1, 2), (1, 1, 2, 1, 2), ((0, 0),) * 5, F32, "leading", "valid")
    text = lower(cfg)
    new_text, report = pool3d_pass.rewrite_text(text)
    rng = np.random.default_rng(0)
    x = make_x(rng, cfg.shape, cfg.dtype, "smallint")
    g = make_g(rng, cfg.out_shape, cfg.dtype)
    compare(cfg, x, g, run(text, x, g), run(new_text, x, g))  # numerics hold either way
    assert report.rewritten == 1, [m.reason for m in report.missed]


# --------------------------------------------------------------------------
# the refusals configs() never draws, each by name: left untouched, with the
# reason, and the program XLA's own (bit for bit, element type sums included)


REFUSALS = {
    # low padding of at least the window: the first window is all padding
    "low_padding_at_least_the_window": (_cfg_1d(5, 2, 1, 2, 0), "in padding"),
    # the last window starts past the input: (3 + 0 + 3 - 2) // 2 + 1 = 3 windows, the last at 4
    "last_window_past_the_input": (_cfg_1d(3, 2, 2, 0, 3), "in padding"),
    # an input smaller than the window, high padding past it: windows at 0, 1, 2, the last two all padding
    "input_smaller_than_the_window": (_cfg_1d(1, 2, 1, 0, 3), "in padding"),
    # window 1, stride 1, no padding everywhere: nothing is pooled
    "window_of_ones": (Config((2, 3, 4), (1, 1, 1), (1, 1, 1), ((0, 0),) * 3, F32, "leading", "valid"), "pools no dimension"),
    # pooled dimensions 1, 3 and 4 span four: the kernel pools three adjacent ones
    "pooled_dimensions_spread_over_four": (
        Config((1, 4, 3, 4, 4), (1, 2, 1, 2, 2), (1, 2, 1, 2, 2), ((0, 0),) * 5, F32, "leading", "valid"), "not contiguous"),
}


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("name", sorted(REFUSALS))
def test_refused_configuration_is_left_to_xla(name, strategy):
    cfg, reason = REFUSALS[name]
    assert cfg.trivial or parallel_gap(cfg.window, cfg.strides, cfg.padding) or window_in_padding(
        cfg.shape, cfg.window, cfg.strides, cfg.padding)  # what configs() rules out
    text, new_text = refused(cfg, reason, strategy)
    rng = np.random.default_rng(0)
    x, g = make_x(rng, cfg.shape, cfg.dtype, "smallint"), make_g(rng, cfg.out_shape, cfg.dtype)
    assert_bit_exact(run(new_text, x, g), run(text, x, g), f"{name}: refused, the program unchanged")
