"""Forward max pools left without a gradient (inference) become the forward-output call.

After the gradient patterns ran, a forward max pool still in the program
that no backward call reads (the pass remembers those the recompute strategy
reused or inserted) has no gradient here: an inference program, or a forward
whose gradient lives in another function. Where the platform's binding implements `forward_output` and accepts
the configuration (a binding refuses those where XLA's own reduce_window was
measured faster), the reduce_window is replaced by the call, whose `output`
is bit-identical to it; the others stay, with a remark. Neutral output never
gets this call: it is a platform decision, and the NKI path stays as it was.
"""

from __future__ import annotations

from jaxlib.mlir import ir

from pool3d_pass.bindings.registry import CallSignature
from pool3d_pass.contract import FORWARD_OUTPUT
from pool3d_pass.matching.forward_pool import ForwardPool
from pool3d_pass.rewriting import kernel_view as kv
from pool3d_pass.splicing.emit import Emit


def signature_of(pool: ForwardPool) -> CallSignature:
    return CallSignature.of_pool(FORWARD_OUTPUT, str(pool.element_type), pool.geometry.pool)


def replace_with_forward_output(pool: ForwardPool, emit: Emit) -> None:
    """Emit the forward-output call where the reduce_window is; its uses take the call's output.

    The reduce_window (and an explicit -inf pad only it used) is left without
    uses, for the caller to erase.
    """
    op, geometry = pool.op, pool.geometry
    with ir.InsertionPoint(op.operation), op.location:
        neg_inf = op.operands[1] if geometry.has_remainder else None  # the pool's own -inf init
        input5 = kv.reshape(kv.remainder_padded_input(pool, neg_inf), geometry.input_shape)
        output_type = ir.RankedTensorType.get(list(geometry.output_shape), pool.element_type)
        (output5,) = emit(FORWARD_OUTPUT, [input5], [output_type], **geometry.pool.attributes())
        output = kv.reshape(output5, kv.shape_of(op.results[0]))
    op.results[0].replace_all_uses_with(output)
