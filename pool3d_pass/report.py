"""What one run of the pass did: candidates found, rewritten, and missed with reasons."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Miss:
    """A select_and_scatter (or, with `subject`, a forward max pool) left untouched, where and why."""

    location: str
    reason: str
    subject: str = "max-pool gradient"

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


FORWARD_ALONE = "max-pool forward without gradient"  # the subject of inference forwards' events


@dataclass
class RewriteReport:
    """Counts of one pass run.

    `candidates` counts the select_and_scatter ops met; each is rewritten or
    missed, so `candidates == rewritten + (misses of select_and_scatter)`.
    `missed` also holds the neutral calls a platform run left unbound (a
    `Miss` whose reason starts "neutral call left unbound"), which are no
    candidates: `--stats` may show more missed than found. Forward max pools
    without a gradient (`forward_alone`, given the forward-output call) are no
    candidates either; those left to XLA are `Miss`es with subject FORWARD_ALONE.
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
    forward_alone: int = 0  # forward max pools without a gradient given the forward-output call
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

    def remarks(self) -> list[str]:
        """One remark per gradient, in the order the pass met them."""
        return [event.remark() for event in self.events]

    def __str__(self) -> str:
        text = (
            f"pool3d: {self.candidates} select_and_scatter found, {self.rewritten} rewritten, "
            f"{len(self.missed)} missed (forward max-pool reused {self.forward_reused}, "
            f"inserted {self.forward_inserted})"
        )
        if self.from_indices or self.from_input:
            text += (
                f", indices strategy: {self.forward_replaced} forward max-pool(s) replaced, "
                f"{self.from_indices} gradient(s) from indices, {self.from_input} from the input"
            )
        if self.forward_alone:
            text += f", {self.forward_alone} forward max-pool(s) without gradient given the forward-output call"
        return text + (f", {self.bound} neutral call(s) bound" if self.bound else "")
