"""CPU binding: the C++ XLA typed-FFI handler of pool3d.max_pooling_3d_backward.

`register()` registers the handler (compiled into the `_kernel` extension when
the package is installed) with XLA for platform "cpu" under
`pool3d_pass.contract.TARGET_NAME`. `max_pooling_3d_backward(...)` calls it
from JAX through `jax.ffi.ffi_call`; it is traceable under `jax.jit`. The exact
semantics are in docs/contract.md.

The environment variable POOL3D_CPU_THREADS, read at every call, overrides the
kernel's thread count (default: hardware threads, at most 8, and one thread
for problems under 64K elements).

The environment variable POOL3D_KERNEL_LIBRARY, read by the first
`register()`, loads the extension from that file instead of the installed
`_kernel` module (e.g. a sanitizer build, `make sanitize`).
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Sequence

import jax
import numpy as np

from pool3d_pass.contract import ATTRIBUTE_NAMES, LAYOUTS, TARGET_NAME, TARGETS

__all__ = ["TARGET_NAME", "ATTRIBUTE_NAMES", "register", "is_registered", "max_pooling_3d_backward"]

_lock = threading.Lock()
_registered = False


def _load_kernel_module():
    path = os.environ.get("POOL3D_KERNEL_LIBRARY")
    if path:
        spec = importlib.util.spec_from_file_location("pool3d_pass.bindings.cpu._kernel", path)
        if spec is None or spec.loader is None:
            raise ImportError(f"POOL3D_KERNEL_LIBRARY={path!r} is not a loadable extension")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    try:
        from pool3d_pass.bindings.cpu import _kernel  # noqa: PLC0415
    except ImportError as exc:  # pragma: no cover - broken install
        raise ImportError(
            "the pool3d CPU kernel extension (pool3d_pass.bindings.cpu._kernel) "
            "is not built; reinstall the package, e.g. "
            "`pip install --no-build-isolation -e .`"
        ) from exc
    return _kernel


def register() -> None:
    """Register every CPU FFI handler under its target name (contract.TARGETS).

    Idempotent and thread-safe. The extension is the installed `_kernel`
    module, or the file named by the environment variable
    POOL3D_KERNEL_LIBRARY when set (read here, once per process).
    """
    global _registered
    if _registered:
        return
    with _lock:
        if _registered:
            return
        module = _load_kernel_module()
        if hasattr(module, "handlers"):
            handlers = module.handlers()
        else:  # an extension built before the layer kernels existed
            handlers = {"backward": module.handler()}
        for kind, capsule in handlers.items():
            jax.ffi.register_ffi_target(TARGETS[kind], capsule, platform="cpu")
        _registered = True


def is_registered() -> bool:
    """Whether register() has run in this process."""
    return _registered


def _i64_triple(name: str, values: Sequence[int]) -> np.ndarray:
    try:
        arr = np.asarray(values, dtype=np.int64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a sequence of integers, got {values!r}") from exc
    return arr.reshape(-1)


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
    register()
    if output_format is None:
        output_format = data_format
    if not isinstance(data_format, str) or not isinstance(output_format, str):
        raise TypeError(f"data_format and output_format must be strings out of {LAYOUTS}")
    call = jax.ffi.ffi_call(TARGET_NAME, jax.ShapeDtypeStruct(input.shape, input.dtype))
    return call(
        grad_output,
        input,
        output,
        kernel_size=_i64_triple("kernel_size", kernel_size),
        stride=_i64_triple("stride", stride),
        padding=_i64_triple("padding", padding),
        data_format=data_format,
        output_format=output_format,
    )
