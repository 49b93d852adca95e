"""Bindings: what turns the neutral custom call into something one platform runs.

A binding is a JAX-traceable function with the kernel's signature,
`fn(grad_output, input, output, *, kernel_size, stride, padding, data_format,
output_format) -> grad_input`, plus the preconditions it needs beyond the
contract. The pass lowers the function for one call's shapes and dtypes and
splices the lowered ops in place of the neutral call (`rewriting/splice.py`).
Which binding applies follows the platform the program is compiled for; a
platform with no binding gets no rewrite at all, so no call that it cannot run
is ever left behind.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from dataclasses import dataclass

from pool3d_pass.contract import LAYOUTS, MAX_WINDOW_ELEMENTS

NEUTRAL = "neutral"


@dataclass(frozen=True)
class CallSignature:
    """What a binding may inspect about one call before agreeing to run it."""

    grad_output_type: str  # element type names, e.g. "f32"
    input_type: str
    output_type: str
    kernel_size: tuple[int, int, int]
    stride: tuple[int, int, int]
    padding: tuple[int, int, int]
    data_format: str
    output_format: str


@dataclass(frozen=True)
class Binding:
    platform: str
    function_path: str  # "module:function", imported when first used
    lowering_platform: str  # the JAX platform the function is lowered for
    unsupported: Callable[[CallSignature], str | None]  # None: supported; else the reason
    require: Callable[[], None] = lambda: None  # raises ImportError naming what is missing
    # For programs compiled for several devices: a version XLA's SPMD partitioner
    # can split (see bindings/cpu_partitioned.py); None if the binding has none.
    partitioned_function_path: str | None = None

    def function(self, *, partitioned: bool = False) -> Callable:
        path = self.partitioned_function_path if partitioned else self.function_path
        module_name, name = path.split(":")
        return getattr(importlib.import_module(module_name), name)


def contract_preconditions(signature: CallSignature) -> str | None:
    """The kernel's own limits, which every binding inherits."""
    if len({signature.grad_output_type, signature.input_type, signature.output_type}) != 1:
        return "grad_output, input and output differ in element type"
    if math.prod(signature.kernel_size) > MAX_WINDOW_ELEMENTS:
        return f"prod(kernel_size) = {math.prod(signature.kernel_size)} > {MAX_WINDOW_ELEMENTS}"
    if signature.data_format not in LAYOUTS or signature.output_format not in LAYOUTS:
        return f"layouts {signature.data_format}/{signature.output_format} are not {' or '.join(LAYOUTS)}"
    return None


_BINDINGS: dict[str, Binding] = {}


def register_binding(binding: Binding) -> None:
    _BINDINGS[binding.platform] = binding


def binding_for(platform: str) -> Binding | None:
    """The binding for `platform` ("cpu", "neuron", ...), or None if there is none."""
    return _BINDINGS.get(platform)


def platforms() -> list[str]:
    return sorted(_BINDINGS)


register_binding(
    Binding(
        "cpu",
        "pool3d_pass.bindings.cpu:max_pooling_3d_backward",
        "cpu",
        contract_preconditions,
        partitioned_function_path="pool3d_pass.bindings.cpu_partitioned:max_pooling_3d_backward",
    )
)
register_binding(
    Binding(
        "neuron",
        "pool3d_pass.bindings.neuron:max_pooling_3d_backward",
        "neuron",
        lambda signature: contract_preconditions(signature)
        or importlib.import_module("pool3d_pass.bindings.neuron").unsupported(signature),
        lambda: importlib.import_module("pool3d_pass.bindings.neuron").require_neuron_packages(),
    )
)
# A pure-JAX implementation of the contract: runs anywhere JAX does, used to
# test the binding mechanism and as an executable statement of the semantics.
register_binding(Binding("reference", "pool3d_pass.bindings.reference:max_pooling_3d_backward", "cpu", contract_preconditions))
