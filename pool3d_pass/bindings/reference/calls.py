"""A pure-JAX implementation of every call of the contract (docs/contract.md), for any backend.

Not fast: it walks the window taps in row-major (d, h, w) order and, at each
tap, selects the tap for every window whose maximum it equals and that no
earlier tap took; padding is masked out, so it is never selected. The
selection is kept as the contract's indices (the tap's offset in its window,
-1 for none), and every gradient is scattered from indices, accumulating in
f32. The forward maximum is taken tap by tap too, on integer keys of the
values' bits (IEEE 754 `maximum`: `+0 > -0`, the window's first NaN), not by
XLA's `reduce_window`, which XLA:CPU computes with documented deviations
(signed zeros, NaN, subnormals on some shapes: docs/contract.md); so it is
the contract's result on every backend, bit for bit, and the judge of the
numerics battery (calibration/battery.py). It uses no select_and_scatter, so
the pass never matches its own output. Its job is to test the binding
mechanism and to state the semantics executably.
"""

from __future__ import annotations

import itertools

import jax.numpy as jnp
from jax import lax

from pool3d_pass.bindings.ffi_calls import contract_functions
from pool3d_pass.contract import (
    BACKWARD,
    BACKWARD_FROM_INDICES,
    BACKWARD_FROM_INPUT,
    FORWARD,
    FORWARD_OUTPUT,
    NO_SELECTION,
)


def _to_ncdhw(value, layout: str):
    return jnp.moveaxis(value, -1, 1) if layout == "NDHWC" else value


def _from_ncdhw(value, layout: str):
    return jnp.moveaxis(value, 1, -1) if layout == "NDHWC" else value


def _pad_config(padding):
    return [(0, 0, 0), (0, 0, 0)] + [(p, p, 0) for p in padding]


def _tap_slice(padded, taps, out_spatial, stride):
    """The element at tap `taps` of every window: shape (B, C, *out_spatial)."""
    n, c = padded.shape[:2]
    start = (0, 0, *taps)
    limit = (n, c, *(t + (o - 1) * s + 1 for t, o, s in zip(taps, out_spatial, stride)))
    return lax.slice(padded, start, limit, (1, 1, *stride))


def _taps(kernel_size):
    return enumerate(itertools.product(*(range(k) for k in kernel_size)))


