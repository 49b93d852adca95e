"""Decide whether one `stablehlo.select_and_scatter` is a max-pool gradient the kernel computes exactly.

A match needs all of: select region `compare GE` (FLOAT) of its two arguments
in order (first maximum wins), scatter region one `add`, init the constant +0,
element type f32/bf16/f16, static shapes, and a window the kernel can express
(see `window`). Two padding forms are understood:

* JAX on CPU/GPU: operand `stablehlo.pad(x, -inf)` with zero interior, op
  padding zero, result cut back by a `stablehlo.slice` that exactly undoes the
  pad. The pad becomes the effective padding; pad and slice fold away.
* TPU, torch-xla, TensorFlow: padding on the op's attribute, raw operand.

Open sharding constraints (a partially manual `jax.shard_map` wraps every
value in one) are looked through: `ir.constraints.is_open_constraint`.

Anything else is a `NoMatch` whose reason is shown to the user as a remark.
"""

from __future__ import annotations

from dataclasses import dataclass

from jaxlib.mlir import ir

from pool3d_pass.contract import SUPPORTED_DTYPES
from pool3d_pass.ir.attributes import comparison, i64_array, is_positive_zero, padding_pairs
from pool3d_pass.ir.constraints import is_binary_body, sole_user_through_open_constraints, through_open_constraints
from pool3d_pass.ir.ops import defining_op, is_static_ranked, op_name, single_block_ops, static_ranked_shape
from pool3d_pass.matching.pool import MatchedPool, NoMatch, negative_infinity_pad
from pool3d_pass.matching.window import GeometryMismatch, Window, fold_to_kernel

__all__ = ["NoMatch", "PoolGradient", "match_pool_gradient"]


@dataclass
class PoolGradient(MatchedPool):
    """A matched max-pool gradient: the pool (`op` is the select_and_scatter) and what the rewrite needs beside."""

    grad_output: ir.Value  # the op's `source`
    zero: ir.Value  # the op's init value, a +0 constant
    slice: ir.OpView | None  # the slice that undoes JAX's explicit -inf pad


def _check_regions(op: ir.OpView) -> None:
    select_body = single_block_ops(op.regions[0])
    if select_body is None:
        raise NoMatch("select region has more than one block")
    ops, block = select_body
    compare = ops[0] if ops else None
    if len(ops) != 2 or op_name(compare) != "stablehlo.compare":
        raise NoMatch("select region is not a single stablehlo.compare")
    if list(compare.operands) != list(block.arguments) or ops[1].operands[0] != compare.results[0]:
        raise NoMatch("select region does not compare its two arguments in order")
    direction, compare_type = comparison(compare)
    if direction != "GE":
        meaning = {
            "GT": "last maximum wins",
            "LE": "min pooling",
            "LT": "min pooling, last minimum wins",
        }.get(direction, "not a max pooling")
        raise NoMatch(f"select is compare {direction} ({meaning}), not GE (first maximum wins)")
    if compare_type not in (None, "FLOAT"):
        raise NoMatch(f"select compares with type {compare_type}, not FLOAT")
    if not is_binary_body(op.regions[1], ("stablehlo.add",), commutative=True):
        raise NoMatch("scatter region is not a single stablehlo.add")


def _check_types(op: ir.OpView) -> tuple[ir.Type, tuple[int, ...], tuple[int, ...]]:
    """(element type, operand shape, source shape)."""
    operand, source, init = op.operands
    types = [operand.type, source.type, op.results[0].type]
    for tensor in types:
        if not is_static_ranked(tensor):
            raise NoMatch(f"dynamic or unranked shape {tensor}")
    element_type = types[0].element_type
    name = str(element_type)
    if name not in SUPPORTED_DTYPES:
        raise NoMatch(f"element type {name} is not one of {', '.join(SUPPORTED_DTYPES)}")
    if (
        types[1].element_type != element_type
        or types[2].element_type != element_type
        or ir.ShapedType(init.type).element_type != element_type
    ):
        raise NoMatch("operand, source and init differ in element type")
    return element_type, tuple(types[0].shape), tuple(types[1].shape)


def _undoing_slice(op: ir.OpView, low, unpadded_shape) -> ir.OpView | None:
    """The single use of the op's result if it is a slice cutting exactly the pad away."""
    cut = sole_user_through_open_constraints(op.results[0])
    if op_name(cut) != "stablehlo.slice":
        return None
    start = i64_array(cut, "start_indices", ())
    limit = i64_array(cut, "limit_indices", ())
    strides = i64_array(cut, "strides", ())
    expected_limit = tuple(lo + size for lo, size in zip(low, unpadded_shape))
    if start == tuple(low) and limit == expected_limit and all(s == 1 for s in strides):
        return cut
    return None


def _padding_form(op: ir.OpView, rank: int):
    """(forward input, effective padding, pad op or None, slice op or None)."""
    operand = op.operands[0]
    attribute_padding = padding_pairs(op, rank)
    pad = defining_op(through_open_constraints(operand))
    if op_name(pad) != "stablehlo.pad":
        return operand, attribute_padding, None, None

    if any(pair != (0, 0) for pair in attribute_padding):
        raise NoMatch("operand is a stablehlo.pad and the op also has padding")
    edges = negative_infinity_pad(pad, rank)
    if isinstance(edges, str):
        raise NoMatch(edges)
    low, high = tuple(lo for lo, _ in edges), tuple(hi for _, hi in edges)
    x = pad.operands[0]
    unpadded = static_ranked_shape(x)
    if unpadded is None:
        raise NoMatch(f"dynamic or unranked shape {x.type}")
    cut = _undoing_slice(op, low, unpadded)
    if cut is None and (any(low) or any(high)):
        raise NoMatch("result is not cut back by a stablehlo.slice that exactly undoes the -inf pad")
    return x, tuple(zip(low, high)), pad, cut


def match_pool_gradient(op: ir.OpView) -> PoolGradient:
    """Return the match for `op`, or raise NoMatch with the reason."""
    element_type, operand_shape, source_shape = _check_types(op)
    _check_regions(op)
    operand, source, init = op.operands
    if not is_positive_zero(init):
        raise NoMatch("init value is not the constant +0")

    rank = len(operand_shape)
    x, padding, pad, cut = _padding_form(op, rank)
    window = Window(
        dimensions=i64_array(op, "window_dimensions", (1,) * rank),
        strides=i64_array(op, "window_strides", (1,) * rank),
        padding=padding,
    )
    try:
        geometry = fold_to_kernel(
            operand_shape if pad is None else static_ranked_shape(x),
            source_shape,
            window,
            # On the attribute form the original never selects padding; a
            # low-side explicit remainder could be selected in an all -inf window.
            allow_low_remainder=pad is not None,
        )
    except GeometryMismatch as reason:
        raise NoMatch(str(reason)) from None
    return PoolGradient(
        op=op,
        forward_input=x,
        grad_output=source,
        zero=init,
        window=window,
        geometry=geometry,
        pad=pad,
        slice=cut,
        element_type=element_type,
    )
