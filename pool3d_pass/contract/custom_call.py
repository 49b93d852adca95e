"""The one typed builder of the contract's custom calls (see docs/contract.md)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from pool3d_pass.contract import API_VERSION_TYPED_FFI, CALLS, LAYOUTS, SPATIAL_RANK
from pool3d_pass.contract.sharding import sharding_rule


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
    """The `backend_config` dictionary of a call, checked against the contract."""
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
    spec = CALLS[call]
    assert len(operands) == len(spec.operands) and len(result_types) == len(spec.results), (call, operands, result_types)
    for value in operands:
        assert ir.RankedTensorType(value.type).rank == 5, f"{call} operands must be rank 5, got {value.type}"
    custom_call = stablehlo.CustomCallOp(
        list(result_types),
        list(operands),
        spec.target,
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
        rule = sharding_rule(call, data_format).attribute(
            [ir.RankedTensorType(v.type).shape for v in operands], [ir.RankedTensorType(t).shape for t in result_types]
        )
        custom_call.attributes["sdy.sharding_rule"] = ir.Attribute.parse(rule)
    return list(custom_call.results)
