"""What a StableHLO program computes per the StableHLO spec, for max-pool gradients.

``spec_outputs(module_text, args)`` returns the results of ``main(*args)`` as
the spec defines them, run on XLA:CPU (``tests/xla_runner.run_stablehlo``),
with every ``stablehlo.select_and_scatter`` that has padding in its ATTRIBUTE
first turned into a form XLA:CPU evaluates as the spec says.

Why: the spec selects, per window, over the VALID (non-padding) positions in
lexicographic order (``reduce_window_without_init`` over the window's valid
elements), so with a ``compare GE`` select the FIRST maximum wins and padding
is never selected. XLA:CPU's own select_and_scatter with attribute padding
sometimes gives a tied window's gradient to a later maximum (seen e.g. at k2
s2 with padding (1,1) or (0,1), on inputs with ties); with the padding zero
(JAX's CPU/GPU form: an explicit pad, op padding 0, a slice) XLA:CPU walks
the window in order and applies the select region as written. So the oracle
uses that form:

    p = stablehlo.pad(x, MARK, low, high, interior = 0)
    r = select_and_scatter(p, source, init) {padding = 0, same window/strides}
          select(a, b) = is_mark(b) or (not is_mark(a) and ORIGINAL_SELECT(a, b))
          scatter      = the original scatter region
    result = stablehlo.slice(r, low, low + shape(x))

``MARK`` is a NaN with a payload no arithmetic produces (bit patterns in
``MARK_BITS``), recognised in the select region by its bits
(``bitcast_convert`` + integer ``compare EQ``), so a padding position is never
kept over a real element and a real element is always taken over padding:
exactly "padding is never selected", for every select region (GE, GT, LE...)
and every real value, -inf and NaN included. bf16 ops run in f32 (XLA:CPU
widens bf16 and canonicalises NaNs when narrowing, which would erase the mark):
values and selection are exact, overlapping windows' sums are rounded to bf16
once instead of after every add (identical whenever the sums are exact, as
with small-integer gradients). Integer ops (i8..i32, ui8..ui32) run in
i64 / ui64 with INT64_MIN / UINT64_MAX as the mark; i64, ui64, i1 and complex
types are refused (ValueError). The one input a float mark cannot handle is
a real NaN with exactly the mark's bits (never produced by arithmetic, which
yields XLA's canonical NaN). (Padding with -inf and mapping real -inf to the
lowest finite value, the simpler recipe, is exact for GE except for a window
holding both -inf and the lowest finite value; the mark has no such
exception.) A window with no valid position at all (padding >= window)
selects a padded position, whose contribution the slice drops.

Everything else in the program (including JAX's explicit-pad form, whose -inf
padding IS real data for the op) runs unchanged. The only assumption about
XLA:CPU is that it evaluates a select_and_scatter WITHOUT attribute padding
as the spec says; ``select_and_scatter_reference`` (pure numpy, independent
of XLA and of the pass) checks that in tests/numerics/test_spec_oracle.py.

``spec_outputs`` is imported by other test modules (CLI fuzzing): keep the
name and signature.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from oracles.xla_runner import run_stablehlo

__all__ = ["spec_outputs", "spec_text", "select_and_scatter_reference", "MARK_BITS"]

# Padding marks: quiet NaNs with unusual payloads and the sign bit set (bf16 runs in f32).
MARK_BITS = {
    "f64": (64, 0xFFF8_DEAD_BEEF_0D0D),
    "f32": (32, 0xFFC0_D0D0),
    "f16": (16, 0xFE6D),
    "i64": (64, 0x8000_0000_0000_0000),  # the widened signed integers' mark: INT64_MIN
    "ui64": (64, 0xFFFF_FFFF_FFFF_FFFF),  # the widened unsigned integers' mark: UINT64_MAX
}
_WIDENED_INTEGERS = ("i8", "i16", "i32", "ui8", "ui16", "ui32")


def _ir():
    from jax._src.interpreters import mlir as jax_mlir
    from jaxlib.mlir import ir
    from jaxlib.mlir.dialects import stablehlo

    return jax_mlir, ir, stablehlo


def _padding_pairs(op, rank: int) -> list[tuple[int, int]]:
    if "padding" not in op.attributes:
        return [(0, 0)] * rank
    flat = np.asarray(op.attributes["padding"]).reshape(-1).tolist()
    return list(zip(flat[0::2], flat[1::2]))


def _widen_regions(new, ir, narrow, wide) -> None:
    """Retype every ``tensor<narrow>`` block argument and result inside `new`'s regions to `wide`."""
    narrow_t, wide_t = ir.RankedTensorType.get([], narrow), ir.RankedTensorType.get([], wide)
    for region in new.regions:
        for block in region.blocks:
            for arg in block.arguments:
                if arg.type == narrow_t:
                    arg.set_type(wide_t)
            for inner in block.operations:
                if inner.operation.name == "stablehlo.constant":
                    raise ValueError(f"spec oracle: {narrow} select_and_scatter region with a constant")
                for result in inner.results:
                    if result.type == narrow_t:
                        result.set_type(wide_t)


