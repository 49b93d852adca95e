"""A pure-JAX implementation of the contract (docs/contract.md), for any backend.

Not fast: it walks the window taps in row-major (d, h, w) order, and at each
tap gives the window's gradient to the tap if it equals the window's maximum
and no earlier tap took it. Padding is masked out, so it is never selected;
contributions accumulate in f32. It uses no select_and_scatter, so the pass
never matches its own output. Its job is to test the binding mechanism and to
state the semantics executably.
"""

from __future__ import annotations

import itertools

import jax.numpy as jnp
from jax import lax


def _to_ncdhw(value, layout: str):
    return jnp.moveaxis(value, -1, 1) if layout == "NDHWC" else value


def _from_ncdhw(value, layout: str):
    return jnp.moveaxis(value, 1, -1) if layout == "NDHWC" else value


def max_pooling_3d_backward(
    grad_output,
    input,  # noqa: A002 - the contract's operand name
    output,
    *,
    kernel_size,
    stride,
    padding,
    data_format="NCDHW",
    output_format=None,
):
    output_format = output_format or data_format
    x = _to_ncdhw(input, data_format)
    g = _to_ncdhw(grad_output, output_format).astype(jnp.float32)
    y = _to_ncdhw(output, output_format)
    n, c = x.shape[:2]
    out_spatial = g.shape[2:]
    pad_config = [(0, 0, 0), (0, 0, 0)] + [(p, p, 0) for p in padding]
    padded_x = lax.pad(x, jnp.array(-jnp.inf, x.dtype), pad_config)
    is_real = lax.pad(jnp.ones(x.shape, jnp.bool_), jnp.array(False), pad_config)
    padded_shape = padded_x.shape

    taken = jnp.zeros(g.shape, jnp.bool_)
    grad_padded = jnp.zeros(padded_shape, jnp.float32)
    for taps in itertools.product(*(range(k) for k in kernel_size)):
        start = (0, 0, *taps)
        limit = (n, c, *(t + (o - 1) * s + 1 for t, o, s in zip(taps, out_spatial, stride)))
        strides = (1, 1, *stride)
        chosen = (
            (lax.slice(padded_x, start, limit, strides) == y)
            & lax.slice(is_real, start, limit, strides)
            & ~taken
        )
        taken = taken | chosen
        contribution = jnp.where(chosen, g, 0.0)
        scatter = [(0, 0, 0), (0, 0, 0)] + [
            (t, size - t - ((o - 1) * s + 1), s - 1)
            for t, size, o, s in zip(taps, padded_shape[2:], out_spatial, stride)
        ]
        grad_padded = grad_padded + lax.pad(contribution, jnp.float32(0), scatter)

    spatial = x.shape[2:]
    grad_input = lax.slice(
        grad_padded, (0, 0, *padding), (n, c, *(p + size for p, size in zip(padding, spatial)))
    )
    return _from_ncdhw(grad_input.astype(x.dtype), data_format)
