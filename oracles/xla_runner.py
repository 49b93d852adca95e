"""Compile and run a StableHLO text module on XLA:CPU, for tests.

``run_stablehlo(text, args)`` takes MLIR text (as written by
``scripts/lower_fixtures.py`` or printed by the pass) and a list of numpy
inputs, and returns the ``main`` function's results as numpy arrays, one per
result in order (JAX flattens pytree outputs into separate results; a tuple
result would be untupled by PJRT the same way).

How (jax/jaxlib 0.10.2): there is no public "run this StableHLO text" API, so
this uses the same client calls that ``jax.jit`` makes internally:

* ``jax.extend.backend.get_backend("cpu")`` - the PJRT CPU client
  (``jaxlib._jax.Client``); ``jax.extend`` is JAX's semi-public API for this.
* ``jax.extend.backend.get_compile_options(num_replicas=1, num_partitions=1)``
  - JAX's default ``CompileOptions`` (falls back to a plain
  ``xla_client.CompileOptions()``).
* ``Client.compile_and_load(text, DeviceList((device,)), options)`` - accepts
  the MLIR text directly (str or bytes, textual or bytecode).
* ``jax._src.lib.xla_client.DeviceList`` - the only private import.
* ``LoadedExecutable.execute_sharded(list_of_jax_arrays)`` then
  ``.disassemble_into_single_device_arrays()`` - the path jax.jit's dispatch
  uses (``jax/_src/interpreters/pxla.py``).

Inputs go through ``jax.device_put`` (public), so bf16 works via ml_dtypes
(``np.dtype("bfloat16")`` / ``ml_dtypes.bfloat16``); inputs are cast to the
parameter types declared by ``main`` when the dtype differs and the shapes are
checked first, so a mismatch fails with a readable message instead of an XLA
error. 64-bit arguments (f64, i64: TensorFlow's step counters, torch-xla's
f64) are transferred under JAX's x64 mode, which ``jax.device_put`` otherwise
narrows to 32 bits. Compiled executables are cached by module text.

Modules containing custom calls work if the target is registered with XLA's
CPU FFI registry in this process (e.g. via ``jax.ffi.register_ffi_target``).
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Sequence

import jax
import ml_dtypes
import numpy as np
from jax._src.lib import xla_client as xc
from jax.extend import backend as jex_backend

__all__ = ["run_stablehlo", "main_signature", "MLIR_TO_NUMPY"]

MLIR_TO_NUMPY = {
    "f64": np.dtype(np.float64),
    "f32": np.dtype(np.float32),
    "f16": np.dtype(np.float16),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "i64": np.dtype(np.int64),
    "i32": np.dtype(np.int32),
    "i16": np.dtype(np.int16),
    "i8": np.dtype(np.int8),
    "ui64": np.dtype(np.uint64),
    "ui32": np.dtype(np.uint32),
    "ui16": np.dtype(np.uint16),
    "ui8": np.dtype(np.uint8),
    "i1": np.dtype(np.bool_),
}


def _cpu_device():
    client = jex_backend.get_backend("cpu")
    return client, client.local_devices()[0]


def _compile_options():
    try:
        return jex_backend.get_compile_options(num_replicas=1, num_partitions=1)
    except (AttributeError, TypeError):  # pragma: no cover - an older or newer jax without this signature
        return xc.CompileOptions()


# Large enough for every fixture's original and rewritten module (about 90 fixtures),
# so test files that run the same module (manifest checks, numerics) compile it once.
@functools.lru_cache(maxsize=256)
def _compile(text: str):
    client, device = _cpu_device()
    return client.compile_and_load(text, xc.DeviceList((device,)), _compile_options())


_TENSOR_RE = re.compile(r"tensor<([^>]*)>")


def _parse_tensor_type(spec: str) -> tuple[tuple[int, ...], np.dtype]:
    *dims, elem = spec.split("x")
    if elem not in MLIR_TO_NUMPY:
        raise ValueError(f"unsupported element type {elem!r} in tensor<{spec}>")
    return tuple(int(d) for d in dims), MLIR_TO_NUMPY[elem]


def main_signature(text: str) -> list[tuple[tuple[int, ...], np.dtype]]:
    """Shapes and dtypes of ``@main``'s arguments, parsed with the MLIR bindings."""
    from jax._src.interpreters import mlir as jax_mlir
    from jax.extend.mlir import ir

    with jax_mlir.make_ir_context():
        module = ir.Module.parse(text)
        for op in module.body.operations:
            if op.operation.name == "func.func" and \
                    ir.StringAttr(op.attributes["sym_name"]).value == "main":
                ftype = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)
                out = []
                for t in ftype.inputs:
                    m = _TENSOR_RE.fullmatch(str(t))
                    if m is None:
                        raise ValueError(f"main argument of non-tensor type {t}")
                    out.append(_parse_tensor_type(m.group(1)))
                return out
    raise ValueError("module has no func.func @main")


def _x64(enabled: bool):
    """JAX's x64 mode for the transfers: without it ``jax.device_put`` narrows f64/i64 to 32 bits."""
    if not enabled:
        return contextlib.nullcontext()
    enable_x64 = getattr(jax, "enable_x64", None)
    if enable_x64 is None:  # older JAX spells it jax.experimental.enable_x64
        from jax.experimental import enable_x64
    return enable_x64(True)


def run_stablehlo(text: str, args: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Compile ``text`` (StableHLO MLIR) on XLA:CPU, run ``main(*args)``.

    Returns one numpy array per result of ``main`` (bf16 results come back as
    ``ml_dtypes.bfloat16`` arrays).
    """
    sig = main_signature(text)
    if len(sig) != len(args):
        raise ValueError(f"main takes {len(sig)} arguments, got {len(args)}")
    _, device = _cpu_device()
    bufs = []
    with _x64(any(dtype.itemsize == 8 for _, dtype in sig)):
        for i, ((shape, dtype), a) in enumerate(zip(sig, args)):
            a = np.asarray(a)
            if a.shape != shape:
                raise ValueError(f"argument {i}: shape {a.shape} != main's {shape}")
            if a.dtype != dtype:
                a = a.astype(dtype)
            bufs.append(jax.device_put(a, device))
        exe = _compile(text)
        results = exe.execute_sharded(bufs)
        per_output = results.disassemble_into_single_device_arrays()
    # one list per output, each holding one array per device (one device here)
    return [np.asarray(shards[0]) for shards in per_output]
