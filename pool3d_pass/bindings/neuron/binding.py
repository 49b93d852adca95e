"""The registry entry of the neuron binding: the NKI kernel's one call, `backward` (recompute strategy).

No JAX and no Neuron SDK is imported here: `require` says what is missing
when the binding is first used.
"""

from __future__ import annotations

from pool3d_pass.bindings.base import Binding, CallSignature, contract_preconditions
from pool3d_pass.contract import BACKWARD


def unsupported(signature: CallSignature) -> str | None:
    from pool3d_pass.bindings.neuron import calls

    return contract_preconditions(signature) or calls.unsupported(signature)


def require() -> None:
    from pool3d_pass.bindings.neuron import calls

    calls.require_neuron_packages()


def make_binding() -> Binding:
    # The NKI kernel recomputes the selection from input and output: Neuron gets the recompute strategy.
    return Binding("neuron", {BACKWARD: "pool3d_pass.bindings.neuron.calls:max_pooling_3d_backward"}, "neuron",
                   unsupported, require)
