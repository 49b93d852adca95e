"""A floor on the examples of a property test that really call a pool3d kernel.

Each property is a @given function run inside a plain test; the code that runs
a kernel (a rewritten program holding the call, or the binding's call itself)
calls ``reached()`` once the kernel has returned, and the test ends with
``assert_at_least(examples)``: a strategy that drifts into refusals, or a
check that stops calling the kernel, fails there instead of passing on fewer
and fewer real checks.
"""

from __future__ import annotations

__all__ = ["KernelExamples"]


class KernelExamples:
    """Counts the examples of one property test that called a kernel."""

    def __init__(self):
        self.count = 0

    def reached(self) -> None:
        self.count += 1

    def assert_at_least(self, examples: int) -> None:
        """At least 9 in 10 of the `examples` the test asked Hypothesis for called a kernel."""
        floor = max(1, examples * 9 // 10)
        assert self.count >= floor, f"only {self.count} examples called a kernel; the floor is {floor} of {examples}"
