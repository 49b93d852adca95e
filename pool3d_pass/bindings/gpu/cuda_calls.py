"""The gpu binding's calls by the CUDA kernels: each one `jax.ffi.ffi_call` of the contract's own target.

Lowered for cuda, each function is exactly the contract's call
(`stablehlo.custom_call @pool3d.max_pooling_3d_<kind>`, typed FFI, the five
attributes), which the library's handlers (`cuda/kernels.cu`, registered
for platform CUDA by `cuda_library.register()`) run: an exported or
`pool3d-opt --target=gpu` program carries no kernel IR and no jaxlib-specific
payload. `calls.py` routes here when `implementation()` is "cuda".
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import numpy as np

from pool3d_pass.bindings.gpu import cuda_library
from pool3d_pass.contract import (
    BACKWARD,
    BACKWARD_FROM_INDICES,
    BACKWARD_FROM_INPUT,
    FORWARD,
    FORWARD_OUTPUT,
    LAYOUTS,
    TARGETS,
    pooled_extent,
)

INDEX_DTYPE = np.int16


def _attributes(kernel_size, stride, padding, data_format, output_format) -> dict:
    output_format = output_format or data_format
    if data_format not in LAYOUTS or output_format not in LAYOUTS:
        raise ValueError(f"gpu binding: layouts must be {' or '.join(LAYOUTS)}, got {data_format!r}/{output_format!r}")
    triples = {}
    for name, values in (("kernel_size", kernel_size), ("stride", stride), ("padding", padding)):
        array = np.asarray([int(v) for v in values], dtype=np.int64)
        if array.shape != (3,):
            raise ValueError(f"gpu binding: {name} must have 3 entries (D, H, W), got {list(values)}")
        triples[name] = array
    return dict(triples, data_format=data_format, output_format=output_format)


def _output_shape(input_shape, attrs) -> tuple[int, ...]:
    if len(input_shape) != 5:
        raise ValueError(f"gpu binding: operands must have rank 5, got shape {tuple(input_shape)}")
    channels_last = attrs["data_format"] == "NDHWC"
    b, c = input_shape[0], input_shape[4 if channels_last else 1]
    spatial = input_shape[1:4] if channels_last else input_shape[2:5]
    out = tuple(
        pooled_extent(int(n), int(k), int(s), int(p), int(p))
        for n, k, s, p in zip(spatial, attrs["kernel_size"], attrs["stride"], attrs["padding"])
    )
    if any(o < 1 for o in out):
        raise ValueError(f"gpu binding: input spatial shape {list(spatial)} gives an empty output {list(out)}")
    return (b, *out, c) if attrs["output_format"] == "NDHWC" else (b, c, *out)


def _call(kind: str, results):
    cuda_library.register()
    return jax.ffi.ffi_call(TARGETS[kind], results)


def max_pooling_3d_forward(input, *, kernel_size: Sequence[int], stride: Sequence[int],  # noqa: A002
                           padding: Sequence[int], data_format: str = "NCDHW", output_format: str | None = None):
    attrs = _attributes(kernel_size, stride, padding, data_format, output_format)
    shape = _output_shape(input.shape, attrs)
    call = _call(FORWARD, (jax.ShapeDtypeStruct(shape, input.dtype), jax.ShapeDtypeStruct(shape, INDEX_DTYPE)))
    return tuple(call(input, **attrs))


def max_pooling_3d_forward_output(input, *, kernel_size: Sequence[int], stride: Sequence[int],  # noqa: A002
                                  padding: Sequence[int], data_format: str = "NCDHW",
                                  output_format: str | None = None):
    attrs = _attributes(kernel_size, stride, padding, data_format, output_format)
    shape = _output_shape(input.shape, attrs)
    return _call(FORWARD_OUTPUT, jax.ShapeDtypeStruct(shape, input.dtype))(input, **attrs)


def max_pooling_3d_backward_from_indices(grad_output, indices, *, input_shape: Sequence[int],
                                         kernel_size: Sequence[int], stride: Sequence[int],
                                         padding: Sequence[int], data_format: str = "NCDHW",
                                         output_format: str | None = None):
    attrs = _attributes(kernel_size, stride, padding, data_format, output_format)
    shape = tuple(int(n) for n in input_shape)
    call = _call(BACKWARD_FROM_INDICES, jax.ShapeDtypeStruct(shape, grad_output.dtype))
    return call(grad_output, indices, **attrs)


def max_pooling_3d_backward(grad_output, input, output, *, kernel_size: Sequence[int],  # noqa: A002
                            stride: Sequence[int], padding: Sequence[int], data_format: str = "NCDHW",
                            output_format: str | None = None):
    attrs = _attributes(kernel_size, stride, padding, data_format, output_format)
    call = _call(BACKWARD, jax.ShapeDtypeStruct(input.shape, input.dtype))
    return call(grad_output, input, output, **attrs)


def max_pooling_3d_backward_from_input(grad_output, input, *, kernel_size: Sequence[int],  # noqa: A002
                                       stride: Sequence[int], padding: Sequence[int],
                                       data_format: str = "NCDHW", output_format: str | None = None):
    attrs = _attributes(kernel_size, stride, padding, data_format, output_format)
    call = _call(BACKWARD_FROM_INPUT, jax.ShapeDtypeStruct(input.shape, input.dtype))
    return call(grad_output, input, **attrs)
