"""Seeing through open `sdy.sharding_constraint` ops: a value's origin, its sole user, a binary body.

Inside a partially manual jax.shard_map (axis_names= a subset of the mesh), JAX
wraps nearly every value, scalars in reductions' bodies too, in an
`sdy.sharding_constraint` whose dimensions are all open and unsharded ("{?}",
or `[]` for a scalar): it constrains nothing. Matchers look through those.
"""

from __future__ import annotations

import re

from jaxlib.mlir import ir

from pool3d_pass.ir.attributes import cached_value
from pool3d_pass.ir.ops import defining_op, op_name

SHARDING_CONSTRAINT = "sdy.sharding_constraint"
_OPEN_SHARDING = re.compile(r"<@[\w$.-]+, \[(\{\?\}(, \{\?\})*)?\]>$")


def is_open_constraint(op: ir.OpView | ir.Operation | None) -> bool:
    """True for an `sdy.sharding_constraint` that leaves every dimension open and unsharded."""
    if op_name(op) != SHARDING_CONSTRAINT or len(op.operands) != 1:
        return False
    return cached_value(op.attributes["sharding"], _is_open_sharding)


def _is_open_sharding(attr: ir.Attribute) -> bool:
    return _OPEN_SHARDING.search(str(attr)) is not None


def through_open_constraints(value: ir.Value) -> ir.Value:
    """`value`'s origin: the operand of the chain of open sharding constraints producing it."""
    producer = defining_op(value)
    while is_open_constraint(producer):
        value = producer.operands[0]
        producer = defining_op(value)
    return value


def sole_user_through_open_constraints(value: ir.Value) -> ir.OpView | None:
    """The one op using `value`, seen through open sharding constraints (each with one use)."""
    while True:
        uses = list(value.uses)
        if len(uses) != 1:
            return None
        user = uses[0].owner
        if not is_open_constraint(user):
            return user
        value = user.results[0]


def is_binary_body(region: ir.Region, op_names: tuple[str, ...], *, commutative: bool) -> bool:
    """True if `region` is `^bb(a, b): r = <op>(a, b); return r` (either order if commutative).

    Open sharding constraints of `r` before the return are allowed (see `is_open_constraint`)."""
    # Indexing, not list(): this runs on every pool candidate's regions.
    blocks = region.blocks
    if len(blocks) != 1:
        return False
    block = blocks[0]
    args, ops = block.arguments, block.operations
    count = len(ops)
    if len(args) != 2 or count < 2:
        return False
    compute, terminator = ops[0], ops[count - 1]
    if compute.operation.name not in op_names or terminator.operation.name != "stablehlo.return":
        return False
    returned = terminator.operands
    if len(returned) != 1 or through_open_constraints(returned[0]) != compute.results[0]:
        return False
    if count > 2 and any(not is_open_constraint(ops[i]) for i in range(1, count - 1)):
        return False
    operands = compute.operands
    if len(operands) != 2:
        return False
    a, b = operands[0], operands[1]
    first, second = args[0], args[1]
    if a == first and b == second:
        return True
    return commutative and a == second and b == first
