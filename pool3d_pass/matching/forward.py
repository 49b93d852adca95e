"""Find a forward max-pool whose result the kernel can take as its `output`.

The kernel needs the exact forward maxima. A `stablehlo.reduce_window` max of
the gradient's input `x`, with the same window and strides, the same
effective padding, no dilation and an init of -inf, computes exactly those;
reusing it saves a pass over the input. Padding comes in two forms, on either
side independently of the gradient's form:

* on the reduce_window's `padding` attribute (JAX, TensorFlow): padded
  positions hold the init, -inf;
* an explicit `stablehlo.pad(x, -inf)` (zero interior, no negative edge)
  feeding the reduce_window (torch-xla writes its forward this way, its
  gradient with attribute padding).

Both give the same maxima: the effective padding is the pad's edges plus the
reduce_window's attribute padding, per dimension. (A padded -inf never
changes a maximum; a window of padding only is -inf either way.)

The reduce_window must come before the gradient in the same block so it
dominates the gradient. Many gradient functions have none (see docs): then
the rewrite inserts one.
"""

from __future__ import annotations

from jaxlib.mlir import ir

from pool3d_pass.ir.attributes import i64_array, is_negative_infinity, padding_pairs
from pool3d_pass.ir.constraints import is_binary_body
from pool3d_pass.ir.ops import op_name
from pool3d_pass.matching.pool import negative_infinity_pad
from pool3d_pass.matching.select_and_scatter import PoolGradient


def _computes_forward(
    candidate: ir.OpView,
    match: PoolGradient,
    pooled: ir.Value,
    pad_edges: tuple[tuple[int, int], ...] | None,
) -> bool:
    """Whether `candidate` is max_pool(`pooled`) equal to the forward of `match`.

    `pooled` is `match.forward_input`, or an explicit -inf pad of it whose
    (low, high) edges are `pad_edges`.
    """
    # Cheapest and most selective checks first: the pass runs this per use of x.
    if op_name(candidate) != "stablehlo.reduce_window":
        return False
    if len(candidate.operands) != 2 or len(candidate.results) != 1:
        return False
    if candidate.results[0].type != match.grad_output.type or candidate.operands[0] != pooled:
        return False
    rank = len(match.window.dimensions)
    ones = (1,) * rank
    padding = padding_pairs(candidate, rank)
    if pad_edges is not None:
        padding = tuple((lo + p_lo, hi + p_hi) for (lo, hi), (p_lo, p_hi) in zip(padding, pad_edges))
    if (
        i64_array(candidate, "window_dimensions", ones) != match.window.dimensions
        or i64_array(candidate, "window_strides", ones) != match.window.strides
        or padding != match.window.padding
        or i64_array(candidate, "base_dilations", ones) != ones
        or i64_array(candidate, "window_dilations", ones) != ones
    ):
        return False
    if not is_negative_infinity(candidate.operands[1]):
        return False
    return is_binary_body(candidate.regions[0], ("stablehlo.maximum",), commutative=True)


def _candidates(match: PoolGradient):
    """(reduce_window candidate, pooled value, explicit pad edges or None) for each use of x."""
    rank = len(match.window.dimensions)
    for use in match.forward_input.uses:
        owner = use.owner
        name = op_name(owner)
        if name == "stablehlo.reduce_window":
            yield owner, match.forward_input, None
        elif name == "stablehlo.pad" and owner.operands[0] == match.forward_input:
            padded = owner.results[0]
            users = [use.owner for use in padded.uses]
            # Most pads feed no reduce_window (JAX's feeds the gradient): read the edges only for one that does.
            if not any(op_name(user) == "stablehlo.reduce_window" for user in users):
                continue
            edges = negative_infinity_pad(owner, rank)
            if isinstance(edges, str):
                continue
            for user in users:
                yield user, padded, edges


def find_forward(match: PoolGradient) -> ir.OpView | None:
    """The reduce_window computing the forward max-pool of `match`, if it dominates `match.op`.

    Its single result is exactly max_pool(match.forward_input) with the
    gradient's window, strides and padding; it comes before the gradient in
    the same block. Its operand is `match.forward_input` itself (attribute
    padding) or a `stablehlo.pad(match.forward_input, -inf)` (explicit
    padding, possibly plus attribute padding). None if there is no such op.
    """
    block = match.op.operation.block
    for candidate, pooled, edges in _candidates(match):
        if not _computes_forward(candidate, match, pooled, edges):
            continue
        if candidate.operation.block == block and candidate.operation.is_before_in_block(match.op.operation):
            return candidate
    return None
