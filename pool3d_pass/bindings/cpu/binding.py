"""The registry entry of the CPU binding: every call of the contract, single- and multi-device.

The calls are the C++ XLA FFI kernels (this package); programs compiled for
several devices get the partitionable versions (`partitioned.py`). Beyond
the contract's limits, `speed.py` leaves to XLA what XLA's own op runs as
fast. No JAX is imported here.
"""

from __future__ import annotations

from pool3d_pass.bindings.base import Binding, CallSignature, contract_preconditions
from pool3d_pass.contract import CALLS

PACKAGE = "pool3d_pass.bindings.cpu"


def unsupported(signature: CallSignature) -> str | None:
    """The contract's limits, then where XLA's own op is as fast (speed.py)."""
    from pool3d_pass.bindings.cpu import speed

    return contract_preconditions(signature) or speed.refusal(signature)


def make_binding() -> Binding:
    return Binding(
        "cpu",
        {call: f"{PACKAGE}:max_pooling_3d_{call}" for call in CALLS},
        "cpu",
        unsupported,
        partitioned_functions={call: f"{PACKAGE}.partitioned:max_pooling_3d_{call}" for call in CALLS},
        register_kernels=f"{PACKAGE}.registration:register",
    )
