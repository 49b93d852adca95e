"""What one run of the pass did: candidates found, rewritten, and missed with reasons."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Miss:
    """A select_and_scatter (or, with `subject`, a forward max pool) left untouched, where and why."""

    location: str
    reason: str
    subject: str = "max-pool gradient"
    speed_rule: bool = False  # left by strategy auto's rule of where the kernels pay, not for a limit

    def remark(self) -> str:
        return f"{self.location}: remark: {self.subject} not rewritten: {self.reason}"


@dataclass(frozen=True)
class Rewrite:
    """A select_and_scatter (or, with `subject`, a forward max pool) replaced, where and with what."""

    location: str
    summary: str
    subject: str = "max-pool gradient"

    def remark(self) -> str:
        return f"{self.location}: remark: {self.subject} rewritten: {self.summary}"


# The subjects of events that are not a select_and_scatter of this run (the default subject).
FORWARD_ALONE = "max-pool forward without gradient"  # an inference forward: no gradient reads it
FORWARD_OF_GRADIENT = "max-pool forward of a gradient"  # the second walk met it; its gradient was not rewritten
NEUTRAL_CALL = "neutral call"  # a call an earlier neutral run left, bound (or not) to the target's binding
FORWARDS = (FORWARD_ALONE, FORWARD_OF_GRADIENT)


@dataclass
class RewriteReport:
    """Counts of one pass run, and its events (a Rewrite or a Miss each, in the order met).

    Three kinds of event, each counted on its own line of the summary (`lines()`,
    what `pool3d-opt --stats` prints; `str(report)` adds a remark per event):

    * select_and_scatter ops (`candidates`): each is rewritten or missed, so
      `candidates == rewritten + gradients_missed`;
    * forward max pools the second walk meets (only with a binding that has
      the forward-output call): `forward_alone` rewritten, the rest missed,
      with subject FORWARD_ALONE or, where the pool is the forward of a
      gradient the first walk did not rewrite (or of a bound neutral call),
      FORWARD_OF_GRADIENT;
    * neutral calls an earlier run left (subject NEUTRAL_CALL): `bound`, or missed.
    """

    candidates: int = 0
    rewritten: int = 0
    strategy: str | None = None  # the strategy the run resolved (see rewriting/strategy.py)
    # recompute strategy: where the backward call's forward output came from
    forward_reused: int = 0
    forward_inserted: int = 0
    # indices strategy
    forward_replaced: int = 0  # forward reduce_windows turned into the forward call
    from_indices: int = 0  # gradients given the from-indices call
    from_input: int = 0  # bare gradients given the fused call (or forward + from-indices)
    bound: int = 0  # neutral calls of an earlier run bound to a platform
    forward_alone: int = 0  # forward max pools given the forward-output call
    missed: list[Miss] = field(default_factory=list)
    rewrites: list[Rewrite] = field(default_factory=list)
    events: list[Rewrite | Miss] = field(default_factory=list)  # both, in the order met

    def add(self, event: Rewrite | Miss) -> None:
        (self.rewrites if isinstance(event, Rewrite) else self.missed).append(event)
        self.events.append(event)

    def merge(self, other: RewriteReport) -> None:
        self.candidates += other.candidates
        self.rewritten += other.rewritten
        self.forward_reused += other.forward_reused
        self.forward_inserted += other.forward_inserted
        self.forward_replaced += other.forward_replaced
        self.from_indices += other.from_indices
        self.from_input += other.from_input
        self.strategy = self.strategy or other.strategy
        self.bound += other.bound
        self.forward_alone += other.forward_alone
        self.missed.extend(other.missed)
        self.rewrites.extend(other.rewrites)
        self.events.extend(other.events)

    def _missed(self, *subjects: str) -> int:
        return sum(1 for miss in self.missed if miss.subject in subjects)

    @property
    def gradients_missed(self) -> int:
        """The select_and_scatter ops left untouched (`candidates - rewritten`)."""
        return len(self.missed) - self._missed(NEUTRAL_CALL, *FORWARDS)

    @property
    def forwards_missed(self) -> int:
        """The forward max pools the second walk left to XLA."""
        return self._missed(*FORWARDS)

    @property
    def unbound(self) -> int:
        """The neutral calls left unbound."""
        return self._missed(NEUTRAL_CALL)

    def remarks(self) -> list[str]:
        """One remark per event, in the order the pass met them."""
        return [event.remark() for event in self.events]

    def lines(self) -> list[str]:
        """The summary: the gradients' line, then a line each for forward pools and neutral calls where met."""
        details = []
        if self.forward_reused or self.forward_inserted:
            details.append(f"recompute strategy: forward max-pool reused {self.forward_reused}, "
                           f"inserted {self.forward_inserted}")
        if self.from_indices or self.from_input:
            details.append(f"indices strategy: {self.forward_replaced} forward max-pool(s) replaced, "
                           f"{self.from_indices} gradient(s) from indices, {self.from_input} from the input")
        gradients = (f"pool3d: {self.candidates} select_and_scatter found, {self.rewritten} rewritten, "
                     f"{self.gradients_missed} missed")
        lines = [gradients + (f" ({'; '.join(details)})" if details else "")]
        if self.forward_alone or self.forwards_missed:
            lines.append(f"pool3d: {self.forward_alone + self.forwards_missed} forward max-pool(s) met after the "
                         f"gradients, {self.forward_alone} given the forward-output call, "
                         f"{self.forwards_missed} missed")
        if self.bound or self.unbound:
            lines.append(f"pool3d: {self.bound + self.unbound} neutral call(s) found, {self.bound} bound, "
                         f"{self.unbound} left unbound")
        return lines

    def one_line(self) -> str:
        """`lines()` joined into one (for a log record), without their "pool3d: " prefix."""
        return "; ".join(line.removeprefix("pool3d: ") for line in self.lines())

    def __str__(self) -> str:
        """The summary (`lines()`), then a remark per event (`remarks()`): where, and what was done or why not."""
        return "\n".join(self.lines() + self.remarks())
