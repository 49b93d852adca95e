"""What a compiled XLA:CPU program shows of a max-pool gradient, and of the kernel calls that replaced it.

XLA:CPU rewrites `select-and-scatter` into a plain `scatter` before the final
HLO text (`compiled.as_text()`), so a check for `select-and-scatter(` alone
passes on every CPU program; a gradient left to XLA shows as either spelling.
`reduce-scatter(` (a collective) is not one of them.

What a program moves between devices (`collectives`, `total_bytes`; the
deviceless GPU check counts with them too): per collective the bytes of its
result on one device (a collective-permute's received block, an
all-gather's gathered tensor, an all-reduce's reduced one); asynchronous
pairs count once, at their `-done`.
"""

from __future__ import annotations

import re

__all__ = ["COLLECTIVES", "POOL_GRADIENT_OP", "collective_counts", "collectives", "kernel_calls",
           "kernel_operand_shapes", "pool_gradient_ops", "total_bytes"]

POOL_GRADIENT_OP = re.compile(r"(?<![\w-])(?:select-and-scatter|scatter)\(")


def pool_gradient_ops(hlo: str) -> int:
    """How many select-and-scatter or scatter instructions the compiled HLO text holds."""
    return len(POOL_GRADIENT_OP.findall(hlo))


def kernel_calls(hlo: str) -> dict[str, int]:
    """Custom calls per call kind of the contract, by exact target name."""
    from pool3d_pass.contract import TARGETS

    targets = re.findall(r'custom_call_target="([^"]+)"', hlo)
    return {kind: targets.count(target) for kind, target in TARGETS.items()}


def kernel_operand_shapes(hlo: str) -> dict[str, list[list[list[int]]]]:
    """Per call kind of the contract, the operand shapes of each of its kernel calls in compiled HLO text
    (one list of shapes per call: in a partitioned program, what each device's kernel gets)."""
    from pool3d_pass.contract import TARGETS

    kinds = {target: kind for kind, target in TARGETS.items()}
    shapes: dict[str, list] = {}
    for line in hlo.splitlines():
        target = re.search(r'custom_call_target="([^"]+)"', line)
        if target is None or target.group(1) not in kinds:
            continue
        constraints = re.search(r"operand_layout_constraints=\{(.*?\})\}", line)  # f32[2,4,8,8,8]{4,3,2,1,0}, ...
        found = re.findall(r"\[([\d,]*)\]", constraints.group(1)) if constraints else []
        shapes.setdefault(kinds[target.group(1)], []).append([[int(n) for n in s.split(",")] for s in found])
    return shapes


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


def collective_counts(hlo: str) -> dict[str, int]:
    """How many collectives of each kind the program holds (every kind named, 0 where none)."""
    found = collectives(hlo)
    return {name: found.get(name, {"count": 0})["count"] for name in COLLECTIVES}


def total_bytes(hlo: str) -> int:
    """Bytes of every collective's result on one device: what the program moves between devices."""
    return sum(entry["bytes"] for entry in collectives(hlo).values())
