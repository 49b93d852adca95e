"""The registry entry of the CPU binding: every call of the contract, single- and multi-device.

The calls are the C++ XLA FFI kernels (this package); programs compiled for
several devices get the partitionable versions (`partitioned.py`). The
binding takes every configuration the contract allows; where XLA's own op
runs as fast is strategy `auto`'s decision, whose prior is `speed.py`'s
table (pool3d_pass/calibration/). No JAX is imported here.
"""

from __future__ import annotations

from pool3d_pass.bindings.base import Binding, Calibration, CallSignature, Functions, SpeedPrior, contract_preconditions
from pool3d_pass.bindings.cpu import registration
from pool3d_pass.contract import CALLS
from pool3d_pass.options import BindingSettings


def functions():
    """{call: function}: the FFI kernels' calls (this package's `__init__`)."""
    from pool3d_pass.bindings import cpu

    return cpu.FUNCTIONS


def partitioned_functions():
    """{call: function}: the same, partitionable (`partitioned.py`; imports JAX)."""
    from pool3d_pass.bindings.cpu import partitioned

    return partitioned.FUNCTIONS


def unsupported(signature: CallSignature) -> str | None:
    """The contract's limits (the kernels take every configuration they allow)."""
    return contract_preconditions(signature)


def prior(signature: CallSignature, input_shape: tuple[int, ...], settings: BindingSettings) -> SpeedPrior:
    from pool3d_pass.bindings.cpu import speed

    return speed.prior(signature, input_shape, settings)


def make_binding() -> Binding:
    return Binding(
        "cpu",
        Functions(functions, CALLS),
        "cpu",
        unsupported,
        partitioned_functions=Functions(partitioned_functions, CALLS),
        register_kernels=registration.register,
        calibration=Calibration(prior=prior),
    )
