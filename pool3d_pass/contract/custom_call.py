"""The one typed builder of the contract's custom calls (see docs/contract.md).

`CallBuilder` builds the calls of one pass run: the attributes of each call
configuration (backend_config, Shardy rule, target name) are built once per
MLIR context and reused by every later call of that configuration (a model
with a hundred identical pools builds them once). `build_call` is the same
builder without that memory, for a single call.
"""

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


class CallBuilder:
    """`build_call`, remembering the attributes it built, each under the MLIR context it belongs to.

    Every cache key starts with the context of the call's operands, so an
    attribute is only ever reused in the context that owns it.
    """

    def __init__(self):
        self._attributes: dict[tuple, ir.Attribute | None] = {}

    def _cached(self, context: ir.Context, *key, make):
        """The attribute `make()` builds, in `context`, once per (context, *key)."""
        key = (context, *key)
        try:
            return self._attributes[key]
        except KeyError:
            with context:
                value = self._attributes[key] = make()
            return value

    def _sharding_rule(self, context, call: str, data_format: str, operand_types, result_types) -> ir.Attribute | None:
        """The call's `sdy.sharding_rule`; None in a context without the sdy dialect (not JAX's,
        not ours), which cannot hold it: the rule is metadata for Shardy, the call is complete without it."""

        def make():
            if not context.is_registered_operation("sdy.mesh"):
                return None
            rule = sharding_rule(call, data_format).attribute(
                [ir.RankedTensorType(t).shape for t in operand_types], [ir.RankedTensorType(t).shape for t in result_types]
            )
            return ir.Attribute.parse(rule)

        return self._cached(context, "sharding_rule", call, data_format, operand_types, result_types, make=make)

    def __call__(
        self,
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
        operand_types = tuple(value.type for value in operands)
        for value, value_type in zip(operands, operand_types):
            assert ir.RankedTensorType(value_type).rank == 5, f"{call} operands must be rank 5, got {value.type}"
        context = operand_types[0].context
        configuration = (tuple(kernel_size), tuple(stride), tuple(padding), data_format, output_format)
        custom_call = stablehlo.CustomCallOp(
            list(result_types),
            list(operands),
            self._cached(context, "target", call, make=lambda: ir.StringAttr.get(spec.target)),
            has_side_effect=self._cached(context, "no_side_effect", make=lambda: ir.BoolAttr.get(False)),
            api_version=self._cached(
                context,
                "api_version",
                make=lambda: ir.IntegerAttr.get(ir.IntegerType.get_signless(32), API_VERSION_TYPED_FFI),
            ),
            backend_config=self._cached(
                context,
                "backend_config",
                configuration,
                make=lambda: contract_attributes(
                    kernel_size=kernel_size,
                    stride=stride,
                    padding=padding,
                    data_format=data_format,
                    output_format=output_format,
                ),
            ),
        )
        if output_format == data_format:
            rule = self._sharding_rule(context, call, data_format, operand_types, tuple(result_types))
            if rule is not None:
                custom_call.attributes["sdy.sharding_rule"] = rule
        return list(custom_call.results)


def build_call(call: str, operands: Sequence[ir.Value], result_types: Sequence[ir.Type], **attributes) -> list[ir.Value]:
    """Insert the contract's `call` at the current insertion point and location; return its results.

    Keywords: `kernel_size`, `stride`, `padding`, `data_format`, optionally
    `output_format` (default: `data_format`). One call; a run of many uses a `CallBuilder`.
    """
    return CallBuilder()(call, operands, result_types, **attributes)
