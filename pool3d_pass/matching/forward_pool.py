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

from dataclasses import dataclass

from jaxlib.mlir import ir

from pool3d_pass.contract import SUPPORTED_DTYPES
from pool3d_pass.matching import ir_utils as u
from pool3d_pass.matching.select_and_scatter import NoMatch
from pool3d_pass.matching.window import GeometryMismatch, KernelGeometry, Window, fold_to_kernel

REDUCE_WINDOW = "stablehlo.reduce_window"


@dataclass
class ForwardPool:
    """A matched forward max pool: what the forward-output call needs (the kernel view's fields)."""

    op: ir.OpView  # the reduce_window
    forward_input: ir.Value  # x, without an explicit -inf pad
    window: Window  # with the effective padding
    geometry: KernelGeometry
    pad: ir.OpView | None  # an explicit -inf pad feeding the reduce_window
    element_type: ir.Type


def is_max_pool(op: ir.OpView) -> bool:
    """Cheap first test: a reduce_window of one operand whose body is a `maximum`."""
    return (
        u.op_name(op) == REDUCE_WINDOW
        and len(op.operands) == 2
        and len(op.results) == 1
        and u.is_binary_body(op.regions[0], ("stablehlo.maximum",), commutative=True)
    )


def _explicit_pad(value: ir.Value, rank: int) -> tuple[ir.OpView | None, tuple[tuple[int, int], ...]]:
    """(the -inf pad producing `value`, its edges) or (None, zeros)."""
    zeros = ((0, 0),) * rank
    pad = u.defining_op(u.through_open_constraints(value))
    if u.op_name(pad) != "stablehlo.pad" or not u.is_negative_infinity(pad.operands[1]):
        return None, zeros
    if any(u.i64_array(pad, "interior_padding", (0,) * rank)):
        return None, zeros
    low = u.i64_array(pad, "edge_padding_low", (0,) * rank)
    high = u.i64_array(pad, "edge_padding_high", (0,) * rank)
    if any(v < 0 for v in low + high):
        return None, zeros
    return pad, tuple(zip(low, high))


def match_forward_pool(op: ir.OpView) -> ForwardPool:
    """The match for a reduce_window that `is_max_pool`, or NoMatch with the reason."""
    operand, init = op.operands
    result = op.results[0]
    for value in (operand, result):
        if u.static_ranked_shape(value) is None:
            raise NoMatch(f"dynamic or unranked shape {value.type}")
    element_type = ir.ShapedType(operand.type).element_type
    if str(element_type) not in SUPPORTED_DTYPES:
        raise NoMatch(f"element type {element_type} is not one of {', '.join(SUPPORTED_DTYPES)}")
    if not u.is_negative_infinity(init):
        raise NoMatch("init value is not -inf")
    rank = len(u.static_ranked_shape(operand))
    ones = (1,) * rank
    if u.i64_array(op, "base_dilations", ones) != ones or u.i64_array(op, "window_dilations", ones) != ones:
        raise NoMatch("dilated window")
    pad, edges = _explicit_pad(operand, rank)
    x = operand if pad is None else pad.operands[0]
    padding = tuple((lo + p_lo, hi + p_hi) for (lo, hi), (p_lo, p_hi) in zip(u.padding_pairs(op, rank), edges))
    window = Window(
        dimensions=u.i64_array(op, "window_dimensions", ones),
        strides=u.i64_array(op, "window_strides", ones),
        padding=padding,
    )
    try:
        geometry = fold_to_kernel(u.static_ranked_shape(x), u.static_ranked_shape(result), window)
    except GeometryMismatch as reason:
        raise NoMatch(str(reason)) from None
    return ForwardPool(op=op, forward_input=x, window=window, geometry=geometry, pad=pad, element_type=element_type)
