"""The suite's one bit comparison (oracles/float_bits.py) catches what "bit for bit" excludes."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from oracles.float_bits import assert_same_bits, float_bits

DTYPES = [np.dtype(np.float32), np.dtype(ml_dtypes.bfloat16), np.dtype(np.float16), np.dtype(np.float64)]


def _nan_with(dtype, sign, payload_bit):
    """A NaN of `dtype` with the given sign and one extra payload bit set."""
    bits = float_bits(np.array([np.nan], dtype), nan="exact").copy()
    width = dtype.itemsize * 8
    bits[0] = (bits[0] & ~np.array(1 << (width - 1), bits.dtype)) | np.array(sign << (width - 1), bits.dtype)
    bits[0] |= np.array(1 << payload_bit, bits.dtype)
    return bits.view(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("nan", ["any", "exact"])
def test_nan_never_matches_a_number(dtype, nan):
    values = np.array([0.0, -0.0, np.inf, -np.inf, 1.0], dtype)
    for other in values:
        with pytest.raises(AssertionError, match="differ bitwise"):
            assert_same_bits(np.array([np.nan], dtype), np.array([other], dtype), "nan vs number", nan=nan)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("nan", ["any", "exact"])
def test_the_sign_of_zero_matters(dtype, nan):
    with pytest.raises(AssertionError, match="differ bitwise"):
        assert_same_bits(np.array([0.0], dtype), np.array([-0.0], dtype), "+0 vs -0", nan=nan)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_nan_sign_and_payload_count_only_when_exact(dtype):
    a, b = _nan_with(dtype, 0, 0), _nan_with(dtype, 1, 1)
    assert np.isnan(a.astype(np.float64)).all() and np.isnan(b.astype(np.float64)).all()
    assert_same_bits(a, b, "any NaN matches any NaN", nan="any")
    assert_same_bits(a, a.copy(), "a NaN matches itself", nan="exact")
    with pytest.raises(AssertionError, match="differ bitwise"):
        assert_same_bits(a, b, "payload and sign", nan="exact")


def test_dtype_and_shape_must_agree():
    with pytest.raises(AssertionError, match="dtype"):
        assert_same_bits(np.zeros(2, np.float32), np.zeros(2, np.float16))
    with pytest.raises(AssertionError, match="shape"):
        assert_same_bits(np.zeros(2, np.float32), np.zeros(3, np.float32))
    assert_same_bits(np.array([1.5, -0.0, np.nan], np.float32), np.array([1.5, -0.0, np.nan], np.float32))
