"""Erasing what a rewrite left without uses: the -inf pad chain, constants, replaced forwards.

The walk driver lets a pattern erase only ops it has visited, and the pass
must never remove an op it did not make dead, so every erasure here checks
that nothing uses the op first.
"""

from __future__ import annotations

from jaxlib.mlir import ir

from pool3d_pass import jax_compat
from pool3d_pass.ir.constraints import is_open_constraint
from pool3d_pass.ir.ops import defining_op, op_name


def padding_chain(op: ir.OpView, match) -> ir.OpView | None:
    """What produces the select_and_scatter's operand and dies with it: the -inf pad,
    or the open sharding constraints around it (erasing those erases the pad too)."""
    producer = defining_op(op.operands[0])
    return producer if match.pad is not None and is_open_constraint(producer) else match.pad


def _has_uses(value: ir.Value) -> bool:
    return any(True for _ in value.uses)


def erase_if_unused(rewriter, op: ir.OpView | None) -> None:
    """Erase `op` if nothing uses it, then the constants and open sharding constraints
    (and, through those, the pads) only it used."""
    if op is None or any(_has_uses(result) for result in op.results):
        return
    operands = list(op.operands)
    through_constraint = is_open_constraint(op)
    jax_compat.erase_op(rewriter, op)
    for operand in operands:
        producer = defining_op(operand)
        if op_name(producer) == "stablehlo.constant" or is_open_constraint(producer) or (
            through_constraint and op_name(producer) == "stablehlo.pad"
        ):
            erase_if_unused(rewriter, producer)


_ERASABLE_PRODUCERS = ("stablehlo.constant", "stablehlo.broadcast_in_dim", "stablehlo.pad")


def erase_unused_chains(roots) -> None:
    """Erase each root without uses, then the side-effect-free producers only erased ops used."""
    worklist, erased = list(roots), set()  # erased: hashes taken before erasing (no op is created meanwhile)
    while worklist:
        op = worklist.pop()
        if hash(op) in erased or any(_has_uses(result) for result in op.results):
            continue
        producers = [defining_op(operand) for operand in op.operands]
        erased.add(hash(op))
        op.erase()
        worklist.extend(p.operation for p in producers if op_name(p) in _ERASABLE_PRODUCERS)
