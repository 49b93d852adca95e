"""Build the replacement of one matched max-pool gradient.

Emitted before the select_and_scatter, under its location:
  [pad x by the asymmetric remainder with -inf]
  [reduce_window max, unless a forward one is reused]
  reshape grad_output, input, output to rank 5   (only where the shape changes)
  custom_call @pool3d.max_pooling_3d_backward
  reshape back, [slice the remainder off]
The reshapes are row-major regroupings, so no data moves.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from pool3d_pass.contract.custom_call import build_max_pooling_3d_backward
from pool3d_pass.matching import PoolGradient


def _scalar_type(element_type: ir.Type) -> ir.RankedTensorType:
    return ir.RankedTensorType.get([], element_type)


def _negative_infinity(element_type: ir.Type) -> ir.Value:
    attr = ir.DenseElementsAttr.get_splat(_scalar_type(element_type), ir.FloatAttr.get(element_type, float("-inf")))
    return stablehlo.ConstantOp(attr).result


def _reshape(value: ir.Value, shape: tuple[int, ...]) -> ir.Value:
    tensor = ir.RankedTensorType(value.type)
    if tuple(tensor.shape) == tuple(shape):
        return value
    return stablehlo.ReshapeOp(ir.RankedTensorType.get(list(shape), tensor.element_type), value).result


def _forward_max_pool(match: PoolGradient, init: ir.Value) -> ir.Value:
    window = match.window
    pool = stablehlo.ReduceWindowOp(
        [match.grad_output.type],
        [match.forward_input],
        [init],
        list(window.dimensions),
        window_strides=list(window.strides),
        padding=ir.DenseElementsAttr.get(np.asarray(window.padding, dtype=np.int64).reshape(-1, 2)),
    )
    scalar = _scalar_type(match.element_type)
    body = pool.regions[0].blocks.append(scalar, scalar)
    with ir.InsertionPoint(body):
        stablehlo.ReturnOp([stablehlo.MaxOp(*body.arguments).result])
    return pool.results[0]


def build_replacement(
    match: PoolGradient,
    forward_output: ir.Value | None,
    kernel_call: Callable[..., ir.Value] = build_max_pooling_3d_backward,
) -> ir.Value:
    """Insert the kernel call for `match` before its op; return the gradient w.r.t. the unpadded input.

    `kernel_call` emits the call from the contract's operands and attributes:
    the neutral custom call by default, or a platform binding (see splice.py).
    """
    geometry = match.geometry
    x = match.forward_input
    x_shape = tuple(ir.RankedTensorType(x.type).shape)
    with ir.InsertionPoint(match.op.operation), match.op.location:
        negative_infinity = match.pad.operands[1] if match.pad is not None else None
        if negative_infinity is None and (forward_output is None or geometry.has_remainder):
            negative_infinity = _negative_infinity(match.element_type)
        kernel_input = x
        if geometry.has_remainder:
            rank = len(x_shape)
            kernel_input = stablehlo.PadOp(
                x, negative_infinity, list(geometry.remainder_low), list(geometry.remainder_high), [0] * rank
            ).result
        if forward_output is None:
            forward_output = _forward_max_pool(match, negative_infinity)

        grad_input = kernel_call(
            grad_output=_reshape(match.grad_output, geometry.output_shape),
            input=_reshape(kernel_input, geometry.input_shape),
            output=_reshape(forward_output, geometry.output_shape),
            kernel_size=geometry.kernel_size,
            stride=geometry.stride,
            padding=geometry.padding,
            data_format=geometry.data_format,
        )
        grad_input = _reshape(grad_input, tuple(ir.RankedTensorType(kernel_input.type).shape))
        if geometry.has_remainder:
            start = list(geometry.remainder_low)
            grad_input = stablehlo.SliceOp(
                grad_input, start, [lo + n for lo, n in zip(start, x_shape)], [1] * len(x_shape)
            ).result
    return grad_input
