"""Small, read-only queries on jaxlib MLIR objects that the matchers share."""

from __future__ import annotations

import contextlib
import math
import re
import threading

import numpy as np
from collections.abc import Sequence

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

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


def _cached_value(attr: ir.Attribute, read):
    cache = getattr(_run_cache, "values", None)
    if cache is None:
        return read(attr)
    try:
        return cache[attr]
    except KeyError:
        value = cache[attr] = read(attr)
        return value


def is_static_ranked(tensor: ir.Type) -> bool:
    """Whether `tensor` (a value's type: the bindings return the concrete class) is a statically shaped ranked tensor."""
    return isinstance(tensor, ir.RankedTensorType) and tensor.has_static_shape


def static_ranked_shape(value: ir.Value) -> tuple[int, ...] | None:
    """The shape of a statically shaped ranked tensor value, else None."""
    tensor = value.type
    return tuple(tensor.shape) if is_static_ranked(tensor) else None


def defining_op(value: ir.Value) -> ir.OpView | None:
    owner = value.owner
    return None if isinstance(owner, ir.Block) else owner


def op_name(op: ir.OpView | ir.Operation | None) -> str | None:
    return None if op is None else op.operation.name


# Inside a partially manual jax.shard_map (axis_names= a subset of the mesh), JAX
# wraps nearly every value, scalars in reductions' bodies too, in an
# `sdy.sharding_constraint` whose dimensions are all open and unsharded ("{?}",
# or `[]` for a scalar): it constrains nothing. Matchers look through those.
SHARDING_CONSTRAINT = "sdy.sharding_constraint"
_OPEN_SHARDING = re.compile(r"<@[\w$.-]+, \[(\{\?\}(, \{\?\})*)?\]>$")


def is_open_constraint(op: ir.OpView | ir.Operation | None) -> bool:
    """True for an `sdy.sharding_constraint` that leaves every dimension open and unsharded."""
    if op_name(op) != SHARDING_CONSTRAINT or len(op.operands) != 1:
        return False
    return _cached_value(op.attributes["sharding"], _is_open_sharding)


def _is_open_sharding(attr: ir.Attribute) -> bool:
    return _OPEN_SHARDING.search(str(attr)) is not None


def through_open_constraints(value: ir.Value) -> ir.Value:
    """`value`'s origin: the operand of the chain of open sharding constraints producing it."""
    producer = defining_op(value)
    while is_open_constraint(producer):
        value = producer.operands[0]
        producer = defining_op(value)
    return value


def sole_user_through_open_constraints(value: ir.Value) -> ir.OpView | None:
    """The one op using `value`, seen through open sharding constraints (each with one use)."""
    while True:
        uses = list(value.uses)
        if len(uses) != 1:
            return None
        user = uses[0].owner
        if not is_open_constraint(user):
            return user
        value = user.results[0]


def _read_i64_array(array) -> tuple[int, ...]:
    # Indexing is ~4x faster than the bindings' iterator protocol.
    return tuple(map(array.__getitem__, range(len(array))))


def i64_array(op: ir.OpView, name: str, default: Sequence[int]) -> tuple[int, ...]:
    attributes = op.attributes
    if name not in attributes:
        return tuple(default)
    return _cached_value(attributes[name], _read_i64_array)


def _read_padding_pairs(attr) -> tuple[tuple[int, int], ...]:
    # Through the buffer protocol: element-wise iteration costs ~10x more.
    flat = np.asarray(attr).reshape(-1).tolist()  # splats come out full size
    return tuple(zip(flat[0::2], flat[1::2]))


def padding_pairs(op: ir.OpView, rank: int) -> tuple[tuple[int, int], ...]:
    """The `padding` attribute of a windowed op as (low, high) pairs; zeros if absent."""
    attributes = op.attributes
    if "padding" not in attributes:
        return ((0, 0),) * rank
    return _cached_value(attributes["padding"], _read_padding_pairs)


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
    return _cached_value(op.attributes["value"], _read_splat_float)


def is_negative_infinity(value: ir.Value) -> bool:
    constant = splat_float(value)
    return constant is not None and math.isinf(constant) and constant < 0


def is_positive_zero(value: ir.Value) -> bool:
    constant = splat_float(value)
    return constant == 0.0 and math.copysign(1.0, constant) > 0


def single_block_ops(region: ir.Region) -> tuple[list[ir.OpView], ir.Block] | None:
    blocks = region.blocks
    if len(blocks) != 1:
        return None
    block = blocks[0]
    return list(block.operations), block


def is_binary_body(region: ir.Region, op_names: tuple[str, ...], *, commutative: bool) -> bool:
    """True if `region` is `^bb(a, b): r = <op>(a, b); return r` (either order if commutative).

    Open sharding constraints of `r` before the return are allowed (see `is_open_constraint`)."""
    # Indexing, not list(): this runs on every pool candidate's regions.
    blocks = region.blocks
    if len(blocks) != 1:
        return False
    block = blocks[0]
    args, ops = block.arguments, block.operations
    count = len(ops)
    if len(args) != 2 or count < 2:
        return False
    compute, terminator = ops[0], ops[count - 1]
    if compute.operation.name not in op_names or terminator.operation.name != "stablehlo.return":
        return False
    returned = terminator.operands
    if len(returned) != 1 or through_open_constraints(returned[0]) != compute.results[0]:
        return False
    if count > 2 and any(not is_open_constraint(ops[i]) for i in range(1, count - 1)):
        return False
    operands = compute.operands
    if len(operands) != 2:
        return False
    a, b = operands[0], operands[1]
    first, second = args[0], args[1]
    if a == first and b == second:
        return True
    return commutative and a == second and b == first


def comparison(compare: ir.OpView) -> tuple[str, str | None]:
    """(direction, compare_type) of a stablehlo.compare; compare_type None if absent."""
    attributes = compare.attributes
    direction = _cached_value(attributes["comparison_direction"], _comparison_direction)
    if "compare_type" not in attributes:
        return direction, None
    return direction, _cached_value(attributes["compare_type"], _comparison_type)


def _comparison_direction(attr: ir.Attribute) -> str:
    return stablehlo.ComparisonDirectionAttr(attr).value


def _comparison_type(attr: ir.Attribute) -> str:
    return stablehlo.ComparisonTypeAttr(attr).value


LIBRARY_PATH_MARKERS = ("site-packages", "dist-packages")
_FILE_LOCATION = re.compile(r'"((?:[^"\\]|\\.)*)":(\d+):(\d+)')


# jaxlib 0.9 and 0.10 expose location kinds differently (see pool3d_pass.jax_compat).
from pool3d_pass.jax_compat import file_locations as _file_locations  # noqa: E402


def format_location(location: ir.Location, filename: str | None = None) -> str:
    """`file:line:col` of an op, for remarks; the MLIR text of the location if it has no file.

    JAX nests locations as name(callsite(callee at caller ...)); the innermost
    frame outside installed libraries (the user's model code) is the one shown,
    else the innermost frame. The parser names its buffer "-"; `filename`
    replaces that name.
    """
    frames = [(f.filename, f.start_line, f.start_col) for f in _file_locations(location)]
    if not frames:  # e.g. a diagnostic's location, which the bindings do not downcast
        frames = [(n, int(line), int(col)) for n, line, col in _FILE_LOCATION.findall(str(location))]
    if not frames:
        return str(location)
    user = [f for f in frames if not any(marker in f[0] for marker in LIBRARY_PATH_MARKERS)]
    name, line, col = (user or frames)[0]
    if name == "-" and filename is not None:
        name = filename
    return f"{name}:{line}:{col}"
