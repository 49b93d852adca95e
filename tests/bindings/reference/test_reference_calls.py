"""The reference binding (pure JAX, `bindings/reference/calls.py`) against the contract's numpy statement.

The reference binding is the executable statement of the semantics: other
tests use it as the oracle where the CPU kernels have no counterpart (the
CUDA kernels' mixed layouts). Here each of its five calls is checked against
`contract_numpy.max_pool_grad_reference`, an independent float64 transcription
of docs/contract.md: the forward maxima, the indices (first maximal real tap,
-1 for none), and every gradient, on tie-heavy inputs with NaNs and signed
zeros, in both layouts and with output_format differing from data_format.
Gradients are small integers, so every sum is exact and the comparison is
bit for bit.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from oracles.contract_numpy import max_pool_grad_reference, output_shape
from pool3d_pass.bindings import reference

DISJOINT, TWO_D, OVERLAP_S2, OVERLAP_S1 = (((2, 2, 2), (2, 2, 2), (0, 0, 0)), ((1, 2, 2), (1, 2, 2), (0, 0, 0)),
                                          ((3, 3, 3), (2, 2, 2), (1, 1, 1)), ((3, 3, 3), (1, 1, 1), (1, 1, 1)))
# Each geometry class (disjoint, the 2-D-in-3-D (1,2,2), overlapping with padding) in f32 and
# bf16, and each layout pair (same, mixed both ways) at least twice: the reference binding runs
# op by op (each call compiled here once per case), so the cases are chosen, not crossed.
CASES = [
    pytest.param(geometry, formats, dtype, id=f"{name}-{formats[0]}-{formats[1]}-{np.dtype(dtype).name}")
    for name, geometry, formats, dtype in [
        ("k2s2", DISJOINT, ("NCDHW", "NCDHW"), np.float32), ("k2s2", DISJOINT, ("NDHWC", "NCDHW"), ml_dtypes.bfloat16),
        ("k122", TWO_D, ("NDHWC", "NDHWC"), ml_dtypes.bfloat16), ("k122", TWO_D, ("NCDHW", "NDHWC"), np.float32),
        ("k3s2p1", OVERLAP_S2, ("NCDHW", "NDHWC"), np.float32),
        ("k3s2p1", OVERLAP_S2, ("NDHWC", "NDHWC"), ml_dtypes.bfloat16),
        ("k3s1p1", OVERLAP_S1, ("NDHWC", "NCDHW"), np.float32),
        ("k3s1p1", OVERLAP_S1, ("NCDHW", "NCDHW"), ml_dtypes.bfloat16),
    ]
]
SHAPE_NCDHW = (2, 3, 4, 5, 6)


def _to(layout, array):
    return np.moveaxis(array, 1, -1) if layout == "NDHWC" else array


def _from(layout, array):
    return np.moveaxis(array, -1, 1) if layout == "NDHWC" else array


def _inputs(dtype, kernel_size, stride, padding):
    rng = np.random.default_rng(7)
    x = rng.integers(-2, 3, SHAPE_NCDHW).astype(np.float64)  # many ties
    x[0, 0, 0, 0, :3] = np.nan
    x[1, 1] = np.where(x[1, 1] == 0, -0.0, x[1, 1])  # signed zeros tie with +0
    x = x.astype(dtype)
    out = output_shape(SHAPE_NCDHW, (1, 1, *kernel_size), (1, 1, *stride),
                       ((0, 0), (0, 0), *((p, p) for p in padding)))
    g = rng.integers(-8, 9, out).astype(dtype)
    return x, g


def _numpy(x, g, kernel_size, stride, padding, y=None):
    return max_pool_grad_reference(x, g, (1, 1, *kernel_size), (1, 1, *stride),
                                   ((0, 0), (0, 0), *((p, p) for p in padding)), y=y)


def _bits(array, dtype):
    return np.asarray(array, dtype=dtype).view(np.uint16 if dtype == ml_dtypes.bfloat16 else np.uint32)


@pytest.mark.parametrize(("geometry", "formats", "dtype"), CASES)
def test_every_call_states_the_contract(geometry, formats, dtype):
    (kernel_size, stride, padding), (data_format, output_format) = geometry, formats
    x, g = _inputs(dtype, kernel_size, stride, padding)
    expected = _numpy(x, g, kernel_size, stride, padding)
    attributes = dict(kernel_size=kernel_size, stride=stride, padding=padding,
                      data_format=data_format, output_format=output_format)
    xin, gin = jnp.asarray(_to(data_format, x)), jnp.asarray(_to(output_format, g))

    def call(function, *operands, **more):
        return jax.jit(functools.partial(function, **attributes, **more))(*operands)

    y, indices = call(reference.max_pooling_3d_forward, xin)
    y, indices = _from(output_format, np.asarray(y)), _from(output_format, np.asarray(indices))
    np.testing.assert_array_equal(y.astype(np.float64), expected.y)  # NaN where the window holds one
    np.testing.assert_array_equal(indices, expected.selected)
    assert (indices == -1).sum() == np.isnan(expected.y).sum() > 0  # a NaN window selects nothing

    y_only = _from(output_format, np.asarray(call(reference.max_pooling_3d_forward_output, xin)))
    np.testing.assert_array_equal(_bits(y_only, dtype), _bits(y, dtype))

    want = _bits(expected.grad, dtype)  # small integers: every sum exact, signs of zeros included
    got = {
        "backward": call(reference.max_pooling_3d_backward, gin, xin, jnp.asarray(_to(output_format, y))),
        "backward_from_input": call(reference.max_pooling_3d_backward_from_input, gin, xin),
        "backward_from_indices": call(reference.max_pooling_3d_backward_from_indices, gin,
                                      jnp.asarray(_to(output_format, indices)), input_shape=tuple(xin.shape)),
    }
    for name, grad in got.items():
        assert grad.dtype == dtype, name
        np.testing.assert_array_equal(_bits(_from(data_format, np.asarray(grad)), dtype), want, err_msg=name)


def test_backward_selects_against_the_output_it_is_given():
    """`backward` recomputes the selection from the `output` operand, not from its own maximum."""
    kernel_size, stride, padding = (2, 2, 2), (2, 2, 2), (0, 0, 0)
    x, g = _inputs(np.float32, kernel_size, stride, padding)
    x = np.nan_to_num(x)
    y = _numpy(x, g, kernel_size, stride, padding).y.astype(np.float32)
    y_low = y - 1  # another maximum: the selection follows it (its first equal tap, or none)
    expected = _numpy(x, g, kernel_size, stride, padding, y=y_low.astype(np.float64))
    grad = reference.max_pooling_3d_backward(jnp.asarray(g), jnp.asarray(x), jnp.asarray(y_low),
                                             kernel_size=kernel_size, stride=stride, padding=padding)
    np.testing.assert_array_equal(np.asarray(grad), expected.grad.astype(np.float32))
    assert not np.array_equal(expected.grad, _numpy(x, g, kernel_size, stride, padding).grad)


@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
def test_maxima_keep_the_contracts_signed_zeros_and_nan_on_wide_tensors(layout):
    """A window's maximum is +0 where it holds a +0, -0 where its zeros are all -0, NaN where it holds one,
    on a tensor wide enough that XLA:CPU's own vectorised reduce_window gives some mixed windows -0: the
    reference, the numerics battery's judge, must not inherit that (it compares integer keys of the bits)."""
    rng = np.random.default_rng(3)
    x = rng.choice(np.array([0.0, -0.0, -1.0, np.nan]), size=(1, 16, 6, 6, 32), p=[0.2, 0.6, 0.19, 0.01])
    x = x.astype(np.float32)
    windows = x.reshape(1, 16, 3, 2, 3, 2, 16, 2).transpose(0, 1, 2, 4, 6, 3, 5, 7).reshape(1, 16, 3, 3, 16, 8)
    has_nan, biggest = np.isnan(windows).any(-1), np.nanmax(np.where(np.isnan(windows), -np.inf, windows), -1)
    positive_zero = ((windows == 0) & ~np.signbit(windows)).any(-1)
    expected = np.where(has_nan, np.nan, np.where((biggest == 0) & positive_zero, 0.0, biggest)).astype(np.float32)
    assert ((biggest == 0) & positive_zero).sum() > 100 and ((biggest == 0) & ~positive_zero).sum() > 100
    y = reference.max_pooling_3d_forward_output(jnp.asarray(_to(layout, x)), kernel_size=(2, 2, 2),
                                                stride=(2, 2, 2), padding=(0, 0, 0), data_format=layout)
    y = _from(layout, np.asarray(y))
    np.testing.assert_array_equal(np.isnan(y), has_nan)
    assert np.array_equal(_bits(y, np.float32)[~has_nan], _bits(expected, np.float32)[~has_nan])
