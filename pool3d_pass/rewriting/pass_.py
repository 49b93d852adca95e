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

Then, with a platform target whose binding has the forward-output call, a
second walk with one pattern:

* on `stablehlo.reduce_window`: a forward max pool left without a gradient
  (inference) becomes that call where the binding accepts its configuration
  (rewriting/inference.py); the others stay, with a remark.

The pass runs in any PassManager next to upstream passes (`add_pass`), or
directly on a module (`rewrite`) or on text (`rewrite_text`).
"""

from __future__ import annotations

from collections.abc import Callable

from jaxlib.mlir import ir, passmanager
from jaxlib.mlir._mlir_libs._mlir import rewrite as mlir_rewrite
from jaxlib.mlir.dialects import stablehlo

from pool3d_pass import environment, jax_compat
from pool3d_pass.bindings.registry import Binding, CallSignature, binding_for
from pool3d_pass.contract import FORWARD_OUTPUT, INDEX_TYPE
from pool3d_pass.ir_context import make_context
from pool3d_pass.matching import NoMatch, match_pool_gradient
from pool3d_pass.matching import ir_utils as u
from pool3d_pass.matching.forward import find_forward
from pool3d_pass.matching.forward_pool import is_max_pool, match_forward_pool
from pool3d_pass.matching.neutral_call import NeutralCall, read_neutral_call
from pool3d_pass.options import RECOMPUTE, PassOptions, pass_options
from pool3d_pass.report import FORWARD_ALONE, Miss, Rewrite, RewriteReport
from pool3d_pass.rewriting import emit
from pool3d_pass.rewriting.inference import replace_with_forward_output, signature_of
from pool3d_pass.rewriting.indices import SavedForward, build_from_indices, build_from_input, replace_forward
from pool3d_pass.rewriting.recompute import build_recompute
from pool3d_pass.rewriting.strategy import (
    BARE_INDICES,
    FORWARD_REPLACED,
    FUSED,
    Plan,
    StrategyChooser,
    binding_refusal,
)

PASS_NAME = "Pool3dMaxPoolBackward"
PASS_ARGUMENT = "pool3d-max-pool-backward"
PASS_DESCRIPTION = (
    "Rewrite StableHLO max-pool gradients (select_and_scatter GE/add), and their forward "
    "max pools, into the pool3d contract's custom calls (recompute or indices strategy); "
    "with a platform target, forward max pools without a gradient too (forward-output call)."
)

# The bindings' convention: a pattern returns a truthy value when it did NOT match.
_NO_MATCH = True
_MATCHED = False


class _PassRun:
    """State of one application of the patterns to one operation."""

    def __init__(self, options: PassOptions, binding: Binding | None):
        self.options = options
        self.binding = binding  # the target's, resolved once per pass (None: neutral, or no binding)
        self.emit = emit.for_run(options, binding)
        self.chooser = StrategyChooser(options, binding)
        self.report = RewriteReport(strategy=self.chooser.strategy)
        self.pending_folds: list[tuple[ir.OpView, ir.OpView | None]] = []
        self.saved_forwards: dict[ir.Operation, SavedForward] = {}
        self.forwards_alone: list[ir.Operation] = []  # reduce_windows the forward-output call replaced
        self.read_by_gradients: set[int] = set()  # (hashes of) forward reduce_windows a backward call reads

    def _serving(self) -> str:
        """", <platform> binding: <which kernels>" for a binding that says (Binding.describe), else ""."""
        if self.options.neutral or self.binding is None or self.binding.describe is None:
            return ""
        return f", {self.binding.platform} binding: {self.binding.describe()}"

    def patterns(self) -> mlir_rewrite.FrozenRewritePatternSet:
        patterns = mlir_rewrite.RewritePatternSet()
        patterns.add(stablehlo.SelectAndScatterOp, self.rewrite_pool_gradient)
        patterns.add(stablehlo.SliceOp, self.fold_slice_of_created_pad)
        if not self.options.neutral:
            patterns.add(stablehlo.CustomCallOp, self.bind_neutral_call)
        return patterns.freeze()

    def rewrite_pool_gradient(self, op: ir.OpView, rewriter) -> bool:
        self.report.candidates += 1
        try:
            match = match_pool_gradient(op)
            if not self.options.neutral and self.binding is None:
                raise NoMatch(f"no pool3d binding for platform '{self.options.target}'; nothing is rewritten there")
            forward = find_forward(match)
            plan = self.chooser.plan(match, has_forward=forward is not None)
        except NoMatch as reason:
            self.report.add(Miss(u.format_location(op.location, self.options.filename), str(reason)))
            return _NO_MATCH

        grad_input = self.build(match, forward, plan)
        self.report.rewritten += 1
        self.report.add(Rewrite(u.format_location(op.location, self.options.filename),
                                _describe(match, plan, forward) + self._serving()))

        padding_chain = _padding_chain(op, match)
        if match.slice is not None:
            low = [lo for lo, _ in match.window.padding]
            high = [hi for _, hi in match.window.padding]
            with ir.InsertionPoint(op.operation), op.location:
                padded = stablehlo.PadOp(grad_input, match.zero, low, high, [0] * len(low))
            self.pending_folds.append((padded, padding_chain))
            rewriter.replace_op(op, [padded.result])
            return _MATCHED

        rewriter.replace_op(op, [grad_input])
        _erase_if_unused(rewriter, padding_chain)
        _erase_if_unused(rewriter, u.defining_op(match.zero))
        return _MATCHED

    def forward_alone_patterns(self) -> mlir_rewrite.FrozenRewritePatternSet | None:
        """The second walk's: forward max pools left without a gradient (rewriting/inference.py)."""
        if self.options.neutral or self.binding is None:
            return None
        if not self.binding.implements(FORWARD_OUTPUT, partitioned=self.options.partitioned):
            return None
        patterns = mlir_rewrite.RewritePatternSet()
        patterns.add(stablehlo.ReduceWindowOp, self.rewrite_forward_alone)
        return patterns.freeze()

    def rewrite_forward_alone(self, op: ir.OpView, rewriter) -> bool:
        if hash(op.operation) in self.read_by_gradients or not is_max_pool(op):
            return _NO_MATCH
        location = u.format_location(op.location, self.options.filename)
        try:
            pool = match_forward_pool(op)
            reason = binding_refusal(self.binding, self.options.target, signature_of(pool), self.options.mesh)
            if reason is None:  # under auto, the binding's own rule of where it pays
                reason = self.chooser.auto_reason(signature_of(pool), pool.geometry.input_shape)
            if reason is not None:
                raise NoMatch(reason)
        except NoMatch as reason:
            self.report.add(Miss(location, str(reason), FORWARD_ALONE))
            return _NO_MATCH
        replace_with_forward_output(pool, self.emit)
        g = pool.geometry
        self.report.forward_alone += 1
        self.report.add(Rewrite(location, f"{g.data_format} kernel_size={list(g.kernel_size)} stride={list(g.stride)} "
                                          f"padding={list(g.padding)}, {pool.element_type}, forward-output call"
                                          + self._serving(),
                                FORWARD_ALONE))
        self.forwards_alone.append(op.operation)  # erased after the walk, with what only it used
        return _MATCHED

    def build(self, match, forward: ir.OpView | None, plan: Plan) -> ir.Value:
        """Emit the replacement `plan` names; return the gradient w.r.t. the unpadded input."""
        if plan.kind == FORWARD_REPLACED:
            saved = self.saved_forwards.get(forward.operation)
            if saved is None:
                saved = self.saved_forwards[forward.operation] = replace_forward(match, forward, self.emit)
                self.report.forward_replaced += 1
            assert saved.geometry == match.geometry, (saved.geometry, match.geometry)
            self.report.from_indices += 1
            return build_from_indices(match, saved, self.emit)
        if plan.kind in (FUSED, BARE_INDICES):
            self.report.from_input += 1
            return build_from_input(match, self.emit, fused=plan.kind == FUSED)
        if forward is None:
            self.report.forward_inserted += 1
        else:
            self.report.forward_reused += 1
        grad_input, read = build_recompute(match, None if forward is None else forward.results[0], self.emit)
        self.read_by_gradients.add(hash(u.defining_op(read).operation))  # a gradient's forward: not "alone"
        return grad_input

    def erase_replaced_forwards(self) -> None:
        """The forwards the forward call replaced, now without uses, and what only they used."""
        _erase_unused_chains(self.saved_forwards)

    def bind_neutral_call(self, op: ir.OpView, rewriter) -> bool:
        call = read_neutral_call(op)
        if call is None:
            return _NO_MATCH
        location = u.format_location(op.location, self.options.filename)
        target = self.options.target
        if self.binding is None:
            reason = f"no pool3d binding for platform '{target}'"
        else:
            reason = binding_refusal(self.binding, target, _signature_of(op, call), self.options.mesh)
        if reason is not None:
            self.report.add(Miss(location, f"neutral call left unbound: {reason}"))
            return _NO_MATCH
        with ir.InsertionPoint(op.operation), op.location:
            results = self.emit(
                call.call,
                list(op.operands),
                [r.type for r in op.results],
                kernel_size=call.kernel_size,
                stride=call.stride,
                padding=call.padding,
                data_format=call.data_format,
                output_format=call.output_format,
            )
        rewriter.replace_op(op, results)
        self.report.bound += 1
        self.report.add(Rewrite(location, f"neutral call bound to the {target} binding" + self._serving()))
        return _MATCHED

    def fold_slice_of_created_pad(self, op: ir.OpView, rewriter) -> bool:
        if not self.pending_folds:  # most slices: no pad of ours is waiting
            return _NO_MATCH
        producer = u.defining_op(u.through_open_constraints(op.operands[0]))
        if producer is None:
            return _NO_MATCH
        for index, (padded, original_pad) in enumerate(self.pending_folds):
            if padded.operation == producer.operation:
                del self.pending_folds[index]
                between = u.defining_op(op.operands[0])  # padded, or open constraints of it
                rewriter.replace_op(op, [padded.operands[0]])
                _erase_if_unused(rewriter, between)
                _erase_if_unused(rewriter, original_pad)
                return _MATCHED
        return _NO_MATCH


