"""The pool3d pass's rewrite patterns and the state one application of them keeps.

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

The pass that applies them (max_pool_backward.py) is the public API; what the patterns
leave without uses is erased by cleanup.py, and their remarks are written by
remarks.py.
"""

from __future__ import annotations

from jaxlib.mlir import ir
from jaxlib.mlir._mlir_libs._mlir import rewrite as mlir_rewrite
from jaxlib.mlir.dialects import stablehlo

from pool3d_pass.bindings.registry import Binding, CallSignature
from pool3d_pass.contract import FORWARD_OUTPUT, INDEX_TYPE, SUPPORTED_DTYPES
from pool3d_pass.ir.constraints import through_open_constraints
from pool3d_pass.ir.locations import format_location
from pool3d_pass.ir.ops import defining_op, op_name
from pool3d_pass.matching import NoMatch, match_pool_gradient
from pool3d_pass.matching.forward import find_forward
from pool3d_pass.matching.forward_pool import is_max_pool, match_forward_pool
from pool3d_pass.matching.neutral_call import NeutralCall, read_neutral_call
from pool3d_pass.options import PassOptions, binding_settings
from pool3d_pass.report import FORWARD_ALONE, FORWARD_OF_GRADIENT, NEUTRAL_CALL, Miss, Rewrite, RewriteReport
from pool3d_pass.rewriting import cleanup, remarks
from pool3d_pass.rewriting.indices import SavedForward, build_from_indices, build_from_input, replace_forward
from pool3d_pass.rewriting.inference import replace_with_forward_output, signature_of
from pool3d_pass.rewriting.recompute import build_recompute
from pool3d_pass.rewriting.strategy import (
    BARE_INDICES,
    FORWARD_REPLACED,
    FUSED,
    Plan,
    SpeedRule,
    StrategyChooser,
    binding_refusal,
    refusal_of,
)
from pool3d_pass.splicing import PerShardCode, emitter

# The bindings' convention: a pattern returns a truthy value when it did NOT match.
_NO_MATCH = True
_MATCHED = False


