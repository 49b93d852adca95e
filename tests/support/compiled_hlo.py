"""What a compiled XLA:CPU program shows of a max-pool gradient, and of the kernel calls that replaced it.

XLA:CPU rewrites `select-and-scatter` into a plain `scatter` before the final
HLO text (`compiled.as_text()`), so a check for `select-and-scatter(` alone
passes on every CPU program; a gradient left to XLA shows as either spelling.
`reduce-scatter(` (a collective) is not one of them. What the program moves
between devices: `collectives` (checks/hlo_collectives.py, which the
deviceless GPU check shares).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

try:
    from checks.hlo_collectives import collectives, total_bytes
except ModuleNotFoundError:  # a child process started from support/: the repository root, after the installed package
    sys.path.append(str(Path(__file__).resolve().parents[2]))
    from checks.hlo_collectives import collectives, total_bytes

__all__ = ["POOL_GRADIENT_OP", "collectives", "kernel_calls", "kernel_operand_shapes", "pool_gradient_ops",
           "total_bytes"]

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
