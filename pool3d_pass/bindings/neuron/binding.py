"""The registry entry of the neuron binding: the NKI kernel's one call, `backward` (recompute strategy).

No JAX and no Neuron SDK is imported here: `require` says what is missing
when the binding is first used. The kernel has never run in this project's
CI: the numerics battery checks it on the NeuronCores before first use
(pool3d_pass/calibration/); they belong to one process, so that happens
before the program takes them (`enable()`, or `python -m pool3d_pass
calibrate`), and the kernel is called wherever it runs (no speed figures:
no prior to weigh).
"""

from __future__ import annotations

from pool3d_pass.bindings.base import Binding, Calibration, CallSignature, Functions, contract_preconditions
from pool3d_pass.contract import BACKWARD


def functions():
    """{call: function}: the NKI kernel's one call (`calls.py`; the SDK is imported when it is traced)."""
    from pool3d_pass.bindings.neuron import calls

    return calls.FUNCTIONS


def unsupported(signature: CallSignature) -> str | None:
    from pool3d_pass.bindings.neuron import calls

    return contract_preconditions(signature) or calls.unsupported(signature)


def require() -> None:
    from pool3d_pass.bindings.neuron import calls

    calls.require_neuron_packages()


def make_binding() -> Binding:
    # The NKI kernel recomputes the selection from input and output: Neuron gets the recompute strategy.
    return Binding("neuron", Functions(functions, (BACKWARD,)), "neuron", unsupported, require,
                   calibration=Calibration(verify_first=True, exclusive_device=True, eager=True))
