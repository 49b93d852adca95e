"""What the device check writes, as it goes: JSON lines, a Markdown table, and a time budget.

A lent GPU machine is held for minutes and a run can be killed at its limit
or by one bad launch, so every result is appended (and flushed to disk) the
moment it exists: whatever finished survives. `Budget` turns a deadline into
"does this next item still fit"; what does not fit is recorded as skipped,
with the reason, never silently dropped.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

JSONL = "gpu_check.jsonl"
TABLE = "gpu_check.md"


class Recorder:
    """Appends records to `<out>/gpu_check.jsonl` and table rows to `<out>/gpu_check.md`."""

    def __init__(self, out: Path, stage: str):
        self.out = Path(out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.stage = stage

    def _append(self, name: str, text: str) -> None:
        with open(self.out / name, "a", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())

    def record(self, kind: str, **fields) -> dict:
        """One JSON line: {"stage", "kind", "t": unix time, **fields}; returns it."""
        row = {"stage": self.stage, "kind": kind, "t": round(time.time(), 3), **fields}
        self._append(JSONL, json.dumps(_finite(row), default=str) + "\n")
        return row

    def table(self, line: str) -> None:
        """A line of the human-readable table (Markdown)."""
        self._append(TABLE, line.rstrip("\n") + "\n")


def _finite(value):
    """JSON has no NaN/inf: such floats are written as strings ("nan", "inf", "-inf")."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def read_records(out: Path) -> list[dict]:
    """Every complete JSON line of `<out>/gpu_check.jsonl` (a line cut by a kill is dropped)."""
    path = Path(out) / JSONL
    if not path.exists():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


class Budget:
    """A deadline (time.monotonic() seconds); `fits(estimate_s)` says whether an item may still start."""

    def __init__(self, seconds: float, clock=time.monotonic):
        self.clock = clock
        self.deadline = clock() + seconds

    def left(self) -> float:
        return self.deadline - self.clock()

    def fits(self, estimate_s: float = 0.0) -> bool:
        return self.left() > estimate_s
