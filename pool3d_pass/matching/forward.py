"""Find a forward max-pool whose result the kernel can take as its `output`.

The kernel needs the exact forward maxima. A `stablehlo.reduce_window` max of
the same value, with the same window, strides and padding, no dilation and an
init of -inf, computes exactly those; reusing it saves a pass over the input.
It must come before the gradient in the same block so it dominates the call.
Many gradient functions have none (see docs): then the rewrite inserts one.
"""

from __future__ import annotations

from jaxlib.mlir import ir

from pool3d_pass.matching import ir_utils as u
from pool3d_pass.matching.select_and_scatter import PoolGradient


def _computes_forward(candidate: ir.OpView, match: PoolGradient) -> bool:
    # Cheapest and most selective checks first: the pass runs this per use of x.
    if u.op_name(candidate) != "stablehlo.reduce_window":
        return False
    if len(candidate.operands) != 2 or len(candidate.results) != 1:
        return False
    if candidate.results[0].type != match.grad_output.type or candidate.operands[0] != match.forward_input:
        return False
    rank = len(match.window.dimensions)
    ones = (1,) * rank
    if (
        u.i64_array(candidate, "window_dimensions", ones) != match.window.dimensions
        or u.i64_array(candidate, "window_strides", ones) != match.window.strides
        or u.padding_pairs(candidate, rank) != match.window.padding
        or u.i64_array(candidate, "base_dilations", ones) != ones
        or u.i64_array(candidate, "window_dilations", ones) != ones
    ):
        return False
    if not u.is_negative_infinity(candidate.operands[1]):
        return False
    return u.is_binary_body(candidate.regions[0], ("stablehlo.maximum",), commutative=True)


def find_forward(match: PoolGradient) -> ir.OpView | None:
    """The reduce_window computing the forward max-pool of `match`, if it dominates `match.op`.

    Its single result is exactly max_pool(match.forward_input) with the
    gradient's window, strides and padding; it comes before the gradient in
    the same block. None if there is no such op.
    """
    block = match.op.operation.block
    for use in match.forward_input.uses:
        candidate = use.owner
        if not _computes_forward(candidate, match):
            continue
        if candidate.operation.block == block and candidate.operation.is_before_in_block(match.op.operation):
            return candidate
    return None


def find_forward_output(match: PoolGradient) -> ir.Value | None:
    """The result of a reusable forward max-pool that dominates `match.op`, else None."""
    forward = find_forward(match)
    return None if forward is None else forward.results[0]
