"""Which code of a multi-device program runs per shard: the body of a Shardy manual computation.

`jax.shard_map` lowers its body into `sdy.manual_computation`; values there
are each device's own shard (along the manual axes), and a function called
from that body (a `jax.jit` inside shard_map becomes a private `func.func`)
runs per shard too. A contract call there must be spliced as the binding's
single-device function: `custom_partitioning`'s callback cannot read the
shardings XLA hands it inside a manual computation ("Unhandled OpSharding
type"). With a partially
manual body (`axis_names=` a subset of the mesh) the free axes stay
automatic; a plain custom call is then replicated along them by XLA's
partitioner: correct, and what the program asked for inside shard_map.

Under GSPMD (`jax_use_shardy_partitioner=False`) there is no manual
computation: the body is a private function (`@shmap_body`) called with the
results of `stablehlo.custom_call @SPMDFullToShardShape` (the values made
manual); such a function runs per shard too.

A function called from both a manual body and automatic code counts as
per-shard (the single-device function is correct in both places).
"""

from __future__ import annotations

from jaxlib.mlir import ir

MANUAL_COMPUTATION = "sdy.manual_computation"
FULL_TO_SHARD = "SPMDFullToShardShape"  # GSPMD's entry into a manual body
_FUNC = "func.func"


def _symbol(op: ir.Operation, name: str) -> str | None:
    try:
        attribute = op.attributes[name]
    except KeyError:
        return None
    for kind in (ir.FlatSymbolRefAttr, ir.StringAttr):  # casting raises on another kind
        try:
            return kind(attribute).value
        except (TypeError, ValueError):
            continue
    return None


def _takes_manual_values(op: ir.Operation) -> bool:
    """Whether a call's operands include a GSPMD full-to-shard result (a manual body's argument)."""
    for operand in op.operands:
        owner = operand.owner
        if isinstance(owner, ir.Block):  # a block argument
            continue
        producer = owner.operation if hasattr(owner, "operation") else owner
        if producer.name == "stablehlo.custom_call" and _symbol(producer, "call_target_name") == FULL_TO_SHARD:
            return True
    return False


def _enclosing(op: ir.Operation) -> tuple[str | None, bool]:
    """(name of the func.func around `op`, whether a manual computation lies between them)."""
    manual = False
    while True:
        if op.name == MANUAL_COMPUTATION:
            manual = True
        if op.name == _FUNC:
            return _symbol(op, "sym_name"), manual
        parent = op.parent
        if parent is None:
            return None, manual
        op = parent


class PerShardCode:
    """Answers, for one module, whether code at a block runs per shard (computed on first use)."""

    def __init__(self) -> None:
        self._functions: frozenset[str] | None = None

    def _per_shard_functions(self, module: ir.Operation) -> frozenset[str]:
        """Functions called, directly or through others, from inside a manual computation."""
        callees: dict[str | None, set[str]] = {}  # function -> the functions it calls
        seeds: set[str] = set()

        def visit(op: ir.Operation) -> ir.WalkResult:
            callee = _symbol(op, "callee")
            if callee is not None:
                caller, manual = _enclosing(op)
                (seeds if manual or _takes_manual_values(op) else callees.setdefault(caller, set())).add(callee)
            return ir.WalkResult.ADVANCE

        module.walk(visit)
        found, pending = set(), list(seeds)
        while pending:
            name = pending.pop()
            if name not in found:
                found.add(name)
                pending.extend(callees.get(name, ()))
        return frozenset(found)

    def contains(self, block: ir.Block) -> bool:
        op = block.owner.operation
        function, manual = _enclosing(op)
        if manual:
            return True
        if self._functions is None:
            module = op
            while module.parent is not None:
                module = module.parent
            self._functions = self._per_shard_functions(module)
        return function in self._functions