def _rewrite_one(op, ir, stablehlo) -> None:
    operand, source, init = op.operands
    tensor = ir.RankedTensorType(operand.type)
    rank, shape, elem = tensor.rank, list(tensor.shape), tensor.element_type
    padding = _padding_pairs(op, rank)
    if all(p == (0, 0) for p in padding):
        return
    if any(lo < 0 or hi < 0 for lo, hi in padding):
        raise ValueError("negative select_and_scatter padding")
    result_type = ir.RankedTensorType(op.results[0].type)
    # XLA:CPU computes bf16 through f32 and canonicalises NaNs on the way back
    # (the mark's payload is lost), so bf16 runs in f32: exact values, the
    # scatter's sums rounded to bf16 once at the end.
    # Integers (i8..i32, ui8..ui32) run in i64, where INT64_MIN marks padding
    # (no narrower value reaches it); their sums wrap back on the final convert.
    integer = isinstance(elem, ir.IntegerType) and str(elem) in _WIDENED_INTEGERS
    widen = str(elem) == "bf16" or integer
    if integer:  # unsigned stays unsigned (its compares are UNSIGNED)
        unsigned = str(elem).startswith("ui")
        work = ir.IntegerType.get_unsigned(64) if unsigned else ir.IntegerType.get_signless(64)
    else:
        work = ir.F32Type.get() if widen else elem
    elem_name = str(work)
    if elem_name not in MARK_BITS:
        raise ValueError(f"spec oracle: no padding mark for element type {elem}")
    width, bits = MARK_BITS[elem_name]
    int_type = work if integer else ir.IntegerType.get_signless(width)
    scalar_int = ir.RankedTensorType.get([], int_type)
    scalar = ir.RankedTensorType.get([], work)
    low = [lo for lo, _ in padding]
    high = [hi for _, hi in padding]

    def mark_int():
        signed = bits - (1 << width) if bits >= 1 << (width - 1) else bits
        return stablehlo.ConstantOp(ir.DenseElementsAttr.get_splat(
            scalar_int, ir.IntegerAttr.get(int_type, signed))).result

    def to_work(value):
        if not widen:
            return value
        t = ir.RankedTensorType(value.type)
        return stablehlo.ConvertOp(ir.RankedTensorType.get(list(t.shape), work), value).result

    with ir.InsertionPoint(op.operation), op.location:
        mark = mark_int() if integer else stablehlo.BitcastConvertOp(scalar, mark_int()).result
        padded = stablehlo.PadOp(to_work(operand), mark, low, high, [0] * rank).result
        new_source, new_init = to_work(source), to_work(init)
        new = op.operation.clone()  # inserted at the insertion point, before `op`
        new.operands[0] = padded
        new.operands[1] = new_source
        new.operands[2] = new_init
        new.attributes["padding"] = ir.DenseElementsAttr.get(np.zeros((rank, 2), np.int64))
        new.results[0].set_type(ir.RankedTensorType.get(
            [n + lo + hi for n, lo, hi in zip(shape, low, high)], work if widen else result_type.element_type))
        if widen:
            _widen_regions(new, ir, elem, work)
        cut = stablehlo.SliceOp(new.results[0], low, [lo + n for lo, n in zip(low, shape)], [1] * rank).result
        if widen:
            cut = stablehlo.ConvertOp(result_type, cut).result

    # select(a, b) := is_mark(b) or (not is_mark(a) and original(a, b))
    block = new.regions[0].blocks[0]
    ops = list(block.operations)
    terminator = ops[-1]
    a, b = block.arguments
    with ir.InsertionPoint(terminator), op.location:
        original = terminator.operands[0]
        mk = mark_int()
        is_mark = [
            stablehlo.CompareOp(v_int, mk, stablehlo.ComparisonDirectionAttr.get("EQ")).result
            for v_int in ((v if integer else stablehlo.BitcastConvertOp(scalar_int, v).result) for v in (a, b))
        ]
        a_real = stablehlo.NotOp(is_mark[0]).result
        keep = stablehlo.OrOp(is_mark[1], stablehlo.AndOp(a_real, original).result).result
    terminator.operands[0] = keep

    op.results[0].replace_all_uses_with(cut)
    op.operation.erase()


