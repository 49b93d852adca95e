"""Bindings: what turns the neutral custom calls into something one platform runs.

A binding is, per call of the contract it implements, a JAX-traceable function
with that call's signature (docs/contract.md; e.g. `max_pooling_3d_backward(
grad_output, input, output, *, kernel_size, stride, padding, data_format,
output_format) -> grad_input`), plus the preconditions it needs beyond the
contract. The pass lowers the function for one call's shapes and dtypes and
splices the lowered ops in place of the neutral call (`splicing/splice.py`).
The calls a binding implements decide the strategies its platform can get.
Which binding applies follows the platform the program is compiled for; a
platform with no binding gets no rewrite at all, so no call that it cannot run
is ever left behind.
"""

from __future__ import annotations

from pool3d_pass.bindings.base import Binding, CallSignature, Functions, contract_preconditions
from pool3d_pass.bindings.cpu import binding as cpu_binding
from pool3d_pass.bindings.gpu import binding as gpu_binding
from pool3d_pass.bindings.neuron import binding as neuron_binding
from pool3d_pass.bindings.reference import binding as reference_binding
from pool3d_pass.options import set_platforms

__all__ = ["Binding", "CallSignature", "Functions", "binding_for", "contract_preconditions", "platforms",
           "register_binding", "register_kernels"]


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
        try:
            binding.register_kernels()
        except Exception as error:  # noqa: BLE001 - see the docstring
            failed[binding.platform] = f"{type(error).__name__}: {error}"
    return failed


def platforms() -> list[str]:
    return sorted(_BINDINGS)


# One line per platform: each package's binding.py states its calls, preconditions and speed rule.
register_binding(cpu_binding.make_binding())
register_binding(neuron_binding.make_binding())
register_binding(reference_binding.make_binding())
register_binding(gpu_binding.make_binding())
set_platforms(platforms)  # the words PassOptions' target accepts
