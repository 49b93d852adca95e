"""Which replacement each max-pool gradient gets: the strategy asked for, and what the platform runs.

`auto` is the platform's own choice: `indices` where its binding implements
the layer pair (forward, backward_from_indices), `recompute` where it lacks
them (Neuron: the NKI kernel has only the backward call), and `recompute` for
neutral output, so the NKI path never changes. Asked for `indices`, a gradient gets:

* `forward-replaced`: the dominating forward reduce_window becomes the forward call and
  the gradient the from-indices call;
* `fused`: with no dominating forward, the one fused from-input call;
* `bare-indices`: the same without the fused call: forward call + from-indices;
* otherwise `recompute`, with a note saying which call the binding lacks.

No plan ever contains a call the binding cannot run. Whether a plan the
binding can run is emitted is then the decider's (pool3d_pass/calibration/,
docs/calibration.md): under every strategy, not where the kernels failed the
numerics battery on this device; under `auto`, where this machine's
verdicts, else the binding's prior, say the kernels pay. The plan carries
that decision, which the remark names.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from jaxlib.mlir import ir

from pool3d_pass.bindings.registry import Binding, CallSignature
from pool3d_pass.calibration.decide import Decider
from pool3d_pass.calibration.key import FORWARD_AND_GRADIENT, FORWARD_OUTPUT_CALLS, GRADIENT_ONLY, INFERENCE
from pool3d_pass.calibration.request import Decision, Request
from pool3d_pass.contract import BACKWARD, BACKWARD_FROM_INDICES, BACKWARD_FROM_INPUT, FORWARD, FORWARD_OUTPUT
from pool3d_pass.ir.constraints import through_open_constraints
from pool3d_pass.ir.ops import defining_op, op_name
from pool3d_pass.matching import NoMatch, PoolGradient, match_pool_gradient
from pool3d_pass.matching.forward import find_forward
from pool3d_pass.matching.forward_pool import is_max_pool, match_forward_pool
from pool3d_pass.options import AUTO, INDICES, RECOMPUTE, BindingSettings, PassOptions

# Plan kinds (how one gradient is replaced); RECOMPUTE is the fourth.
FORWARD_REPLACED = "forward-replaced"
FUSED = "fused"
BARE_INDICES = "bare-indices"


def binding_refusal(binding: Binding, target: str, signature: CallSignature, mesh=None) -> str | None:
    """Why `binding` cannot run the call `signature` describes, on `mesh` if given (None: it can)."""
    reason = binding.unsupported(signature)
    if reason is not None:
        return f"{target} binding: {reason}"
    partitioned = mesh is not None
    if not binding.implements(signature.call, partitioned=partitioned):
        if partitioned and signature.call == BACKWARD:
            return f"{target} binding cannot be partitioned over {mesh.size} devices"
        return f"{target} binding has no {signature.call} call" + (" for several devices" if partitioned else "")
    return None


class SpeedRule(NoMatch):
    """Left to the platform's compiler by `auto`'s rule of where the binding pays (a remark, never a warning)."""


def refusal_of(target: str, decision: Decision) -> NoMatch:
    """The miss a refusing decision makes: a SpeedRule where it weighed speed alone, else a NoMatch (warned)."""
    return (SpeedRule if decision.speed else NoMatch)(f"{target} binding: {decision.reason()}")


@dataclass(frozen=True)
class Plan:
    kind: str  # RECOMPUTE, FORWARD_REPLACED, FUSED or BARE_INDICES
    note: str | None = None  # why the asked-for strategy was not used
    decision: Decision | None = None  # what decided that it is emitted (calibration/decide.py)

    def job(self, has_forward: bool) -> str:
        """The pooling layer's job this plan does (calibration/key.py's names)."""
        if self.kind == FORWARD_REPLACED or (self.kind == RECOMPUTE and has_forward):
            return FORWARD_AND_GRADIENT
        return GRADIENT_ONLY

    @property
    def gradient_call(self) -> str:
        """The call that computes the gradient (the signature the binding's prior reads)."""
        return {FUSED: BACKWARD_FROM_INPUT, RECOMPUTE: BACKWARD}.get(self.kind, BACKWARD_FROM_INDICES)


def preferred_strategy(binding: Binding, *, partitioned: bool = False) -> str:
    """`indices` where the binding runs the layer pair (forward, from indices), else `recompute`."""
    pair = (FORWARD, BACKWARD_FROM_INDICES)
    return INDICES if all(binding.implements(c, partitioned=partitioned) for c in pair) else RECOMPUTE


def resolve_strategy(options: PassOptions, binding: Binding | None) -> str:
    """The strategy `auto` stands for: recompute without a binding, else the binding's preference."""
    if options.strategy != AUTO:
        return options.strategy
    if binding is None:
        return RECOMPUTE
    return preferred_strategy(binding, partitioned=options.partitioned)


class StrategyChooser:
    """Plans each gradient of one run; `binding` is the options' target's (None when neutral)."""

    def __init__(self, options: PassOptions, binding: Binding | None, settings: BindingSettings):
        self.options = options
        self.binding = binding
        self.settings = settings  # the run's, for the binding's prior and its calibration
        self.strategy = resolve_strategy(options, binding)
        self.decider = Decider(options, binding, settings)

    def collect_from(self, module: ir.Operation) -> None:
        """Let the decider measure every class of `module` in one child when it first needs one."""
        self.decider.collect = lambda: self.requests_in(module)

    def decide_forward_alone(self, pool) -> Decision:
        """Whether a forward max pool without gradient (a matched ForwardPool) gets the forward-output call."""
        return self.decider.decide(self._inference_request(pool))

    @staticmethod
    def _inference_request(pool) -> Request:
        signature = CallSignature.of_pool(FORWARD_OUTPUT, str(pool.element_type), pool.geometry.pool)
        return Request(signature, tuple(pool.geometry.input_shape), INFERENCE, FORWARD_OUTPUT_CALLS,
                       fused_producer(pool.op))

    def refusal(self, call: str, match: PoolGradient) -> str | None:
        """Why `call` cannot be emitted for `match` (None: it can; neutral output takes every call)."""
        if self.options.neutral:
            return None
        signature = CallSignature.of_pool(call, str(match.element_type), match.geometry.pool)
        return binding_refusal(self.binding, self.options.target, signature, self.options.mesh)

    def plan(self, match: PoolGradient, *, has_forward: bool) -> Plan:
        """The replacement of `match`, or NoMatch naming why nothing replaces it (the binding, or the decider)."""
        plan = self._calls(match, has_forward=has_forward)
        decision = self.decider.decide(self._request(match, plan, has_forward))
        if not decision.rewrite:
            raise refusal_of(self.options.target, decision)
        return dataclasses.replace(plan, decision=decision)

    def _request(self, match: PoolGradient, plan: Plan, has_forward: bool) -> Request:
        signature = CallSignature.of_pool(plan.gradient_call, str(match.element_type), match.geometry.pool)
        return Request(signature, tuple(match.geometry.input_shape), plan.job(has_forward), plan.kind)

    def _calls(self, match: PoolGradient, *, has_forward: bool) -> Plan:
        """The calls the binding can run for `match` under the strategy, or NoMatch."""
        note = None
        if self.strategy == INDICES:
            refusals = {call: self.refusal(call, match) for call in (FORWARD, BACKWARD_FROM_INDICES, BACKWARD_FROM_INPUT)}
            layer_pair = refusals[FORWARD] is None and refusals[BACKWARD_FROM_INDICES] is None
            if has_forward and layer_pair:
                return Plan(FORWARD_REPLACED)
            if refusals[BACKWARD_FROM_INPUT] is None:
                return Plan(FUSED)
            if layer_pair:
                return Plan(BARE_INDICES)
            note = "indices strategy not possible (" + "; ".join(r for r in refusals.values() if r) + ")"
        reason = self.refusal(BACKWARD, match)
        if reason is not None:
            raise NoMatch(reason if note is None else f"{note}; {reason}")
        return Plan(RECOMPUTE, note)

    def requests_in(self, module: ir.Operation) -> list[Request]:
        """Every call of `module` the decider would be asked about (its gradients, then its forward pools)."""
        requests, forwards = [], set()

        def visit(op: ir.Operation) -> ir.WalkResult:
            if op.name == "stablehlo.select_and_scatter":
                try:
                    match = match_pool_gradient(op.opview)
                    forward = find_forward(match)
                    if forward is not None:
                        forwards.add(hash(forward.operation))
                    plan = self._calls(match, has_forward=forward is not None)
                    requests.append(self._request(match, plan, forward is not None))
                except NoMatch:
                    pass
            return ir.WalkResult.ADVANCE

        def visit_pools(op: ir.Operation) -> ir.WalkResult:
            if op.name == "stablehlo.reduce_window" and hash(op) not in forwards and is_max_pool(op.opview):
                try:
                    request = self._inference_request(match_forward_pool(op.opview))
                    if binding_refusal(self.binding, self.options.target, request.signature,
                                       self.options.mesh) is None:
                        requests.append(request)
                except NoMatch:
                    pass
            return ir.WalkResult.ADVANCE

        module.walk(visit)
        if self.binding is not None and self.binding.implements(FORWARD_OUTPUT, partitioned=self.options.partitioned):
            module.walk(visit_pools)
        return requests


# Elementwise ops XLA fuses into the reduce_window that reads them (a bias, a ReLU, a cast): inside a model an
# inference pool's producer; the rewritten program writes their result out for the call to read.
FUSIBLE_PRODUCERS = frozenset(f"stablehlo.{name}" for name in (
    "add", "subtract", "multiply", "divide", "maximum", "minimum", "negate", "abs", "exponential", "logistic",
    "tanh", "select", "clamp", "convert", "compare", "sqrt", "rsqrt", "power", "log", "sign"))


def fused_producer(pool_op) -> bool:
    """Whether the pool's input (through an explicit -inf pad) is made by an op XLA would fuse into it, also
    inside a private function it calls (JAX's `jax.nn.relu` is one: XLA inlines it)."""
    owner = defining_op(through_open_constraints(pool_op.operands[0]))
    if owner is not None and op_name(owner) == "stablehlo.pad":
        owner = defining_op(through_open_constraints(owner.operands[0]))
    if owner is not None and op_name(owner) == "func.call":
        owner = _returned_by_callee(owner)
    return owner is not None and op_name(owner) in FUSIBLE_PRODUCERS


def _returned_by_callee(call) -> ir.OpView | None:
    """The op defining the single result of the function `call` calls (None where it is not plain)."""
    try:
        callee = ir.FlatSymbolRefAttr(call.attributes["callee"]).value
        module = call.operation
        while module.parent is not None:
            module = module.parent
        function = ir.SymbolTable(module)[callee]
        (block,) = function.regions[0].blocks
        returned = list(block.operations)[-1]
        return defining_op(returned.operands[0]) if len(returned.operands) == 1 else None
    except (KeyError, ValueError, TypeError, IndexError):
        return None
