"""The recompute strategy: one backward call on (grad_output, input, output), the NKI kernel's signature.

Emitted before the select_and_scatter, under its location:
  [pad x by the asymmetric remainder with -inf]
  [reduce_window max, unless a forward one is reused]
  reshape grad_output, input, output to rank 5   (only where the shape changes)
  custom_call @pool3d.max_pooling_3d_backward
  reshape back, [slice the remainder off]
"""

from __future__ import annotations

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from pool3d_pass.contract import BACKWARD
from pool3d_pass.matching import PoolGradient
from pool3d_pass.rewriting import kernel_view as kv
from pool3d_pass.splicing.emit import Emit


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
    scalar = kv.scalar_type(match.element_type)
    body = pool.regions[0].blocks.append(scalar, scalar)
    with ir.InsertionPoint(body):
        stablehlo.ReturnOp([stablehlo.MaxOp(*body.arguments).result])
    return pool.results[0]


def build_recompute(match: PoolGradient, forward_output: ir.Value | None, emit: Emit) -> tuple[ir.Value, ir.Value]:
    """Insert the backward call for `match` before its op; return the gradient w.r.t. the unpadded
    input, and the forward max pool's output the call reads (`forward_output`, or the one inserted)."""
    geometry = match.geometry
    with ir.InsertionPoint(match.op.operation), match.op.location:
        neg_inf = match.pad.operands[1] if match.pad is not None else None
        if neg_inf is None and (forward_output is None or geometry.has_remainder):
            neg_inf = kv.negative_infinity(match.element_type)
        kernel_input = kv.remainder_padded_input(match, neg_inf)
        if forward_output is None:
            forward_output = _forward_max_pool(match, neg_inf)
        operands = [
            kv.reshape(match.grad_output, geometry.output_shape),
            kv.reshape(kernel_input, geometry.input_shape),
            kv.reshape(forward_output, geometry.output_shape),
        ]
        (grad5,) = emit(BACKWARD, operands, [operands[1].type], **geometry.pool.attributes())
        return kv.unfold_gradient(match, grad5), forward_output
