"""Bindings: what turns the neutral custom calls into something one platform runs.

A binding is, per call of the contract it implements, a JAX-traceable function
with that call's signature (docs/contract.md; e.g. `max_pooling_3d_backward(
grad_output, input, output, *, kernel_size, stride, padding, data_format,
output_format) -> grad_input`), plus the preconditions it needs beyond the
contract. The pass lowers the function for one call's shapes and dtypes and
splices the lowered ops in place of the neutral call (`rewriting/splice.py`).
The calls a binding implements decide the strategies its platform can get.
Which binding applies follows the platform the program is compiled for; a
platform with no binding gets no rewrite at all, so no call that it cannot run
is ever left behind.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from pool3d_pass.contract import (
    BACKWARD,
    BACKWARD_FROM_INDICES,
    CALLS,
    FORWARD,
    LAYOUTS,
    MAX_WINDOW_ELEMENTS,
)
from pool3d_pass.options import INDICES, RECOMPUTE


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
    call: str = BACKWARD  # which of the contract's calls (a key of contract.CALLS)


@dataclass(frozen=True, eq=False)  # hashed by identity: a cache key of the splicer
class Binding:
    platform: str
    functions: Mapping[str, str]  # call kind -> "module:function", imported when first used
    lowering_platform: str  # the JAX platform the functions are lowered for
    unsupported: Callable[[CallSignature], str | None]  # None: supported; else the reason
    require: Callable[[], None] = lambda: None  # raises ImportError naming what is missing
    # For programs compiled for several devices: versions XLA's SPMD partitioner
    # can split (see bindings/cpu_partitioned.py), by call kind.
    partitioned_functions: Mapping[str, str] = field(default_factory=dict)
    # "module:function" registering the kernels with XLA, run by `import pool3d_pass`
    # (so deserialized and persistently cached executables find them); must not import jax.
    register_kernels: str | None = None
    # An opt-in binding (not yet measured faster than the platform's compiler): under
    # strategy "auto" nothing is rewritten for it, each candidate gets this as its remark.
    auto_refusal: str | None = None
    # Optional: one short phrase naming the kernels that serve now (the gpu binding:
    # "CUDA kernels" or "Pallas kernels (why)"), appended to each rewrite's remark.
    describe: Callable[[], str] | None = None

    def implements(self, call: str, *, partitioned: bool = False) -> bool:
        return call in (self.partitioned_functions if partitioned else self.functions)

    def function(self, call: str = BACKWARD, *, partitioned: bool = False) -> Callable:
        path = (self.partitioned_functions if partitioned else self.functions)[call]
        module_name, name = path.split(":")
        return getattr(importlib.import_module(module_name), name)

    def preferred_strategy(self, *, partitioned: bool = False) -> str:
        """`indices` where the binding runs the layer pair (forward, from indices), else `recompute`."""
        pair = (FORWARD, BACKWARD_FROM_INDICES)
        return INDICES if all(self.implements(c, partitioned=partitioned) for c in pair) else RECOMPUTE


def contract_preconditions(signature: CallSignature) -> str | None:
    """The kernel's own limits, which every binding inherits."""
    if signature.call not in CALLS:
        return f"unknown call {signature.call!r}"
    if len({signature.grad_output_type, signature.input_type, signature.output_type}) != 1:
        return "grad_output, input and output differ in element type"
    if math.prod(signature.kernel_size) > MAX_WINDOW_ELEMENTS:
        return f"prod(kernel_size) = {math.prod(signature.kernel_size)} > {MAX_WINDOW_ELEMENTS}"
    if any(p >= k for p, k in zip(signature.padding, signature.kernel_size)):
        return f"padding {list(signature.padding)} is not smaller than kernel_size {list(signature.kernel_size)}"
    if signature.data_format not in LAYOUTS or signature.output_format not in LAYOUTS:
        return f"layouts {signature.data_format}/{signature.output_format} are not {' or '.join(LAYOUTS)}"
    return None


_BINDINGS: dict[str, Binding] = {}


def register_binding(binding: Binding) -> None:
    _BINDINGS[binding.platform] = binding


def binding_for(platform: str) -> Binding | None:
    """The binding for `platform` ("cpu", "neuron", ...), or None if there is none."""
    return _BINDINGS.get(platform)


def register_kernels() -> dict[str, str]:
    """Run every binding's `register_kernels`; {platform: error} for those that failed.

    Never raises: a failure here (say, an unbuilt extension) is reported again,
    with its reason, when the binding is used.
    """
    failed = {}
    for binding in _BINDINGS.values():
        if binding.register_kernels is None:
            continue
        module_name, name = binding.register_kernels.split(":")
        try:
            getattr(importlib.import_module(module_name), name)()
        except Exception as error:  # noqa: BLE001 - see the docstring
            failed[binding.platform] = f"{type(error).__name__}: {error}"
    return failed


def platforms() -> list[str]:
    return sorted(_BINDINGS)


def _all_calls(module: str) -> dict[str, str]:
    return {call: f"{module}:max_pooling_3d_{call}" for call in CALLS}


register_binding(
    Binding(
        "cpu",
        _all_calls("pool3d_pass.bindings.cpu"),
        "cpu",
        # the contract's limits, and where XLA's own op is as fast (bindings/cpu/speed.py)
        lambda signature: contract_preconditions(signature)
        or importlib.import_module("pool3d_pass.bindings.cpu.speed").refusal(signature),
        partitioned_functions=_all_calls("pool3d_pass.bindings.cpu_partitioned"),
        register_kernels="pool3d_pass.bindings.cpu.registration:register",
    )
)
# The NKI kernel recomputes the selection: Neuron gets the recompute strategy.
register_binding(
    Binding(
        "neuron",
        {BACKWARD: "pool3d_pass.bindings.neuron:max_pooling_3d_backward"},
        "neuron",
        lambda signature: contract_preconditions(signature)
        or importlib.import_module("pool3d_pass.bindings.neuron").unsupported(signature),
        lambda: importlib.import_module("pool3d_pass.bindings.neuron").require_neuron_packages(),
    )
)
# A pure-JAX implementation of the contract: runs anywhere JAX does, used to
# test the binding mechanism and as an executable statement of the semantics.
register_binding(Binding("reference", _all_calls("pool3d_pass.bindings.reference"), "cpu", contract_preconditions))
# NVIDIA GPUs (JAX's CUDA client reports platform "gpu"): Pallas kernels on the
# Triton backend, lowered for cuda; opt-in under strategy auto (docs/gpu.md).
register_binding(importlib.import_module("pool3d_pass.bindings.gpu.binding").make_binding())
