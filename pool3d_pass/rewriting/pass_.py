"""The pool3d MLIR pass: Python rewrite patterns applied by a Python-defined pass.

Three patterns, applied by `walk_and_apply_patterns` (a single walk, no folding,
no dead-code elimination, so nothing the pass did not mean to touch changes):

* on `stablehlo.select_and_scatter`: match a max-pool gradient and replace it
  with the kernel call. JAX's explicit-pad form leaves `slice(pad(...))`
  behind, because the walk driver lets a pattern erase only ops it has
  already visited and the slice comes later; so the op is replaced by a zero
  pad of the new gradient, remembered here, and
* on `stablehlo.slice`: a slice that exactly undoes one of those remembered
  pads is folded away together with the pad and, once unused, the original
  -inf pad;
* on `stablehlo.custom_call`, only with a platform target: a neutral call left
  by an earlier run (`pool3d-opt` with the default target) is bound to the
  platform's binding, so neutral IR can be bound later.

The pass runs in any PassManager next to upstream passes (`add_pass`), or
directly on a module (`rewrite`) or on text (`rewrite_text`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from jaxlib.mlir import ir, passmanager
from jaxlib.mlir._mlir_libs._mlir import rewrite as mlir_rewrite
from jaxlib.mlir.dialects import stablehlo

from pool3d_pass.bindings.registry import NEUTRAL, Binding, CallSignature, binding_for
from pool3d_pass.ir_context import make_context
from pool3d_pass.matching import NoMatch, match_pool_gradient
from pool3d_pass.matching import ir_utils as u
from pool3d_pass.matching.forward import find_forward_output
from pool3d_pass.matching.neutral_call import read_neutral_call
from pool3d_pass.report import Miss, Rewrite, RewriteReport
from pool3d_pass.rewriting.max_pool_backward import build_replacement
from pool3d_pass.rewriting.splice import call_binding

PASS_NAME = "Pool3dMaxPoolBackward"
PASS_ARGUMENT = "pool3d-max-pool-backward"
PASS_DESCRIPTION = (
    "Rewrite StableHLO max-pool gradients (select_and_scatter GE/add) into one "
    "@pool3d.max_pooling_3d_backward custom call each."
)

# The bindings' convention: a pattern returns a truthy value when it did NOT match.
_NO_MATCH = True
_MATCHED = False


class _PassRun:
    """State of one application of the patterns to one operation."""

    def __init__(self, filename: str | None, target: str, mesh=None):
        self.filename = filename
        self.target = target
        self.mesh = mesh
        self.binding: Binding | None = None if target == NEUTRAL else binding_for(target)
        self.report = RewriteReport()
        self.pending_folds: list[tuple[ir.OpView, ir.OpView | None]] = []

    def patterns(self) -> mlir_rewrite.FrozenRewritePatternSet:
        patterns = mlir_rewrite.RewritePatternSet()
        patterns.add(stablehlo.SelectAndScatterOp, self.rewrite_pool_gradient)
        patterns.add(stablehlo.SliceOp, self.fold_slice_of_created_pad)
        if self.target != NEUTRAL:
            patterns.add(stablehlo.CustomCallOp, self.bind_neutral_call)
        return patterns.freeze()

    def rewrite_pool_gradient(self, op: ir.OpView, rewriter) -> bool:
        self.report.candidates += 1
        try:
            match = match_pool_gradient(op)
            kernel_call = self.kernel_call(match)
        except NoMatch as reason:
            self.report.add(Miss(u.format_location(op.location, self.filename), str(reason)))
            return _NO_MATCH

        forward_output = find_forward_output(match)
        if forward_output is None:
            self.report.forward_inserted += 1
        else:
            self.report.forward_reused += 1
        grad_input = build_replacement(match, forward_output, **kernel_call)
        self.report.rewritten += 1
        self.report.add(Rewrite(u.format_location(op.location, self.filename), _describe(match, forward_output)))

        if match.slice is not None:
            low = [lo for lo, _ in match.window.padding]
            high = [hi for _, hi in match.window.padding]
            with ir.InsertionPoint(op.operation), op.location:
                padded = stablehlo.PadOp(grad_input, match.zero, low, high, [0] * len(low))
            self.pending_folds.append((padded, match.pad))
            rewriter.replace_op(op, [padded.result])
            return _MATCHED

        rewriter.replace_op(op, [grad_input])
        _erase_if_unused(rewriter, match.pad)
        _erase_if_unused(rewriter, u.defining_op(match.zero))
        return _MATCHED

    def bind_neutral_call(self, op: ir.OpView, rewriter) -> bool:
        call = read_neutral_call(op)
        if call is None:
            return _NO_MATCH
        dtypes = [str(ir.ShapedType(v.type).element_type) for v in op.operands]
        signature = CallSignature(*dtypes, call.kernel_size, call.stride, call.padding, call.data_format, call.output_format)
        location = u.format_location(op.location, self.filename)
        reason = None
        if self.binding is None:
            reason = f"no pool3d binding for platform '{self.target}'"
        elif (reason := self.binding.unsupported(signature)) is None and self.mesh is not None and self.binding.partitioned_function_path is None:
            reason = f"{self.target} binding cannot be partitioned over {self.mesh.size} devices"
        if reason is not None:
            self.report.add(Miss(location, f"neutral call left unbound: {reason}"))
            return _NO_MATCH
        with ir.InsertionPoint(op.operation), op.location:
            grad_input = call_binding(
                self.binding,
                grad_output=op.operands[0],
                input=op.operands[1],
                output=op.operands[2],
                kernel_size=call.kernel_size,
                stride=call.stride,
                padding=call.padding,
                data_format=call.data_format,
                output_format=call.output_format,
                mesh=self.mesh,
            )
        rewriter.replace_op(op, [grad_input])
        self.report.bound += 1
        self.report.add(Rewrite(location, f"neutral call bound to the {self.target} binding"))
        return _MATCHED

    def kernel_call(self, match) -> dict:
        """Keyword arguments for build_replacement: the neutral call, or the target's binding."""
        if self.target == NEUTRAL:
            return {}
        if self.binding is None:
            raise NoMatch(f"no pool3d binding for platform '{self.target}'; nothing is rewritten there")
        reason = self.binding.unsupported(_signature(match))
        if reason is not None:
            raise NoMatch(f"{self.target} binding: {reason}")
        if self.mesh is not None and self.binding.partitioned_function_path is None:
            raise NoMatch(f"{self.target} binding cannot be partitioned over {self.mesh.size} devices")
        return {"kernel_call": functools.partial(call_binding, self.binding, mesh=self.mesh)}

    def fold_slice_of_created_pad(self, op: ir.OpView, rewriter) -> bool:
        producer = u.defining_op(op.operands[0])
        if producer is None:
            return _NO_MATCH
        for index, (padded, original_pad) in enumerate(self.pending_folds):
            if padded.operation == producer.operation:
                del self.pending_folds[index]
                rewriter.replace_op(op, [padded.operands[0]])
                _erase_if_unused(rewriter, padded)
                _erase_if_unused(rewriter, original_pad)
                return _MATCHED
        return _NO_MATCH


