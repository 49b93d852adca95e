"""The numpy statement of the contract (float64): the pool3d calls' selection and gradient, any rank.

Generalised to any rank and window (docs/contract.md, "Meaning"):

* ``y`` (the forward output) is the maximum over the REAL elements of each
  window (``-inf`` for a window of padding only; NaN propagates, as XLA's
  ``maximum`` does), unless the caller passes the ``y`` it wants the selection
  recomputed from.
* Walking the window's taps in row-major order, the FIRST real tap whose value
  equals ``y`` receives the window's whole gradient. Padding is never selected.
  A window whose maximum is NaN selects nothing (no element equals NaN).
* Contributions of overlapping windows add, here exactly in float64.

``padding`` is a sequence of non-negative ``(lo, hi)`` pairs, one per
dimension, like ``lax.reduce_window``'s explicit padding; ``lo > hi`` is
allowed. Besides the gradient the reference returns, per input element, how
many windows selected it (``count``) and the sum of the absolute gradients
they added (``magnitude``): the scale against which a summation-order rounding
tolerance is measured.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from oracles.float_bits import assert_same_bits
from pool3d_pass.contract import pooled_extent

__all__ = [
    "Reference",
    "max_pool_grad_reference",
    "output_shape",
    "overlaps",
    "summation_tolerance",
    "eps_of",
    "ulp",
]


@dataclass(frozen=True)
class Reference:
    grad: np.ndarray  # float64, shape of x
    count: np.ndarray  # int64, number of windows that selected each element
    magnitude: np.ndarray  # float64, sum of |g| over those windows
    y: np.ndarray  # float64 forward maxima (output shape)
    selected: np.ndarray  # int64 per window: row-major tap index, -1 if none


def output_shape(shape, window, strides, padding) -> tuple[int, ...]:
    """The contract's output extents (`pool3d_pass.contract.pooled_extent`), for any rank."""
    return tuple(pooled_extent(n, k, s, lo, hi) for n, k, s, (lo, hi) in zip(shape, window, strides, padding))


def overlaps(window, strides) -> bool:
    """Whether one input element can be in two windows (stride < window somewhere)."""
    return any(s < k for k, s in zip(window, strides))


def max_pool_grad_reference(
    x: np.ndarray,
    g: np.ndarray,
    window: Sequence[int],
    strides: Sequence[int],
    padding: Sequence[tuple[int, int]],
    y: np.ndarray | None = None,
) -> Reference:
    """Gradient of max pooling w.r.t. ``x`` per the contract, in float64."""
    x = np.asarray(x)
    rank = x.ndim
    window, strides = tuple(window), tuple(strides)
    padding = tuple((int(lo), int(hi)) for lo, hi in padding)
    if not (len(window) == len(strides) == len(padding) == rank):
        raise ValueError("window, strides and padding need one entry per dimension")
    if any(lo < 0 or hi < 0 for lo, hi in padding):
        raise ValueError(f"negative padding {padding}")
    out = output_shape(x.shape, window, strides, padding)
    if any(o < 1 for o in out):
        raise ValueError(f"empty output {out}")
    g = np.asarray(g).astype(np.float64)
    if g.shape != out:
        raise ValueError(f"g has shape {g.shape}, the window gives {out}")

    xf = x.astype(np.float64)
    padded_shape = tuple(n + lo + hi for n, (lo, hi) in zip(x.shape, padding))
    inner = tuple(slice(lo, lo + n) for n, (lo, _) in zip(x.shape, padding))
    xp = np.full(padded_shape, -np.inf)
    xp[inner] = xf
    real = np.zeros(padded_shape, dtype=bool)
    real[inner] = True

    taps = list(itertools.product(*(range(k) for k in window)))

    def view(a, tap):
        return a[tuple(slice(t, t + s * (o - 1) + 1, s) for t, s, o in zip(tap, strides, out))]

    if y is None:
        y = np.full(out, -np.inf)
        for tap in taps:
            v = view(xp, tap)
            # NaN-propagating maximum over real taps only.
            y = np.where(view(real, tap), np.maximum(y, v), y)
    else:
        y = np.asarray(y).astype(np.float64)

    selected = np.full(out, -1, dtype=np.int64)
    for i, tap in enumerate(taps):
        hit = view(real, tap) & (view(xp, tap) == y) & (selected == -1)
        selected[hit] = i

    grad_p = np.zeros(padded_shape)
    count_p = np.zeros(padded_shape, dtype=np.int64)
    mag_p = np.zeros(padded_shape)
    for i, tap in enumerate(taps):
        mask = selected == i
        if not mask.any():
            continue
        # Within one tap the strided view holds distinct positions: += is safe.
        view(grad_p, tap)[...] += np.where(mask, g, 0.0)
        view(count_p, tap)[...] += mask
        view(mag_p, tap)[...] += np.where(mask, np.abs(g), 0.0)
    return Reference(
        grad=grad_p[inner].copy(),
        count=count_p[inner].copy(),
        magnitude=mag_p[inner].copy(),
        y=y,
        selected=selected,
    )


