"""The two values the decision passes around: what is asked (`Request`) and what is answered (`Decision`).

No JAX is imported here.
"""

from __future__ import annotations

from dataclasses import dataclass

from pool3d_pass.calibration.key import SPEED, Subject, size_bucket


@dataclass(frozen=True)
class Request:
    """One call the pass would emit: its signature, the kernel-view input shape, the job and the plan's calls."""

    signature: object  # bindings.base.CallSignature
    input_shape: tuple[int, ...]
    job: str
    calls: str
    producer: bool = False  # an inference pool whose input an elementwise op makes (XLA fuses it into the pool)

    def subject(self) -> Subject:
        s = self.signature
        return Subject(SPEED, s.data_format, s.input_type, tuple(s.kernel_size), tuple(s.stride), tuple(s.padding),
                       self.job, self.calls, size_bucket(self.input_shape, s.input_type),
                       producer=self.producer, shape=tuple(self.input_shape))


@dataclass(frozen=True)
class Decision:
    """Whether the call is emitted, what decided it (`source`) and the figure or reason (`detail`)."""

    rewrite: bool
    source: str
    detail: str = ""
    figure: str = ""  # a short figure for a rewrite's remark ("1.84x +- 0.05")
    speed: bool = False  # a refusal weighing speed alone (a verdict, the prior, the budget): a remark, no warning

    def note(self) -> str:
        """For a rewrite's remark: "decided by <source>[: <figure>]"."""
        return f"decided by {self.source}" + (f": {self.figure}" if self.figure else "")

    def reason(self) -> str:
        """For a refusal's remark: "<detail>; decided by <source>"."""
        return f"{self.detail}; decided by {self.source}" if self.detail else f"decided by {self.source}"