def spec_text(module_text: str) -> str:
    """``module_text`` with every attribute-padded select_and_scatter in the explicit marked form."""
    jax_mlir, ir, stablehlo = _ir()
    with jax_mlir.make_ir_context(), ir.Location.unknown():
        module = ir.Module.parse(module_text)
        found = []

        def collect(op):
            if op.operation.name == "stablehlo.select_and_scatter":
                found.append(op.operation.opview)
            return ir.WalkResult.ADVANCE

        module.operation.walk(collect)
        found = [op for op in found if any(p != (0, 0) for p in _padding_pairs(
            op, ir.RankedTensorType(op.operands[0].type).rank))]
        if not found:  # already the spec's form: the same text (and XLA compile cache entry)
            return module_text
        for op in found:
            _rewrite_one(op, ir, stablehlo)
        if not module.operation.verify():  # pragma: no cover - verify raises on failure
            raise ValueError("spec oracle produced an invalid module")
        return str(module)


def spec_outputs(module_text: str, args: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The results of ``main(*args)`` per the StableHLO spec (see the module docstring)."""
    return run_stablehlo(spec_text(module_text), args)


# --------------------------------------------------------------------------
# Independent reference: numpy, no XLA, no MLIR
# --------------------------------------------------------------------------


def select_and_scatter_reference(operand, source, window, strides, padding, init=0.0):
    """``select_and_scatter`` with select ``compare GE`` (FLOAT) and scatter ``add``, per the spec.

    For each window (any rank) the valid positions are visited in
    lexicographic order; the selected element starts at the first and moves to
    the current one when ``not (selected >= current)`` (so the first maximum
    wins; a NaN hands the selection to the next element). Padding positions
    are not visited. Contributions are added in float64 in row-major window
    order and rounded once to the operand's dtype (exact for tie-free
    non-overlapping windows and for small integers).
    """
    x = np.asarray(operand)
    g = np.asarray(source)
    rank = x.ndim
    out = np.full(x.shape, init, dtype=np.float64)
    xv = x.astype(np.float64)
    gv = g.astype(np.float64)
    for w in itertools.product(*(range(n) for n in g.shape)):
        starts = [w[d] * strides[d] - padding[d][0] for d in range(rank)]
        selected = None
        for tap in itertools.product(*(range(k) for k in window)):
            pos = tuple(starts[d] + tap[d] for d in range(rank))
            if any(p < 0 or p >= x.shape[d] for d, p in enumerate(pos)):
                continue
            if selected is None or not (xv[selected] >= xv[pos]):
                selected = pos
        if selected is not None:
            out[selected] += gv[w]
    return out.astype(x.dtype)
