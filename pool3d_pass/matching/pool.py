"""What every matcher produces: one matched max pool, its `NoMatch`, and the one reader of a -inf pad.

A gradient (`select_and_scatter.PoolGradient`) and a forward pool without a
gradient (`forward_pool.ForwardPool`) are the same pool seen from two ops:
`MatchedPool` holds what both have (the op, x, the window with its effective
padding, the kernel's geometry, an explicit -inf pad, the element type), so
the rewriting's kernel view takes either.
"""

from __future__ import annotations

from dataclasses import dataclass

from jaxlib.mlir import ir

from pool3d_pass.ir.attributes import i64_array, is_negative_infinity
from pool3d_pass.matching.window import KernelGeometry, Window


class NoMatch(Exception):
    """This op is left untouched; str(self) says why."""


@dataclass
class MatchedPool:
    """A matched max pool: what the kernel view of every call needs."""

    op: ir.OpView  # the matched op (select_and_scatter or reduce_window)
    forward_input: ir.Value  # x, without an explicit -inf pad
    window: Window  # with the effective padding
    geometry: KernelGeometry
    pad: ir.OpView | None  # an explicit -inf pad of x, folded into the window
    element_type: ir.Type


def negative_infinity_pad(pad: ir.OpView, rank: int) -> tuple[tuple[int, int], ...] | str:
    """(low, high) per dimension if `pad` is `stablehlo.pad(x, -inf)` with zero interior and no
    cropping; else the reason it is not (a string)."""
    if len(pad.operands) != 2 or not is_negative_infinity(pad.operands[1]):
        return "operand is padded with a value other than -inf"
    zeros = (0,) * rank
    if any(i64_array(pad, "interior_padding", zeros)):
        return "operand has interior padding"
    low = i64_array(pad, "edge_padding_low", zeros)
    high = i64_array(pad, "edge_padding_high", zeros)
    if len(low) != rank or len(high) != rank or any(v < 0 for v in low + high):
        return "operand pad has negative (cropping) padding"
    return tuple(zip(low, high))