def _signature_of(op: ir.OpView, call: NeutralCall) -> CallSignature:
    """The CallSignature of a neutral call; its float operand and result types stand for
    (grad_output, input, output), so that mixed element types are refused."""
    floats = [str(ir.ShapedType(v.type).element_type) for v in (*op.operands, *op.results)]
    floats = [t for t in floats if t != INDEX_TYPE]
    return CallSignature(
        *(floats * 3)[:3], call.kernel_size, call.stride, call.padding, call.data_format, call.output_format, call.call
    )


def _describe(match, plan: Plan, forward) -> str:
    g = match.geometry
    parts = [
        f"{g.data_format} kernel_size={list(g.kernel_size)} stride={list(g.stride)} padding={list(g.padding)}",
        f"{match.element_type}",
        {
            FORWARD_REPLACED: "indices strategy: forward max-pool replaced by the forward call, gradient from its indices",
            FUSED: "indices strategy: no forward max-pool before it in its block, one fused call from the input",
            BARE_INDICES: "indices strategy: no forward max-pool before it in its block, forward call inserted, "
            "gradient from its indices",
            RECOMPUTE: "forward max-pool reused" if forward is not None else "forward max-pool inserted",
        }[plan.kind],
    ]
    if plan.note:
        parts.append(f"recompute strategy: {plan.note}")
    if g.has_remainder:
        parts.append(f"asymmetric padding remainder low={list(g.remainder_low)} high={list(g.remainder_high)} kept as -inf pad")
    return ", ".join(parts)


