"""An op's name, a value's producer, static tensor shapes and single-block regions."""

from __future__ import annotations

from jaxlib.mlir import ir


def is_static_ranked(tensor: ir.Type) -> bool:
    """Whether `tensor` (a value's type: the bindings return the concrete class) is a statically shaped ranked tensor."""
    return isinstance(tensor, ir.RankedTensorType) and tensor.has_static_shape


def static_ranked_shape(value: ir.Value) -> tuple[int, ...] | None:
    """The shape of a statically shaped ranked tensor value, else None."""
    tensor = value.type
    return tuple(tensor.shape) if is_static_ranked(tensor) else None


def defining_op(value: ir.Value) -> ir.OpView | None:
    owner = value.owner
    return None if isinstance(owner, ir.Block) else owner


def op_name(op: ir.OpView | ir.Operation | None) -> str | None:
    return None if op is None else op.operation.name


def single_block_ops(region: ir.Region) -> tuple[list[ir.OpView], ir.Block] | None:
    blocks = region.blocks
    if len(blocks) != 1:
        return None
    block = blocks[0]
    return list(block.operations), block