def _signature(match) -> CallSignature:
    g = match.geometry
    dtype = str(match.element_type)
    return CallSignature(dtype, dtype, dtype, g.kernel_size, g.stride, g.padding, g.data_format, g.data_format)


def _describe(match, forward_output) -> str:
    g = match.geometry
    parts = [
        f"{g.data_format} kernel_size={list(g.kernel_size)} stride={list(g.stride)} padding={list(g.padding)}",
        f"{match.element_type}",
        "forward max-pool reused" if forward_output is not None else "forward max-pool inserted",
    ]
    if g.has_remainder:
        parts.append(f"asymmetric padding remainder low={list(g.remainder_low)} high={list(g.remainder_high)} kept as -inf pad")
    return ", ".join(parts)


def _has_uses(value: ir.Value) -> bool:
    return any(True for _ in value.uses)


def _erase_if_unused(rewriter, op: ir.OpView | None) -> None:
    """Erase `op` if nothing uses it, then the constants only it used."""
    if op is None or any(_has_uses(result) for result in op.results):
        return
    operands = list(op.operands)
    rewriter.erase_op(op)
    for operand in operands:
        producer = u.defining_op(operand)
        if u.op_name(producer) == "stablehlo.constant":
            _erase_if_unused(rewriter, producer)


def _run_callable(
    on_report: Callable[[RewriteReport], None] | None, filename: str | None, target: str, mesh
):
    def run(op: ir.Operation, pass_) -> None:
        state = _PassRun(filename, target, mesh)
        try:
            mlir_rewrite.walk_and_apply_patterns(op, state.patterns())
        except Exception:  # a bug in a pattern: fail the pass rather than emit half-rewritten IR
            pass_.signal_pass_failure()
            raise
        if state.pending_folds:
            # A slice the matcher accepted was not visited; never expected.
            pass_.signal_pass_failure()
        if on_report is not None:
            on_report(state.report)

    return run


def add_pass(
    pm: passmanager.PassManager,
    *,
    on_report: Callable[[RewriteReport], None] | None = None,
    filename: str | None = None,
    target: str = NEUTRAL,
    mesh=None,
) -> None:
    """Append the pass to `pm`; `on_report` receives each run's report.

    `target` is "neutral" (the platform-neutral call of docs/contract.md) or a
    platform with a binding ("cpu", "neuron", ...), whose binding is spliced in.
    A binding whose packages are missing raises ImportError here, naming them.
    `mesh` (a `jax.sharding.Mesh` of the program's devices) asks for the
    binding's partitionable version, for programs compiled for several devices.
    """
    binding = binding_for(target)
    if binding is not None:
        binding.require()
    pm.add(
        _run_callable(on_report, filename, target, mesh),
        name=PASS_NAME,
        argument=PASS_ARGUMENT,
        description=PASS_DESCRIPTION,
    )


def rewrite(
    module: ir.Module, *, target: str = NEUTRAL, filename: str | None = None, mesh=None
) -> RewriteReport:
    """Rewrite every max-pool gradient in `module` in place; the module is verified after."""
    total = RewriteReport()
    with module.context:
        pm = passmanager.PassManager("builtin.module")
        add_pass(pm, on_report=total.merge, filename=filename, target=target, mesh=mesh)
        pm.run(module.operation)
    return total


def rewrite_text(
    text: str, *, target: str = NEUTRAL, filename: str | None = None
) -> tuple[str, RewriteReport]:
    """Parse `text`, rewrite it, and return (printed module, report)."""
    with make_context():
        module = ir.Module.parse(text)
        report = rewrite(module, target=target, filename=filename)
        return str(module), report
