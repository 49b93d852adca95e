"""The registry entry of the reference binding: every call of the contract, in pure JAX, on any backend.

It tests the binding mechanism and states the contract's semantics
executably; it is lowered for "cpu" (the platform name tests compile for).
No JAX is imported here.
"""

from __future__ import annotations

from pool3d_pass.bindings.base import Binding, Functions, contract_preconditions
from pool3d_pass.contract import CALLS


def functions():
    """{call: function}: every call of the contract in pure JAX (`calls.py`; imports JAX)."""
    from pool3d_pass.bindings.reference import calls

    return calls.FUNCTIONS


def make_binding() -> Binding:
    return Binding("reference", Functions(functions, CALLS), "cpu", contract_preconditions)
