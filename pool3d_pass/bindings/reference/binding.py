"""The registry entry of the reference binding: every call of the contract, in pure JAX, on any backend.

It tests the binding mechanism and states the contract's semantics
executably; it is lowered for "cpu" (the platform name tests compile for).
No JAX is imported here.
"""

from __future__ import annotations

from pool3d_pass.bindings.base import Binding, contract_preconditions
from pool3d_pass.contract import CALLS

MODULE = "pool3d_pass.bindings.reference.calls"


def make_binding() -> Binding:
    return Binding("reference", {call: f"{MODULE}:max_pooling_3d_{call}" for call in CALLS}, "cpu",
                   contract_preconditions)
