"""CPU binding: the C++ XLA typed-FFI handlers of the pool3d custom calls.

`register()` registers every handler (compiled into the `_kernel` extension
when the package is installed) with XLA for platform "cpu", each under its
target name in `pool3d_pass.contract.TARGETS`. The functions below call them
from JAX through `jax.ffi.ffi_call` and are traceable under `jax.jit`:

- `max_pooling_3d_backward(grad_output, input, output)`: the recompute
  backward (`TARGET_NAME`);
- `max_pooling_3d_forward(input)` -> `(output, indices)`, indices int16;
- `max_pooling_3d_forward_output(input)` -> `output`: the forward of an
  inference program, y only;
- `max_pooling_3d_backward_from_indices(grad_output, indices, input_shape=)`;
- `max_pooling_3d_backward_from_input(grad_output, input)`: the bare
  gradient, fused.

The exact semantics are in docs/contract.md.

The environment variable POOL3D_CPU_THREADS, read at every call, overrides the
kernel's thread count (default: hardware threads, at most 8, and one thread
for problems under 256K elements).

The handlers are registered when pool3d_pass is imported (`registration.py`:
without importing JAX); `register()` does it again where needed (idempotent).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pool3d_pass.contract import (
    ATTRIBUTE_NAMES,
    BACKWARD_FROM_INDICES,
    BACKWARD_FROM_INPUT,
    FORWARD,
    FORWARD_OUTPUT,
    INDEX_TYPE,
    LAYOUTS,
    TARGET_NAME,
    TARGETS,
    pooled_extent,
)
from pool3d_pass.bindings.cpu.registration import is_registered, register

# The element type of the forward's indices (contract.INDEX_TYPE, "i16").
INDEX_DTYPE = np.dtype({"i16": np.int16}[INDEX_TYPE])

__all__ = [
    "TARGET_NAME",
    "TARGETS",
    "ATTRIBUTE_NAMES",
    "INDEX_DTYPE",
    "register",
    "is_registered",
    "max_pooling_3d_backward",
    "max_pooling_3d_forward",
    "max_pooling_3d_forward_output",
    "max_pooling_3d_backward_from_indices",
    "max_pooling_3d_backward_from_input",
]

def _i64_triple(name: str, values: Sequence[int]) -> np.ndarray:
    try:
        arr = np.asarray(values, dtype=np.int64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a sequence of integers, got {values!r}") from exc
    return arr.reshape(-1)


def _attributes(kernel_size, stride, padding, data_format, output_format):
    if output_format is None:
        output_format = data_format
    if not isinstance(data_format, str) or not isinstance(output_format, str):
        raise TypeError(f"data_format and output_format must be strings out of {LAYOUTS}")
    return dict(
        kernel_size=_i64_triple("kernel_size", kernel_size),
        stride=_i64_triple("stride", stride),
        padding=_i64_triple("padding", padding),
        data_format=data_format,
        output_format=output_format,
    )


def _output_shape(input_shape, attrs):
    """The forward-output shape (in output_format) of a data_format input shape."""
    if len(input_shape) != 5:
        raise ValueError(f"the input must have rank 5, got shape {tuple(input_shape)}")
    cl_in = attrs["data_format"] == "NDHWC"
    b, c = input_shape[0], input_shape[4 if cl_in else 1]
    spatial = input_shape[1:4] if cl_in else input_shape[2:5]
    k, s, p = attrs["kernel_size"], attrs["stride"], attrs["padding"]
    if len(k) != 3 or len(s) != 3 or len(p) != 3:
        raise ValueError("kernel_size, stride and padding must have 3 elements (D, H, W)")
    # Invalid attributes are the kernel's to reject (with a named error); keep
    # this shape computable for them.
    out = tuple(
        max(1, pooled_extent(int(n), int(kk), max(1, int(ss)), int(q), int(q))) for n, kk, ss, q in zip(spatial, k, s, p)
    )
    return (b,) + out + (c,) if attrs["output_format"] == "NDHWC" else (b, c) + out


def max_pooling_3d_forward(
    input,  # noqa: A002 - the contract's operand name
    *,
    kernel_size: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    data_format: str = "NCDHW",
    output_format: str | None = None,
):
    """3-D max pool with indices, by the CPU FFI kernel.

    Args:
      input: layout `data_format` ("NCDHW" or "NDHWC"), f32/bf16/f16.
      kernel_size, stride, padding: three integers each (D, H, W); padding is
        symmetric implicit -inf padding, each entry below its kernel_size.
      output_format: layout of both results; defaults to `data_format`.

    Returns:
      `(output, indices)`: the window maxima (XLA's reduce_window max; a
      window holding a NaN gives its first NaN) and, as int16, the selected
      tap of each window in row-major (td, th, tw) order, -1 where the
      maximum is NaN.
    """
    import jax

    register()
    attrs = _attributes(kernel_size, stride, padding, data_format, output_format)
    shape = _output_shape(input.shape, attrs)
    call = jax.ffi.ffi_call(
        TARGETS[FORWARD],
        (jax.ShapeDtypeStruct(shape, input.dtype), jax.ShapeDtypeStruct(shape, INDEX_DTYPE)),
    )
    return tuple(call(input, **attrs))


def max_pooling_3d_forward_output(
    input,  # noqa: A002 - the contract's operand name
    *,
    kernel_size: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    data_format: str = "NCDHW",
    output_format: str | None = None,
):
    """3-D max pool, the output alone (an inference forward), by the CPU FFI kernel.

    Same arguments as `max_pooling_3d_forward`. Returns `output`: the window
    maxima, bit for bit the forward's `output` (IEEE maximum: +0 over -0,
    infinities; a window holding a NaN gives its first NaN), which is XLA's
    `reduce_window` max wherever XLA:CPU follows IEEE (docs/contract.md,
    "The inference forward").
    """
    import jax

    register()
    attrs = _attributes(kernel_size, stride, padding, data_format, output_format)
    shape = _output_shape(input.shape, attrs)
    call = jax.ffi.ffi_call(TARGETS[FORWARD_OUTPUT], jax.ShapeDtypeStruct(shape, input.dtype))
    return call(input, **attrs)


def max_pooling_3d_backward_from_indices(
    grad_output,
    indices,
    *,
    input_shape: Sequence[int],
    kernel_size: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    data_format: str = "NCDHW",
    output_format: str | None = None,
):
    """Gradient of a 3-D max pool w.r.t. its input, from the forward's indices.

    Args:
      grad_output: cotangent of the pool output, layout `output_format`.
      indices: int16, the forward's indices (same shape as `grad_output`).
        A value outside [0, prod(kernel_size)) or naming a tap in the padding
        selects nothing.
      input_shape: the 5 forward-input dims, in `data_format` layout.

    Returns:
      grad_input: shape `input_shape`, dtype of `grad_output`.
    """
    import jax

    register()
    attrs = _attributes(kernel_size, stride, padding, data_format, output_format)
    input_shape = tuple(int(n) for n in input_shape)
    call = jax.ffi.ffi_call(TARGETS[BACKWARD_FROM_INDICES], jax.ShapeDtypeStruct(input_shape, grad_output.dtype))
    return call(grad_output, indices, **attrs)


def max_pooling_3d_backward_from_input(
    grad_output,
    input,  # noqa: A002 - the contract's operand name
    *,
    kernel_size: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    data_format: str = "NCDHW",
    output_format: str | None = None,
):
    """Gradient of a 3-D max pool w.r.t. its input, from the input alone (fused).

    Equal to `max_pooling_3d_backward_from_indices(grad_output,
    max_pooling_3d_forward(input)[1], ...)` without materialising the indices.

    Returns:
      grad_input: shape and dtype of `input`.
    """
    import jax

    register()
    attrs = _attributes(kernel_size, stride, padding, data_format, output_format)
    call = jax.ffi.ffi_call(TARGETS[BACKWARD_FROM_INPUT], jax.ShapeDtypeStruct(input.shape, input.dtype))
    return call(grad_output, input, **attrs)


def max_pooling_3d_backward(
    grad_output,
    input,  # noqa: A002 - the contract's operand name
    output,
    *,
    kernel_size: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    data_format: str = "NCDHW",
    output_format: str | None = None,
):
    """Gradient of a 3-D max pool w.r.t. its input, by the CPU FFI kernel.

    Args:
      grad_output: cotangent of the pool output, layout `output_format`.
      input: the forward input, layout `data_format`.
      output: the exact forward maxima, same shape as `grad_output`.
      kernel_size, stride, padding: three integers each (D, H, W); padding is
        symmetric implicit -inf padding.
      data_format: "NCDHW" or "NDHWC", layout of `input` and of the result.
      output_format: layout of `grad_output` and `output`; defaults to
        `data_format`.

    Returns:
      The gradient w.r.t. `input`: shape and dtype of `input`. Invalid
      operands or attributes make the call fail with an error naming them.
    """
    import jax

    register()
    attrs = _attributes(kernel_size, stride, padding, data_format, output_format)
    call = jax.ffi.ffi_call(TARGET_NAME, jax.ShapeDtypeStruct(input.shape, input.dtype))
    return call(grad_output, input, output, **attrs)
