"""STAND-IN for the Neuron SDK's `nki` (tests only; see ../README.md). No NKI kernel runs here.

`jit` makes a `Kernel`; `Kernel[lnc]` sets the logical NeuronCore degree;
calling it under a JAX trace lowers to `stablehlo.custom_call
@AwsNeuronCustomNativeKernel` with this stand-in's backend_config. Called
eagerly (concrete arrays), the launch runs: the kernel's function gets the
tensors as numpy arrays and the attributes as the backend_config records
them, so what the launch records is what computes the result, and tests can
hold the values that come back against the contract's.
"""

from __future__ import annotations

import base64
import hashlib
import inspect
import json
import os
import tempfile
from pathlib import Path

import jax
import numpy as np
from jax.extend.core import Primitive
from jax.interpreters import mlir
from jaxlib.mlir import ir

from nki import language  # noqa: F401 - `nki.language` as the kernel source imports it

TARGET = "AwsNeuronCustomNativeKernel"
STANDIN = "pool3d_pass tests: Neuron SDK stand-in"
LNC_VARIABLE = "NEURON_LOGICAL_NC_CONFIG"
ARTIFACT_DIRECTORY_VARIABLE = "POOL3D_NKI_STANDIN_ARTIFACTS"  # tests point it at a temporary folder

class Kernel:
    """What `nki.jit` returns: the function, and the LNC degree it is launched with."""

    def __init__(self, function, lnc: int | None = None):
        self.function = function
        self.lnc = lnc
        self.__name__ = function.__name__
        self.__qualname__ = function.__qualname__
        self.__module__ = function.__module__
        self.__doc__ = function.__doc__

    def __getitem__(self, grid):
        if isinstance(grid, tuple):
            raise TypeError("the launch grid takes one number, the LNC degree")
        if grid not in (1, 2):
            raise ValueError(f"LNC degree {grid!r} is not 1 or 2")
        return Kernel(self.function, lnc=int(grid))

    def __call__(self, *args, **kwargs):
        bound = inspect.signature(self.function).bind(*args, **kwargs)  # TypeError on a wrong name
        lnc = self.lnc if self.lnc is not None else int(os.environ.get(LNC_VARIABLE, "1") or 1)
        tensors = [name for name, value in bound.arguments.items() if _is_array(value)]
        result = self.function(
            **{name: _abstract(value) if name in tensors else value for name, value in bound.arguments.items()}
        )
        config = {
            "standin": STANDIN,
            "kernel": f"{self.function.__module__}.{self.function.__qualname__}",
            "lnc": lnc,
            "positional": list(bound.arguments)[: len(args)],
            "keywords": sorted(kwargs),
            "tensors": tensors,
            "shapes": {name: list(bound.arguments[name].shape) for name in tensors},
            "attributes": {name: _jsonable(bound.arguments[name]) for name in bound.arguments if name not in tensors},
        }
        config["artifact"] = _write_artifact(config)
        encoded = base64.b64encode(json.dumps(config, sort_keys=True).encode()).decode()
        operands = [bound.arguments[name] for name in tensors]
        return _call_p.bind(*operands, config=encoded, shape=tuple(result.shape), dtype=np.dtype(result.dtype),
                            function=self.function)


def jit(function=None, **options):
    """Decorate `function` as an NKI kernel; a kernel object again is an error."""
    if function is None:
        return lambda f: jit(f, **options)
    if isinstance(function, Kernel):
        raise TypeError(
            f"{function.__name__} is already an nki.jit kernel: call it directly (kernel[lnc](...)), "
            "do not wrap it in nki.jit again"
        )
    return Kernel(function)


def decode_backend_config(text: str) -> dict:
    """This stand-in's backend_config (not the SDK's format)."""
    return json.loads(base64.b64decode(text))


def _is_array(value) -> bool:
    return isinstance(value, (jax.Array, jax.core.Tracer))


class _AbstractTensor:
    """What the kernel function sees of a tensor while the stand-in 'traces' it."""

    def __init__(self, shape, dtype):
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)


def _abstract(value) -> _AbstractTensor:
    return _AbstractTensor(value.shape, value.dtype)


def _jsonable(value):
    if isinstance(value, tuple | list):
        return [_jsonable(v) for v in value]
    return value if isinstance(value, str | int | float | bool | type(None)) else repr(value)


def _write_artifact(config: dict) -> str:
    """A file standing for the NKI trace's kernel artifact; its absolute path."""
    root = Path(os.environ.get(ARTIFACT_DIRECTORY_VARIABLE) or Path(tempfile.gettempdir()) / "pool3d-nki-standin")
    text = json.dumps(config, sort_keys=True)
    folder = root / hashlib.sha256(text.encode()).hexdigest()[:16]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "kernel.standin.json"
    path.write_text(text)
    return str(path.resolve())


_call_p = Primitive("nki_standin_kernel_call")


@_call_p.def_abstract_eval
def _abstract_eval(*operands, config, shape, dtype, function):
    return jax.core.ShapedArray(shape, dtype)


@_call_p.def_impl
def _run(*operands, config, shape, dtype, function):
    """An eager launch: the function on the operands' values, with the attributes the config records."""
    recorded = decode_backend_config(config)
    arguments = dict(zip(recorded["tensors"], (np.asarray(operand) for operand in operands)))
    arguments.update(recorded["attributes"])
    result = np.asarray(function(**arguments))
    if result.shape != tuple(shape) or result.dtype != np.dtype(dtype):
        raise ValueError(f"the kernel returned {result.dtype}{list(result.shape)}, its trace said {dtype}{list(shape)}")
    return jax.numpy.asarray(result)


def _lowering(ctx, *operands, config, shape, dtype, function):
    (aval,) = ctx.avals_out
    op = ir.Operation.create(
        "stablehlo.custom_call",
        results=[ir.RankedTensorType.get(aval.shape, mlir.dtype_to_ir_type(np.dtype(aval.dtype)))],
        operands=list(operands),
        attributes={
            "call_target_name": ir.StringAttr.get(TARGET),
            "backend_config": ir.StringAttr.get(config),
            "has_side_effect": ir.BoolAttr.get(False),
        },
    )
    return op.results


mlir.register_lowering(_call_p, _lowering)
