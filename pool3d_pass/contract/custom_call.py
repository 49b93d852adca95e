"""The one typed builder of the contract's custom calls (see docs/contract.md)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from pool3d_pass.contract import (
    API_VERSION_TYPED_FFI,
    BACKWARD,
    BACKWARD_FROM_INDICES,
    BACKWARD_FROM_INPUT,
    FORWARD,
    FORWARD_OUTPUT,
    LAYOUTS,
    SPATIAL_RANK,
    TARGETS,
)


def _i64_vector(values: Sequence[int]) -> ir.Attribute:
    # The encoding jax.ffi.ffi_call gives an int64 numpy array attribute.
    return ir.DenseElementsAttr.get(np.asarray(values, dtype=np.int64))


def contract_attributes(
    *,
    kernel_size: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    data_format: str,
    output_format: str,
) -> ir.DictAttr:
    """The `mhlo.backend_config` dictionary, checked against the contract."""
    for name, values, least in (("kernel_size", kernel_size, 1), ("stride", stride, 1), ("padding", padding, 0)):
        assert len(values) == SPATIAL_RANK and all(v >= least for v in values), f"{name}={list(values)}"
    assert data_format in LAYOUTS and output_format in LAYOUTS, (data_format, output_format)
    return ir.DictAttr.get(
        {
            "kernel_size": _i64_vector(kernel_size),
            "stride": _i64_vector(stride),
            "padding": _i64_vector(padding),
            "data_format": ir.StringAttr.get(data_format),
            "output_format": ir.StringAttr.get(output_format),
        }
    )


# Which operands and results of each call are in the input's layout ("in":
# input, grad_input) and which in the output's ("out": grad_output, output,
# indices): the sharding rule maps their factors alike.
_OPERAND_SIDES = {
    BACKWARD: (("out", "in", "out"), ("in",)),
    FORWARD: (("in",), ("out", "out")),
    FORWARD_OUTPUT: (("in",), ("out",)),
    BACKWARD_FROM_INDICES: (("out", "out"), ("in",)),
    BACKWARD_FROM_INPUT: (("out", "in"), ("in",)),
}


def sharding_rule(grad_output_shape, input_shape, data_format: str, call: str = BACKWARD) -> ir.Attribute:
    """The Shardy rule of a call: batch and channel factors shared by all operands and
    results; pooled factors need replication (windows cross shard borders)."""
    channel = 4 if data_format == "NDHWC" else 1
    pooled_out, pooled_in = ("k", "l", "m"), ("n", "o", "p")

    def mapping(pooled):
        factors = list(pooled)
        factors.insert(0, "i")
        factors.insert(channel, "j")
        return "[" + ", ".join(factors) + "]"

    sizes = {"i": input_shape[0], "j": input_shape[channel]}
    spatial = [d for d in range(5) if d not in (0, channel)]
    sizes.update({f: grad_output_shape[d] for f, d in zip(pooled_out, spatial)})
    sizes.update({f: input_shape[d] for f, d in zip(pooled_in, spatial)})
    side = {"out": mapping(pooled_out), "in": mapping(pooled_in)}
    operands, results = _OPERAND_SIDES[call]
    return ir.Attribute.parse(
        f"#sdy.op_sharding_rule<({', '.join(side[o] for o in operands)})->({', '.join(side[r] for r in results)}) "
        "{" + ", ".join(f"{f}={n}" for f, n in sorted(sizes.items())) + "} "
        "need_replication={k, l, m, n, o, p}, custom>"
    )


def build_call(
    call: str,
    operands: Sequence[ir.Value],
    result_types: Sequence[ir.Type],
    *,
    kernel_size: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    data_format: str,
    output_format: str | None = None,
) -> list[ir.Value]:
    """Insert the contract's `call` at the current insertion point and location; return its results."""
    output_format = output_format or data_format
    sides, result_sides = _OPERAND_SIDES[call]
    assert len(operands) == len(sides) and len(result_types) == len(result_sides), (call, operands, result_types)
    for value in operands:
        assert ir.RankedTensorType(value.type).rank == 5, f"{call} operands must be rank 5, got {value.type}"
    custom_call = stablehlo.CustomCallOp(
        list(result_types),
        list(operands),
        TARGETS[call],
        has_side_effect=False,
        api_version=ir.IntegerAttr.get(ir.IntegerType.get_signless(32), API_VERSION_TYPED_FFI),
        backend_config=contract_attributes(
            kernel_size=kernel_size,
            stride=stride,
            padding=padding,
            data_format=data_format,
            output_format=output_format,
        ),
    )
    # The rule is metadata for Shardy; a context without the sdy dialect (not
    # JAX's, not ours) cannot hold it, and the call is complete without it.
    if output_format == data_format and custom_call.context.is_registered_operation("sdy.mesh"):
        shapes = {side: ir.RankedTensorType(v.type).shape for side, v in zip(sides, operands)}
        shapes.update({side: ir.RankedTensorType(t).shape for side, t in zip(result_sides, result_types)})
        custom_call.attributes["sdy.sharding_rule"] = sharding_rule(shapes["out"], shapes["in"], data_format, call)
    return list(custom_call.results)


def build_max_pooling_3d_backward(
    *,
    grad_output: ir.Value,
    input: ir.Value,  # noqa: A002 - the kernel's parameter name
    output: ir.Value,
    kernel_size: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    data_format: str,
    output_format: str | None = None,
) -> ir.Value:
    """Insert the contract's backward call (the NKI kernel's signature); return grad_input."""
    assert grad_output.type == output.type, (grad_output.type, output.type)
    (grad_input,) = build_call(
        BACKWARD, [grad_output, input, output], [input.type], kernel_size=kernel_size, stride=stride,
        padding=padding, data_format=data_format, output_format=output_format,
    )
    return grad_input


def build_max_pooling_3d_forward_output(
    *,
    input: ir.Value,  # noqa: A002 - the contract's operand name
    output_type: ir.Type,
    kernel_size: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    data_format: str,
    output_format: str | None = None,
) -> ir.Value:
    """Insert the contract's forward_output call (an inference forward: y only); return output."""
    (output,) = build_call(
        FORWARD_OUTPUT, [input], [output_type], kernel_size=kernel_size, stride=stride,
        padding=padding, data_format=data_format, output_format=output_format,
    )
    return output
