"""What one run of the pass did: candidates found, rewritten, and missed with reasons."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Miss:
    """A select_and_scatter left untouched, where it is and why."""

    location: str
    reason: str

    def remark(self) -> str:
        return f"{self.location}: remark: max-pool gradient not rewritten: {self.reason}"


@dataclass(frozen=True)
class Rewrite:
    """A select_and_scatter replaced by the kernel call, where it was and with what geometry."""

    location: str
    summary: str

    def remark(self) -> str:
        return f"{self.location}: remark: max-pool gradient rewritten: {self.summary}"


@dataclass
class RewriteReport:
    """Counts of one pass run. `candidates == rewritten + len(missed)`."""

    candidates: int = 0
    rewritten: int = 0
    forward_reused: int = 0
    forward_inserted: int = 0
    bound: int = 0  # neutral calls of an earlier run bound to a platform
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
        self.bound += other.bound
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
        return text + (f", {self.bound} neutral call(s) bound" if self.bound else "")
