"""The one bit-level comparison of floats behind every "bit for bit" claim of the suite.

``float_bits(a, nan=...)`` views a float array (f32, bf16, f16, f64; an integer
array as it is) as unsigned integers of its width, and ``assert_same_bits`` compares two arrays that way:
same dtype, same shape, same bits. So the sign of zero matters (``+0`` is
``0x0000``, ``-0`` is ``0x8000``) and infinities are compared as numbers.

NaN, in one of two modes:

* ``nan="exact"``: a NaN's bits are compared as they are (sign and payload).
  For the CPU kernels' own output, which keeps the window's first NaN unchanged
  (docs/contract.md, "Calls": "the kernels return the window's first NaN
  unchanged").
* ``nan="any"``: every NaN becomes one canonical pattern, all ones (a negative
  quiet NaN with a full payload), which no non-NaN value has. A NaN then equals
  any NaN and nothing else: never ``+0`` (whose bits are zero), never ``-0`` or
  an infinity. For comparisons with XLA or with a numpy statement of the spec,
  whose NaNs may carry another sign or payload: "NaN payloads and signs are not
  part of the contract" (docs/contract.md).
"""

from __future__ import annotations

import numpy as np

__all__ = ["float_bits", "assert_same_bits", "NAN_MODES"]

NAN_MODES = ("exact", "any")


def float_bits(a, *, nan: str = "any") -> np.ndarray:
    """The bits of a float array as unsigned integers; NaNs canonical unless nan="exact"."""
    if nan not in NAN_MODES:
        raise ValueError(f"nan must be one of {NAN_MODES}, got {nan!r}")
    array = np.ascontiguousarray(np.asarray(a))
    unsigned = np.dtype(f"u{array.dtype.itemsize}")
    if nan == "exact" or array.dtype.kind in "biu":  # integer results (step counters): their bits
        return array.view(unsigned)  # a view: writing to it writes the floats (a contiguous input's own)
    out = array.view(unsigned).copy()
    out[np.isnan(array.astype(np.float64))] = np.iinfo(unsigned).max
    return out


def assert_same_bits(actual, expected, what: str = "", *, nan: str = "any") -> None:
    """Same dtype, shape and bits (sign of zero included; NaN as ``nan`` says)."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    bad = float_bits(actual, nan=nan) != float_bits(expected, nan=nan)
    if bad.any():
        i = tuple(int(v) for v in np.argwhere(bad)[0])
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {bad.size} elements differ bitwise (NaN {nan}); first at {i}: "
            f"{actual[i]!r} vs {expected[i]!r}"
        )