def _padding_chain(op: ir.OpView, match) -> ir.OpView | None:
    """What produces the select_and_scatter's operand and dies with it: the -inf pad,
    or the open sharding constraints around it (erasing those erases the pad too)."""
    producer = u.defining_op(op.operands[0])
    return producer if match.pad is not None and u.is_open_constraint(producer) else match.pad


def _has_uses(value: ir.Value) -> bool:
    return any(True for _ in value.uses)


def _erase_if_unused(rewriter, op: ir.OpView | None) -> None:
    """Erase `op` if nothing uses it, then the constants and open sharding constraints
    (and, through those, the pads) only it used."""
    if op is None or any(_has_uses(result) for result in op.results):
        return
    operands = list(op.operands)
    through_constraint = u.is_open_constraint(op)
    jax_compat.erase_op(rewriter, op)
    for operand in operands:
        producer = u.defining_op(operand)
        if u.op_name(producer) == "stablehlo.constant" or u.is_open_constraint(producer) or (
            through_constraint and u.op_name(producer) == "stablehlo.pad"
        ):
            _erase_if_unused(rewriter, producer)


_ERASABLE_PRODUCERS = ("stablehlo.constant", "stablehlo.broadcast_in_dim", "stablehlo.pad")


def _erase_unused_chains(roots) -> None:
    """Erase each root without uses, then the side-effect-free producers only erased ops used."""
    worklist, erased = list(roots), set()  # erased: hashes taken before erasing (no op is created meanwhile)
    while worklist:
        op = worklist.pop()
        if hash(op) in erased or any(_has_uses(result) for result in op.results):
            continue
        producers = [u.defining_op(operand) for operand in op.operands]
        erased.add(hash(op))
        op.erase()
        worklist.extend(p.operation for p in producers if u.op_name(p) in _ERASABLE_PRODUCERS)


