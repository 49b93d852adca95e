"""What a compiled SPMD program moves between devices: its collectives, counted and sized from the HLO text.

Used by the multi-device tests (tests/support/compiled_hlo.py) and the
deviceless GPU check (checks/gpu_compile_check.py), so both count alike:
per collective the bytes of its result on one device (a collective-permute's
received block, an all-gather's gathered tensor, an all-reduce's reduced
one). Asynchronous pairs count once, at their `-done`. Imports nothing of JAX.
"""

from __future__ import annotations

import re

COLLECTIVES = ("all-gather", "all-to-all", "collective-permute", "all-reduce", "reduce-scatter")
_BYTES = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4, "u32": 4, "f32": 4,
          "s64": 8, "u64": 8, "f64": 8}
_INSTRUCTION = re.compile(r"=\s*(?P<type>\(.*?\)|\S+)\s+(?P<op>" + "|".join(COLLECTIVES) + r")(?P<suffix>-start|-done)?\(")
_ARRAY = re.compile(r"\b(" + "|".join(_BYTES) + r")\[([\d,]*)\]")


def _array_bytes(text: str) -> int:
    total = 0
    for dtype, dims in _ARRAY.findall(text):
        count = 1
        for n in filter(None, dims.split(",")):
            count *= int(n)
        total += count * _BYTES[dtype]
    return total


def collectives(hlo: str) -> dict[str, dict[str, int]]:
    """{collective: {"count": n, "bytes": result bytes per device}} for each kind the program holds."""
    found: dict[str, dict[str, int]] = {}
    for line in hlo.splitlines():
        match = _INSTRUCTION.search(line)
        if match is None or match.group("suffix") == "-start":
            continue
        entry = found.setdefault(match.group("op"), {"count": 0, "bytes": 0})
        entry["count"] += 1
        entry["bytes"] += _array_bytes(match.group("type"))
    return found


def total_bytes(hlo: str) -> int:
    """Bytes of every collective's result on one device: what the program moves between devices."""
    return sum(entry["bytes"] for entry in collectives(hlo).values())
