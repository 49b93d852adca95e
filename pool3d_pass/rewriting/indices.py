"""The indices strategy: the forward call saves each window's selection, the gradient reuses it.

* `replace_forward`: a forward `reduce_window` max that dominates the gradient
  becomes the forward call, emitted where the forward was; every use of the
  forward's result (the model's own, a returned value) takes the call's
  `output`, which is bit-identical to the reduce_window's. The call's
  `indices` serve every gradient of that forward.
* `build_from_indices`: the gradient becomes the from-indices call.
* `build_from_input`: a gradient with no dominating forward (a bare gradient)
  becomes one fused call on (grad_output, input): no reduce_window, no indices
  in memory. A binding without the fused call gets forward + from-indices there.
"""

from __future__ import annotations

from dataclasses import dataclass

from jaxlib.mlir import ir

from pool3d_pass.contract import BACKWARD_FROM_INDICES, BACKWARD_FROM_INPUT, FORWARD
from pool3d_pass.matching import PoolGradient
from pool3d_pass.matching.window import KernelGeometry
from pool3d_pass.rewriting import kernel_view as kv
from pool3d_pass.splicing.emit import Emit


@dataclass(frozen=True)
class SavedForward:
    """The forward call that replaced one reduce_window: its indices in the kernel's view."""

    geometry: KernelGeometry
    indices: ir.Value  # rank 5, INDEX_TYPE


def _forward_call(match: PoolGradient, emit: Emit, neg_inf: ir.Value | None) -> tuple[ir.Value, ir.Value]:
    """(output, indices) of the forward call on `match`'s input, both in the kernel's rank-5 view."""
    geometry = match.geometry
    kernel_input = kv.remainder_padded_input(match, neg_inf)
    input5 = kv.reshape(kernel_input, geometry.input_shape)
    output_type = ir.RankedTensorType.get(list(geometry.output_shape), match.element_type)
    output5, indices5 = emit(
        FORWARD, [input5], [output_type, kv.index_type(geometry.output_shape)], **geometry.pool.attributes()
    )
    return output5, indices5


def replace_forward(match: PoolGradient, forward: ir.OpView, emit: Emit) -> SavedForward:
    """Emit the forward call where `forward` is and route its uses to the call's output.

    `forward` itself is left in place without uses (the pass erases it after
    its walk: later gradients of the same forward still find it).
    """
    with ir.InsertionPoint(forward.operation), forward.location:
        # The forward's own -inf init dominates it (the gradient's pad value may not).
        neg_inf = forward.operands[1] if match.geometry.has_remainder else None
        output5, indices5 = _forward_call(match, emit, neg_inf)
        output = kv.reshape(output5, kv.shape_of(forward.results[0]))
    forward.results[0].replace_all_uses_with(output)
    return SavedForward(match.geometry, indices5)


def build_from_indices(match: PoolGradient, saved: SavedForward, emit: Emit) -> ir.Value:
    """Insert the from-indices call for `match` before its op; return the gradient w.r.t. the unpadded input."""
    geometry = match.geometry
    with ir.InsertionPoint(match.op.operation), match.op.location:
        # The op's current source, not `match.grad_output`: where the cotangent is the
        # forward's own result (vjp(y)), replacing the forward has rerouted it.
        grad5 = kv.reshape(match.op.operands[1], geometry.output_shape)
        result_type = ir.RankedTensorType.get(list(geometry.input_shape), match.element_type)
        (grad_input5,) = emit(BACKWARD_FROM_INDICES, [grad5, saved.indices], [result_type], **geometry.pool.attributes())
        return kv.unfold_gradient(match, grad_input5)


def build_from_input(match: PoolGradient, emit: Emit, *, fused: bool = True) -> ir.Value:
    """Insert the bare gradient's replacement: the fused call, or (fused=False) forward + from-indices."""
    geometry = match.geometry
    with ir.InsertionPoint(match.op.operation), match.op.location:
        if not fused:
            _, indices5 = _forward_call(match, emit, kv.negative_infinity_for(match))
            return build_from_indices(match, SavedForward(geometry, indices5), emit)
        kernel_input = kv.remainder_padded_input(match, kv.negative_infinity_for(match))
        operands = [kv.reshape(match.grad_output, geometry.output_shape), kv.reshape(kernel_input, geometry.input_shape)]
        result_type = ir.RankedTensorType.get(list(geometry.input_shape), match.element_type)
        (grad_input5,) = emit(BACKWARD_FROM_INPUT, operands, [result_type], **geometry.pool.attributes())
        return kv.unfold_gradient(match, grad_input5)
