"""Reading attributes the matchers need (windows, paddings, splat constants, comparisons), cached per pass run."""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Sequence

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from pool3d_pass.ir.ops import defining_op, op_name

# Attributes are uniqued in their context: within one pass run, one attribute
# object stands for one value. `attribute_values_cached()` keeps, per thread,
# what the readers below made of each attribute until the run ends (the cache
# holds the attributes, so it must not outlive the run: it would keep their
# context alive). Outside it, nothing is cached.
_run_cache = threading.local()


@contextlib.contextmanager
def attribute_values_cached():
    """Cache the readers' results per attribute for the duration of the block (one pass run)."""
    outer = getattr(_run_cache, "values", None)
    if outer is None:
        _run_cache.values = {}
    try:
        yield
    finally:
        if outer is None:
            _run_cache.values = None


def cached_value(attr: ir.Attribute, read):
    """`read(attr)`, remembered for the run where `attribute_values_cached()` is active."""
    cache = getattr(_run_cache, "values", None)
    if cache is None:
        return read(attr)
    try:
        return cache[attr]
    except KeyError:
        value = cache[attr] = read(attr)
        return value


def _read_i64_array(array) -> tuple[int, ...]:
    # Indexing is ~4x faster than the bindings' iterator protocol.
    return tuple(map(array.__getitem__, range(len(array))))


def i64_array(op: ir.OpView, name: str, default: Sequence[int]) -> tuple[int, ...]:
    attributes = op.attributes
    if name not in attributes:
        return tuple(default)
    return cached_value(attributes[name], _read_i64_array)


def _read_padding_pairs(attr) -> tuple[tuple[int, int], ...]:
    # Through the buffer protocol: element-wise iteration costs ~10x more.
    flat = np.asarray(attr).reshape(-1).tolist()  # splats come out full size
    return tuple(zip(flat[0::2], flat[1::2]))


def padding_pairs(op: ir.OpView, rank: int) -> tuple[tuple[int, int], ...]:
    """The `padding` attribute of a windowed op as (low, high) pairs; zeros if absent."""
    attributes = op.attributes
    if "padding" not in attributes:
        return ((0, 0),) * rank
    return cached_value(attributes["padding"], _read_padding_pairs)


def _read_splat_float(attr) -> float | None:
    if not isinstance(attr, ir.DenseFPElementsAttr):
        return None
    dense = ir.DenseFPElementsAttr(attr)
    if not dense.is_splat:
        return None
    return ir.FloatAttr(dense.get_splat_value()).value


def splat_float(value: ir.Value) -> float | None:
    """The float a scalar or splat `stablehlo.constant` holds, through broadcast_in_dim; else None."""
    op = defining_op(value)
    if op_name(op) == "stablehlo.broadcast_in_dim":
        return splat_float(op.operands[0])
    if op_name(op) != "stablehlo.constant":
        return None
    return cached_value(op.attributes["value"], _read_splat_float)


def is_negative_infinity(value: ir.Value) -> bool:
    constant = splat_float(value)
    return constant is not None and math.isinf(constant) and constant < 0


def is_positive_zero(value: ir.Value) -> bool:
    constant = splat_float(value)
    return constant == 0.0 and math.copysign(1.0, constant) > 0


def comparison(compare: ir.OpView) -> tuple[str, str | None]:
    """(direction, compare_type) of a stablehlo.compare; compare_type None if absent."""
    attributes = compare.attributes
    direction = cached_value(attributes["comparison_direction"], _comparison_direction)
    if "compare_type" not in attributes:
        return direction, None
    return direction, cached_value(attributes["compare_type"], _comparison_type)


def _comparison_direction(attr: ir.Attribute) -> str:
    return stablehlo.ComparisonDirectionAttr(attr).value


def _comparison_type(attr: ir.Attribute) -> str:
    return stablehlo.ComparisonTypeAttr(attr).value
