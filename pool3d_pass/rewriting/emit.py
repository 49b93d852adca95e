"""How the rewrite emits a call of the contract: the neutral custom call, or a platform's binding.

An `Emit` takes `(call, operands, result_types, *, kernel_size, stride,
padding, data_format[, output_format])` and returns the call's results; the
strategies build their replacements from it and never know which one they got.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from jaxlib.mlir import ir

from pool3d_pass.bindings.registry import Binding
from pool3d_pass.contract.custom_call import build_call
from pool3d_pass.rewriting.splice import call_binding

Emit = Callable[..., list[ir.Value]]


def neutral() -> Emit:
    return build_call


def binding(chosen: Binding, mesh=None) -> Emit:
    return functools.partial(call_binding, chosen, mesh=mesh)
