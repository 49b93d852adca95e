"""Where the neuron binding may differ from the contract, and the draws that show it.

docs/contract.md ("The neuron binding's deviations") lists what nkilib's NKI
kernel computes differently from the contract: NaN where a window's gradient
is NaN or infinite (but for a +-inf window's first selected tap), and -0
instead of +0 in a window with a negative gradient. `classify` counts each
of those in a result and raises on any other difference (beyond float32
summation and one rounding); `inputs` draws one problem's tensors (ties, and
NaN, infinities and -0 where asked) with the contract's float64 reference.
tests/bindings/neuron/test_neuron_transcription.py holds the kernel's numpy
transcription to it; `make neuron-check` (checks/neuron_check.py) the
kernel itself on a Trn2/Trn3 host.
"""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np

from oracles.contract_numpy import eps_of, max_pool_grad_reference, output_shape, summation_tolerance, ulp

DTYPES = {"f32": np.dtype(np.float32), "bf16": np.dtype(ml_dtypes.bfloat16), "f16": np.dtype(np.float16)}

SPECIAL_X = (np.nan, -np.inf, np.inf, -0.0)
SPECIAL_G = (np.nan, np.inf, -np.inf, -0.0)


def inputs(problem):
    """(x, g, y, reference, geometry) of a problem: layout, dtype, kernel, stride, padding, NCDHW shape,
    tile, seed and which tensors get special values ("none", "input", "gradient", "both")."""
    layout, dtype, kernel, stride, padding, ncdhw, tile, seed, specials = problem
    rng = np.random.default_rng(seed)
    window, strides, pads = (1, 1, *kernel), (1, 1, *stride), ((0, 0), (0, 0), *((p, p) for p in padding))
    x = rng.integers(-2, 3, ncdhw).astype(np.float64)  # ties
    g = rng.integers(-3, 4, output_shape(ncdhw, window, strides, pads)).astype(np.float64)
    if specials in ("input", "both"):
        x.flat[rng.choice(x.size, max(1, x.size // 8))] = rng.choice(SPECIAL_X, max(1, x.size // 8))
    if specials in ("gradient", "both"):
        g.flat[rng.choice(g.size, max(1, g.size // 6))] = rng.choice(SPECIAL_G, max(1, g.size // 6))
    element = DTYPES[dtype]
    x, g = x.astype(element), g.astype(element)
    reference = max_pool_grad_reference(x, g, window, strides, pads)
    y = reference.y.astype(element)  # the exact forward maxima (values of the element type)
    return x, g, y, reference, (window, strides, pads)


def window_taps(shape, window, strides, pads, out):
    """Per tap: (input index arrays of its real positions, their window's index arrays)."""
    grids = []
    for tap in itertools.product(*(range(k) for k in window)):
        per_axis = []
        for t, s, (lo, _), n, o in zip(tap, strides, pads, shape, out):
            positions = np.arange(o) * s - lo + t
            real = (positions >= 0) & (positions < n)
            per_axis.append((positions[real], np.arange(o)[real]))
        grids.append(per_axis)
    return grids


def classify(x, g, y, reference, geometry, got):
    """Counts of each kind of difference from the contract; raises on any the table does not list."""
    window, strides, pads = geometry
    out = g.shape
    g64 = g.astype(np.float64)
    # A real tap of a window whose gradient is NaN or +-inf, but for a selected first real tap
    # of a +-inf window (the only tap the sweep reaches before its gradient turns NaN).
    nan_taps = np.zeros(x.shape, bool)
    negative_zero_allowed = np.zeros(x.shape, bool)  # in some window whose gradient has its sign bit set
    first_real = np.full(out, -1)
    for index, per_axis in enumerate(window_taps(x.shape, window, strides, pads, out)):
        inputs_at = np.ix_(*(p for p, _ in per_axis))
        windows_at = np.ix_(*(w for _, w in per_axis))
        first_real[windows_at] = np.where(first_real[windows_at] < 0, index, first_real[windows_at])
        gw = g64[windows_at]
        keeps_infinity = np.isinf(gw) & (reference.selected[windows_at] == index) & (first_real[windows_at] == index)
        nan_taps[inputs_at] |= ~np.isfinite(gw) & ~keeps_infinity
        negative_zero_allowed[inputs_at] |= np.signbit(gw)
    got64 = got.astype(np.float64)
    want = reference.grad
    counts = {"nan instead of the contract's value": 0, "-0 instead of +0": 0}

    assert np.isnan(got64[nan_taps]).all(), "a tap of a non-finite-gradient window is not NaN"
    counts["nan instead of the contract's value"] = int((nan_taps & ~np.isnan(want)).sum())
    rest = ~nan_taps
    assert (np.isnan(got64) == np.isnan(want))[rest].all(), "NaN where the table lists none"
    infinite = rest & np.isinf(want)
    assert (got64[infinite] == want[infinite]).all()
    finite = rest & np.isfinite(want)
    element = got.dtype
    tolerance = summation_tolerance(reference, eps_of(np.float32), floor=0.0)
    if element != np.float32:
        tolerance = tolerance + np.where(reference.count > 1, 0.5 * ulp(want, element), 0.0)
    with np.errstate(invalid="ignore"):
        error = np.abs(got64 - want)
    assert (error[finite] <= tolerance[finite]).all(), f"beyond f32 summation and one rounding: {error[finite].max()}"
    negative_zero = finite & (got64 == 0) & np.signbit(got64) & ~np.signbit(want)
    assert negative_zero_allowed[negative_zero].all(), "-0 in no window with a negative gradient"
    counts["-0 instead of +0"] = int(negative_zero.sum())
    return counts
