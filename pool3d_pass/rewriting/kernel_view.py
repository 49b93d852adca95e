"""The kernel's rank-5 view of one matched pool: reshapes in, the remainder pad, reshape and slice back.

Every strategy calls the kernels on the same view (`matching.window.KernelGeometry`):
the pooled input, optionally padded with -inf by the asymmetric remainder, and
grad_output, output and indices regrouped to rank 5 by row-major reshapes (no
data moves). Ops are created at the current insertion point and location.
"""

from __future__ import annotations

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from pool3d_pass.contract import INDEX_TYPE
from pool3d_pass.matching.pool import MatchedPool


def scalar_type(element_type: ir.Type) -> ir.RankedTensorType:
    return ir.RankedTensorType.get([], element_type)


def negative_infinity(element_type: ir.Type) -> ir.Value:
    attr = ir.DenseElementsAttr.get_splat(scalar_type(element_type), ir.FloatAttr.get(element_type, float("-inf")))
    return stablehlo.ConstantOp(attr).result


def reshape(value: ir.Value, shape: tuple[int, ...]) -> ir.Value:
    tensor = ir.RankedTensorType(value.type)
    if tuple(tensor.shape) == tuple(shape):
        return value
    return stablehlo.ReshapeOp(ir.RankedTensorType.get(list(shape), tensor.element_type), value).result


def shape_of(value: ir.Value) -> tuple[int, ...]:
    return tuple(ir.RankedTensorType(value.type).shape)


def index_type(shape: tuple[int, ...]) -> ir.RankedTensorType:
    return ir.RankedTensorType.get(list(shape), ir.IntegerType.get_signless(int(INDEX_TYPE[1:])))


def remainder_padded_input(match: MatchedPool, neg_inf: ir.Value | None) -> ir.Value:
    """The forward input, padded with -inf by the remainder the kernel's symmetric padding leaves."""
    geometry = match.geometry
    if not geometry.has_remainder:
        return match.forward_input
    rank = len(geometry.remainder_low)
    return stablehlo.PadOp(
        match.forward_input, neg_inf, list(geometry.remainder_low), list(geometry.remainder_high), [0] * rank
    ).result


def negative_infinity_for(match: MatchedPool) -> ir.Value | None:
    """The -inf scalar the remainder pad needs: JAX's own pad value where there is one."""
    if not match.geometry.has_remainder:
        return None
    return match.pad.operands[1] if match.pad is not None else negative_infinity(match.element_type)


def unfold_gradient(match: MatchedPool, grad5: ir.Value) -> ir.Value:
    """The kernel's gradient reshaped back to the operand's rank, the remainder sliced off."""
    geometry = match.geometry
    x_shape = shape_of(match.forward_input)
    padded_shape = [lo + n + hi for lo, n, hi in zip(geometry.remainder_low, x_shape, geometry.remainder_high)]
    grad_input = reshape(grad5, tuple(padded_shape))
    if geometry.has_remainder:
        start = list(geometry.remainder_low)
        grad_input = stablehlo.SliceOp(
            grad_input, start, [lo + n for lo, n in zip(start, x_shape)], [1] * len(x_shape)
        ).result
    return grad_input