class PassRun:
    """State of one application of the patterns to one operation."""

    def __init__(self, options: PassOptions, binding: Binding | None, spliced: list | None = None):
        self.options = options
        self.binding = binding  # the target's, resolved once per pass (None: neutral, or no binding)
        # what the binding reads beyond each call (its option, else its environment variable), resolved
        # once: handed to the binding with every call it lowers, and to its speed rule and remark
        self.settings = binding_settings(options)
        # which code runs per shard (a shard_map body), for the emitter and the remarks
        self.per_shard = PerShardCode() if options.partitioned and not options.neutral else None
        self.emit = emitter(options, binding, self.settings, self.per_shard, spliced)
        self.chooser = StrategyChooser(options, binding, self.settings)
        self.report = RewriteReport(strategy=self.chooser.strategy)
        self.pending_folds: list[tuple[ir.OpView, ir.OpView | None]] = []
        self.saved_forwards: dict[ir.Operation, SavedForward] = {}
        self.forwards_alone: list[ir.Operation] = []  # reduce_windows the forward-output call replaced
        self.read_by_gradients: set[int] = set()  # (hashes of) forward reduce_windows a backward call reads
        # Gradients left as they were, and bound neutral calls: their forwards are no inference pools (remarks)
        self.unrewritten_gradients: list[ir.OpView] = []
        self.read_by_bound_calls: set[int] = set()  # (hashes of) ops whose results a bound call reads

    def _serving(self, op: ir.OpView) -> str:
        per_shard = self.per_shard is not None and self.per_shard.contains(op.operation.block)
        return remarks.serving(self.options, self.binding, self.settings) + remarks.partitioning(self.options, per_shard=per_shard)

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
            self.report.add(Miss(format_location(op.location, self.options.filename), str(reason),
                                 speed_rule=isinstance(reason, SpeedRule)))
            self.unrewritten_gradients.append(op)
            return _NO_MATCH

        grad_input = self.build(match, forward, plan)
        self.report.rewritten += 1
        self.report.add(Rewrite(format_location(op.location, self.options.filename),
                                remarks.describe(match, plan, forward) + remarks.decided(plan.decision)
                                + self._serving(op)))

        padding_chain = cleanup.padding_chain(op, match)
        if match.slice is not None:
            low = [lo for lo, _ in match.window.padding]
            high = [hi for _, hi in match.window.padding]
            with ir.InsertionPoint(op.operation), op.location:
                padded = stablehlo.PadOp(grad_input, match.zero, low, high, [0] * len(low))
            self.pending_folds.append((padded, padding_chain))
            rewriter.replace_op(op, [padded.result])
            return _MATCHED

        rewriter.replace_op(op, [grad_input])
        cleanup.erase_if_unused(rewriter, padding_chain)
        cleanup.erase_if_unused(rewriter, defining_op(match.zero))
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
        location = format_location(op.location, self.options.filename)
        subject = FORWARD_OF_GRADIENT if self._is_gradients_forward(op) else FORWARD_ALONE
        try:
            pool = match_forward_pool(op)
            reason = binding_refusal(self.binding, self.options.target, signature_of(pool), self.options.mesh)
            if reason is not None:
                raise NoMatch(reason)
            # numerics on this device; under auto, where the kernel pays (calibration/decide.py)
            decision = self.chooser.decide_forward_alone(pool)
            if not decision.rewrite:
                raise refusal_of(self.options.target, decision)
        except NoMatch as reason:
            self.report.add(Miss(location, str(reason), subject, speed_rule=isinstance(reason, SpeedRule)))
            return _NO_MATCH
        replace_with_forward_output(pool, self.emit)
        self.report.forward_alone += 1
        self.report.add(Rewrite(location, remarks.describe_forward_alone(pool) + remarks.decided(decision)
                                + self._serving(op), subject))
        self.forwards_alone.append(op.operation)  # erased after the walk, with what only it used
        return _MATCHED

    def _is_gradients_forward(self, op: ir.OpView) -> bool:
        """Whether the reduce_window `op` is the forward of a gradient: read by a bound neutral call, or
        pooling the input of a select_and_scatter left unrewritten (its result shaped like that gradient's
        grad_output). Only the remark's subject depends on it, never the rewrite."""
        if hash(op.operation) in self.read_by_bound_calls:
            return True
        pooled = _unpadded(op.operands[0])
        return any(gradient.operands[1].type == op.results[0].type and _unpadded(gradient.operands[0]) == pooled
                   for gradient in self.unrewritten_gradients)

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
        self.read_by_gradients.add(hash(defining_op(read).operation))  # a gradient's forward: not "alone"
        return grad_input

    def erase_replaced_forwards(self) -> None:
        """The forwards the forward call replaced, now without uses, and what only they used."""
        cleanup.erase_unused_chains(self.saved_forwards)

    def bind_neutral_call(self, op: ir.OpView, rewriter) -> bool:
        call = read_neutral_call(op)
        if call is None:
            return _NO_MATCH
        location = format_location(op.location, self.options.filename)
        target = self.options.target
        if self.binding is None:
            reason = f"no pool3d binding for platform '{target}'"
        else:
            signature = _signature_of(op, call)
            reason = binding_refusal(self.binding, target, signature, self.options.mesh) or _dtype_refusal(signature)
        if reason is not None:
            self.report.add(Miss(location, reason, NEUTRAL_CALL))
            return _NO_MATCH
        remark = f"bound to the {target} binding" + self._serving(op)  # while op is in its block
        self.read_by_bound_calls.update(hash(defining_op(v).operation) for v in op.operands if defining_op(v))
        with ir.InsertionPoint(op.operation), op.location:
            results = self.emit(call.call, list(op.operands), [r.type for r in op.results], **call.pool.attributes())
        rewriter.replace_op(op, results)
        self.report.bound += 1
        self.report.add(Rewrite(location, remark, NEUTRAL_CALL))
        return _MATCHED

    def fold_slice_of_created_pad(self, op: ir.OpView, rewriter) -> bool:
        if not self.pending_folds:  # most slices: no pad of ours is waiting
            return _NO_MATCH
        producer = defining_op(through_open_constraints(op.operands[0]))
        if producer is None:
            return _NO_MATCH
        for index, (padded, original_pad) in enumerate(self.pending_folds):
            if padded.operation == producer.operation:
                del self.pending_folds[index]
                between = defining_op(op.operands[0])  # padded, or open constraints of it
                rewriter.replace_op(op, [padded.operands[0]])
                cleanup.erase_if_unused(rewriter, between)
                cleanup.erase_if_unused(rewriter, original_pad)
                return _MATCHED
        return _NO_MATCH


def _dtype_refusal(signature: CallSignature) -> str | None:
    """Why a neutral call's element type is outside the contract (the matchers refuse it for the pass's own
    calls; a binding need not check it, and splicing one in fails on it), else None."""
    outside = [t for t in (signature.grad_output_type, signature.input_type, signature.output_type)
               if t not in SUPPORTED_DTYPES]
    return f"element type {outside[0]} is not one of {', '.join(SUPPORTED_DTYPES)}" if outside else None


def _unpadded(value: ir.Value) -> ir.Value:
    """The operand of the stablehlo.pad defining `value`, else `value` (a pool's input, either padding form)."""
    owner = defining_op(value)
    return owner.operands[0] if owner is not None and op_name(owner) == "stablehlo.pad" else value


def _signature_of(op: ir.OpView, call: NeutralCall) -> CallSignature:
    """The CallSignature of a neutral call; its float operand and result types stand for
    (grad_output, input, output), so that mixed element types are refused."""
    floats = [str(ir.ShapedType(v.type).element_type) for v in (*op.operands, *op.results)]
    floats = [t for t in floats if t != INDEX_TYPE]
    return CallSignature(*(floats * 3)[:3], call.pool, call.call)