def summation_tolerance(ref: Reference, eps: float, floor: float = 1e-6) -> np.ndarray:
    """Per-element bound on |a - b| for two sums of the same terms in different orders.

    Recursive summation of n terms in precision ``eps`` errs by at most
    ``(n - 1) * eps * sum|terms|`` (plus one rounding of the stored result), so
    two orders differ by at most twice that. Never tighter than
    ``floor * magnitude`` (the ~1e-6 relative agreement asked for), and zero
    where at most one window contributes (then both must be exact).
    """
    n = ref.count.astype(np.float64)
    rel = np.maximum(2.0 * np.maximum(n - 1.0, 0.0) * eps + 2.0 * eps, floor)
    return np.where(n > 1, rel * ref.magnitude, 0.0)


def eps_of(dtype) -> float:
    """Machine epsilon of a float dtype, numpy or ml_dtypes (bfloat16)."""
    return float(ml_dtypes.finfo(np.dtype(dtype)).eps)


def ulp(values, dtype) -> np.ndarray:
    """Spacing of ``dtype`` at ``|values|`` (the subnormal spacing near zero)."""
    fi = ml_dtypes.finfo(np.dtype(dtype))
    a = np.abs(np.asarray(values, dtype=np.float64))
    exp = np.floor(np.log2(np.maximum(a, float(fi.smallest_normal))))
    return np.exp2(exp - fi.nmant)


# --------------------------------------------------------------------------
# comparison rules shared by the numerics tests


def assert_bit_exact(actual: np.ndarray, expected: np.ndarray, what: str) -> None:
    """Same dtype, shape and bits (NaN payloads and the sign of zero included): float_bits.py, nan="exact"."""
    assert_same_bits(actual, expected, what, nan="exact")


def assert_within(actual, expected, tol, what: str) -> None:
    """|actual - expected| <= tol elementwise, in float64 (NaN fails)."""
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    err = np.abs(actual - expected)
    bad = ~(err <= tol)
    if bad.any():
        tol = np.broadcast_to(tol, err.shape)
        i = tuple(int(v) for v in np.argwhere(bad)[0])
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {bad.size} elements out of tolerance; first at {i}: "
            f"{actual[i]!r} vs {expected[i]!r}, |diff|={err[i]!r} > tol={tol[i]!r}"
        )


def check_pool_gradient(x, g, window, strides, padding, xla: np.ndarray, rewritten: np.ndarray) -> Reference:
    """The numerics rules for one pool gradient with FINITE inputs.

    * no overlap (stride >= window everywhere): rewritten, XLA and the
      reference rounded to the element type agree bit for bit;
    * f32 with overlap: rewritten within ``summation_tolerance`` of XLA and of
      the reference (only the order of the additions differs);
    * bf16/f16 with overlap: rewritten within half an ulp (+ f32 accumulation
      slack) of the reference, as the contract's f32 accumulation and single
      rounding promise, and elementwise no further from the reference than
      XLA's element-type sums are (+ the same slack).
    """
    dtype = np.dtype(rewritten.dtype)
    ref = max_pool_grad_reference(x, g, window, strides, padding)
    if not overlaps(window, strides):
        assert_bit_exact(rewritten, xla, "rewritten vs XLA (no overlap)")
        assert_bit_exact(rewritten, ref.grad.astype(dtype), "rewritten vs reference (no overlap)")
        return ref
    eps32 = eps_of(np.float32)
    if dtype == np.dtype(np.float32):
        tol = summation_tolerance(ref, eps32)
        assert_within(rewritten, xla, tol, "rewritten vs XLA (f32, overlap)")
        assert_within(rewritten, ref.grad, tol, "rewritten vs reference (f32, overlap)")
        return ref
    acc = summation_tolerance(ref, eps32, floor=0.0) + 4 * float(np.finfo(np.float32).tiny)
    half_ulp = 0.5 * ulp(ref.grad, dtype)
    assert_within(rewritten, ref.grad, half_ulp + acc, f"rewritten vs reference ({dtype.name}, one rounding)")
    err_rw = np.abs(rewritten.astype(np.float64) - ref.grad)
    err_xla = np.abs(xla.astype(np.float64) - ref.grad)
    assert_within(err_rw, 0.0, err_xla + 2 * acc, f"rewritten error <= XLA error ({dtype.name}, overlap)")
    return ref


__all__ += ["assert_bit_exact", "assert_within", "check_pool_gradient"]


def window_in_padding(shape, window, strides, padding) -> bool:
    """Whether some window of a pooled dimension lies wholly in padding.

    The contract requires every window to hold a real element
    (docs/contract.md, "Attributes"); the pass leaves such a gradient untouched
    ("... puts a whole window of k in padding").
    """
    for n, k, s, (lo, hi) in zip(shape, window, strides, padding):
        if (k, s, (lo, hi)) == (1, 1, (0, 0)):
            continue
        n_out = pooled_extent(n, k, s, lo, hi)
        if lo >= k or (n_out - 1) * s - lo >= n:
            return True
    return False


def parallel_gap(window, strides, padding) -> bool:
    """Whether the pooled dimensions span more than the kernel's three adjacent ones.

    A parallel dimension (window 1, stride 1, no padding) between pooled ones
    is pooled as a unit window when the span fits in three dimensions, e.g.
    window (1, 1, 2, 1, 2) becomes kernel_size (2, 1, 2). Wider spans, e.g.
    (1, 2, 1, 2, 2), stay untouched ("pooled dimensions [1, 3, 4] are not
    contiguous"): the numerics tests accept that miss.
    """
    pooled = [d for d, (k, s, p) in enumerate(zip(window, strides, padding)) if (k, s, tuple(p)) != (1, 1, (0, 0))]
    return bool(pooled) and pooled[-1] - pooled[0] + 1 > 3
