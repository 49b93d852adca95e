"""Decide whether one `stablehlo.reduce_window` is a max pool the forward-output call computes exactly.

A program without the pool's gradient (inference, or a forward whose
gradient lives elsewhere) keeps its forward max pool after the gradient
patterns ran. It is a max pool the contract's `forward_output` call computes
bit for bit when: one operand and one -inf init, body one `maximum` (open
sharding constraints allowed), no base or window dilation, element type
f32/bf16/f16, static shapes, and a window the kernel can express
(`window.fold_to_kernel`). Its padding is the attribute's, plus the edges of
an explicit `stablehlo.pad(x, -inf)` feeding it (torch-xla's form): a padded
-inf never changes a maximum. Min pooling (`minimum`, +inf) is not this.
"""

from __future__ import annotations

from jaxlib.mlir import ir

from pool3d_pass.contract import SUPPORTED_DTYPES
from pool3d_pass.ir.attributes import i64_array, is_negative_infinity, padding_pairs
from pool3d_pass.ir.constraints import is_binary_body, through_open_constraints
from pool3d_pass.ir.ops import defining_op, op_name, static_ranked_shape
from pool3d_pass.matching.pool import MatchedPool, NoMatch, negative_infinity_pad
from pool3d_pass.matching.window import GeometryMismatch, Window, fold_to_kernel

REDUCE_WINDOW = "stablehlo.reduce_window"


# A matched forward max pool (`op` is the reduce_window): the pool's common fields are all it has.
ForwardPool = MatchedPool


def is_max_pool(op: ir.OpView) -> bool:
    """Cheap first test: a reduce_window of one operand whose body is a `maximum`."""
    return (
        op_name(op) == REDUCE_WINDOW
        and len(op.operands) == 2
        and len(op.results) == 1
        and is_binary_body(op.regions[0], ("stablehlo.maximum",), commutative=True)
    )


def _explicit_pad(value: ir.Value, rank: int) -> tuple[ir.OpView | None, tuple[tuple[int, int], ...]]:
    """(the -inf pad producing `value`, its edges) or (None, zeros)."""
    pad = defining_op(through_open_constraints(value))
    edges = negative_infinity_pad(pad, rank) if op_name(pad) == "stablehlo.pad" else "no pad"
    return (None, ((0, 0),) * rank) if isinstance(edges, str) else (pad, edges)


def match_forward_pool(op: ir.OpView) -> ForwardPool:
    """The match for a reduce_window that `is_max_pool`, or NoMatch with the reason."""
    operand, init = op.operands
    result = op.results[0]
    for value in (operand, result):
        if static_ranked_shape(value) is None:
            raise NoMatch(f"dynamic or unranked shape {value.type}")
    element_type = ir.ShapedType(operand.type).element_type
    if str(element_type) not in SUPPORTED_DTYPES:
        raise NoMatch(f"element type {element_type} is not one of {', '.join(SUPPORTED_DTYPES)}")
    if not is_negative_infinity(init):
        raise NoMatch("init value is not -inf")
    rank = len(static_ranked_shape(operand))
    ones = (1,) * rank
    if i64_array(op, "base_dilations", ones) != ones or i64_array(op, "window_dilations", ones) != ones:
        raise NoMatch("dilated window")
    pad, edges = _explicit_pad(operand, rank)
    x = operand if pad is None else pad.operands[0]
    padding = tuple((lo + p_lo, hi + p_hi) for (lo, hi), (p_lo, p_hi) in zip(padding_pairs(op, rank), edges))
    window = Window(
        dimensions=i64_array(op, "window_dimensions", ones),
        strides=i64_array(op, "window_strides", ones),
        padding=padding,
    )
    try:
        geometry = fold_to_kernel(static_ranked_shape(x), static_ranked_shape(result), window)
    except GeometryMismatch as reason:
        raise NoMatch(str(reason)) from None
    return ForwardPool(op=op, forward_input=x, window=window, geometry=geometry, pad=pad, element_type=element_type)