def _forward_max(x, kernel_size, stride, padding):
    """IEEE 754 `maximum` over each window's real elements of NCDHW `x`: `+0 > -0`, the window's first NaN.

    Values are compared as integer keys of their f32 bits (monotone in the value, `-0` below `+0`), so
    no floating-point rewrite of a compiler can change a sign or drop a NaN; padding is -inf, which
    never changes a window's maximum.
    """
    out_spatial = tuple((n + 2 * p - k) // s + 1 for n, k, s, p in zip(x.shape[2:], kernel_size, stride, padding))
    padded = lax.pad(x, jnp.array(-jnp.inf, x.dtype), _pad_config(padding)).astype(jnp.float32)
    shape = (*x.shape[:2], *out_spatial)
    best = jnp.full(shape, -jnp.inf, jnp.float32)
    best_key = jnp.full(shape, jnp.iinfo(jnp.int32).min, jnp.int32)
    first_nan = jnp.zeros(shape, jnp.float32)
    seen_nan = jnp.zeros(shape, jnp.bool_)
    for _, taps in _taps(kernel_size):
        value = _tap_slice(padded, taps, out_spatial, stride)
        bits = lax.bitcast_convert_type(value, jnp.int32)
        key = bits ^ ((bits >> 31) & jnp.int32(0x7FFFFFFF))  # negative floats: order reversed into place
        nan = value != value
        wins = ~nan & (key > best_key)
        best, best_key = jnp.where(wins, value, best), jnp.where(wins, key, best_key)
        first_nan = jnp.where(nan & ~seen_nan, value, first_nan)
        seen_nan = seen_nan | nan
    return jnp.where(seen_nan, first_nan, best).astype(x.dtype)


def _select(x, y, kernel_size, stride, padding):
    """Indices (int16, y's shape): the first real tap of each window equal to y, else -1."""
    out_spatial = y.shape[2:]
    padded_x = lax.pad(x, jnp.array(-jnp.inf, x.dtype), _pad_config(padding))
    is_real = lax.pad(jnp.ones(x.shape, jnp.bool_), jnp.array(False), _pad_config(padding))
    indices = jnp.full(y.shape, NO_SELECTION, jnp.int16)
    for offset, taps in _taps(kernel_size):
        chosen = (
            (_tap_slice(padded_x, taps, out_spatial, stride) == y)
            & _tap_slice(is_real, taps, out_spatial, stride)
            & (indices == NO_SELECTION)
        )
        indices = jnp.where(chosen, jnp.int16(offset), indices)
    return indices


def _scatter(g, indices, input_spatial, kernel_size, stride, padding):
    """Gradient (f32, NCDHW input shape): each window's g added at its selected tap."""
    g = g.astype(jnp.float32)
    n, c = g.shape[:2]
    out_spatial = g.shape[2:]
    padded_spatial = tuple(size + 2 * p for size, p in zip(input_spatial, padding))
    grad_padded = jnp.zeros((n, c, *padded_spatial), jnp.float32)
    for offset, taps in _taps(kernel_size):
        contribution = jnp.where(indices == offset, g, 0.0)
        scatter = [(0, 0, 0), (0, 0, 0)] + [
            (t, size - t - ((o - 1) * s + 1), s - 1)
            for t, size, o, s in zip(taps, padded_spatial, out_spatial, stride)
        ]
        grad_padded = grad_padded + lax.pad(contribution, jnp.float32(0), scatter)
    return lax.slice(
        grad_padded, (0, 0, *padding), (n, c, *(p + size for p, size in zip(padding, input_spatial)))
    )


def _forward(
    input, *, kernel_size, stride, padding, data_format="NCDHW", output_format=None
):
    output_format = output_format or data_format
    x = _to_ncdhw(input, data_format)
    y = _forward_max(x, kernel_size, stride, padding)
    indices = _select(x, y, kernel_size, stride, padding)
    return _from_ncdhw(y, output_format), _from_ncdhw(indices, output_format)


def _forward_output(
    input, *, kernel_size, stride, padding, data_format="NCDHW", output_format=None
):
    """The forward of an inference program: the window maxima, y only."""
    y = _forward_max(_to_ncdhw(input, data_format), kernel_size, stride, padding)
    return _from_ncdhw(y, output_format or data_format)


def _backward_from_indices(
    grad_output, indices, *, input_shape, kernel_size, stride, padding, data_format="NCDHW", output_format=None
):
    output_format = output_format or data_format
    input_spatial = tuple(input_shape[1:4] if data_format == "NDHWC" else input_shape[2:5])
    grad = _scatter(
        _to_ncdhw(grad_output, output_format), _to_ncdhw(indices, output_format),
        input_spatial, kernel_size, stride, padding,
    )
    return _from_ncdhw(grad.astype(grad_output.dtype), data_format)


def _backward(
    grad_output, input, output, *, kernel_size, stride, padding, data_format="NCDHW", output_format=None
):
    output_format = output_format or data_format
    x = _to_ncdhw(input, data_format)
    indices = _select(x, _to_ncdhw(output, output_format), kernel_size, stride, padding)
    grad = _scatter(_to_ncdhw(grad_output, output_format), indices, x.shape[2:], kernel_size, stride, padding)
    return _from_ncdhw(grad.astype(x.dtype), data_format)


def _backward_from_input(
    grad_output, input, *, kernel_size, stride, padding, data_format="NCDHW", output_format=None
):
    x = _to_ncdhw(input, data_format)
    y = _forward_max(x, kernel_size, stride, padding)
    return _backward(
        grad_output, input, _from_ncdhw(y, output_format or data_format), kernel_size=kernel_size,
        stride=stride, padding=padding, data_format=data_format, output_format=output_format,
    )


_IMPLEMENTATIONS = {"forward": _forward, "forward_output": _forward_output,
                    "backward_from_indices": _backward_from_indices, "backward": _backward,
                    "backward_from_input": _backward_from_input}
FUNCTIONS = contract_functions(lambda kind, operands, attributes: _IMPLEMENTATIONS[kind](*operands, **attributes))
max_pooling_3d_backward = FUNCTIONS[BACKWARD]
max_pooling_3d_forward = FUNCTIONS[FORWARD]
max_pooling_3d_forward_output = FUNCTIONS[FORWARD_OUTPUT]
max_pooling_3d_backward_from_indices = FUNCTIONS[BACKWARD_FROM_INDICES]
max_pooling_3d_backward_from_input = FUNCTIONS[BACKWARD_FROM_INPUT]