def _run_callable(on_report: Callable[[RewriteReport], None] | None, options: PassOptions, binding: Binding | None):
    def run(op: ir.Operation, pass_) -> None:
        state = _PassRun(options, binding)
        try:
            with u.attribute_values_cached(), environment.applying(options):
                mlir_rewrite.walk_and_apply_patterns(op, state.patterns())
                state.erase_replaced_forwards()
                forward_alone = state.forward_alone_patterns()
                if forward_alone is not None:
                    mlir_rewrite.walk_and_apply_patterns(op, forward_alone)
                    _erase_unused_chains(state.forwards_alone)
        except Exception:  # a bug in a pattern: fail the pass rather than emit half-rewritten IR
            pass_.signal_pass_failure()
            raise
        if state.pending_folds:
            # A slice the matcher accepted was not visited; never expected.
            pass_.signal_pass_failure()
        if on_report is not None:
            on_report(state.report)

    return run


def resolve_binding(options: PassOptions) -> Binding | None:
    """The binding of `options.target` with its packages checked (None: neutral, or no binding).

    A binding whose packages are missing raises ImportError, naming them.
    """
    binding = None if options.neutral else binding_for(options.target)
    if binding is not None:
        binding.require()
    return binding


def add_pass(
    pm: passmanager.PassManager,
    options: PassOptions | None = None,
    *,
    on_report: Callable[[RewriteReport], None] | None = None,
    binding: Binding | None = None,
    **keywords,
) -> None:
    """Append the pass to `pm`; `on_report` receives each run's report.

    `options` (a `PassOptions`), or its fields as keywords: `target` is
    "neutral" (the platform-neutral calls of docs/contract.md) or a platform
    with a binding ("cpu", "neuron", ...), whose binding is spliced in; `mesh`
    (a `jax.sharding.Mesh` of the program's devices) asks for the binding's
    partitionable version, for programs compiled for several devices;
    `strategy` is "auto" (the platform's choice; recompute for neutral
    output), "recompute" or "indices" (see rewriting/strategy.py); `filename`
    names the input in locations. A binding whose packages are missing raises
    ImportError here, naming them. `binding`: the target's binding when the
    caller has resolved it already (`resolve_binding`).
    """
    options = pass_options(options, **keywords)
    if binding is None:
        binding = resolve_binding(options)
    pm.add(
        _run_callable(on_report, options, binding),
        name=PASS_NAME,
        argument=PASS_ARGUMENT,
        description=PASS_DESCRIPTION,
    )


def rewrite(
    module: ir.Module, options: PassOptions | None = None, *, binding: Binding | None = None, **keywords
) -> RewriteReport:
    """Rewrite every max-pool gradient in `module` in place; the module is verified after.

    `options`, or its fields as keywords (`target=`, `strategy=`, `mesh=`,
    `filename=`): see `add_pass`.
    """
    options = pass_options(options, **keywords)
    total = RewriteReport()
    with module.context:
        pm = passmanager.PassManager("builtin.module")
        add_pass(pm, options, on_report=total.merge, binding=binding)
        pm.run(module.operation)
    return total


def rewrite_text(text: str, options: PassOptions | None = None, **keywords) -> tuple[str, RewriteReport]:
    """Parse `text`, rewrite it, and return (printed module, report); options as in `rewrite`."""
    options = pass_options(options, **keywords)
    with make_context():
        from pool3d_pass.safe_parse import parse_module  # input limits; parses on a large stack

        module = parse_module(text)
        report = rewrite(module, options)
        return str(module), report
