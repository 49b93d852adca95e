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

No plan ever contains a call the binding cannot run.
"""

from __future__ import annotations

from dataclasses import dataclass

from pool3d_pass.bindings.registry import Binding, CallSignature
from pool3d_pass.contract import BACKWARD, BACKWARD_FROM_INDICES, BACKWARD_FROM_INPUT, FORWARD
from pool3d_pass.options import BindingSettings
from pool3d_pass.matching import NoMatch, PoolGradient
from pool3d_pass.options import AUTO, INDICES, RECOMPUTE, PassOptions

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


@dataclass(frozen=True)
class Plan:
    kind: str  # RECOMPUTE, FORWARD_REPLACED, FUSED or BARE_INDICES
    note: str | None = None  # why the asked-for strategy was not used


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
        self.settings = settings  # the run's, for the binding's speed rule
        self.strategy = resolve_strategy(options, binding)
        # Under auto, a binding's own rule of where it pays (Binding.auto_refusal: the gpu one).
        self.auto_rule = binding.auto_refusal if binding is not None and options.strategy == AUTO else None

    def auto_reason(self, signature: CallSignature, input_shape: tuple[int, ...]) -> str | None:
        """Why `auto` leaves this call to the platform's compiler (None: use the binding)."""
        reason = None if self.auto_rule is None else self.auto_rule(signature, input_shape, self.settings)
        return None if reason is None else f"{self.options.target} binding: {reason}"

    def refusal(self, call: str, match: PoolGradient) -> str | None:
        """Why `call` cannot be emitted for `match` (None: it can; neutral output takes every call)."""
        if self.options.neutral:
            return None
        signature = CallSignature.of_pool(call, str(match.element_type), match.geometry.pool)
        return binding_refusal(self.binding, self.options.target, signature, self.options.mesh)

    def plan(self, match: PoolGradient, *, has_forward: bool) -> Plan:
        """The replacement of `match`, or NoMatch naming why nothing can replace it."""
        if self.auto_rule is not None:
            gradient = CallSignature.of_pool(BACKWARD_FROM_INDICES, str(match.element_type), match.geometry.pool)
            if (reason := self.auto_reason(gradient, match.geometry.input_shape)) is not None:
                raise SpeedRule(reason)
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
