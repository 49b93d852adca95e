"""What a compiled XLA:CPU program shows of a max-pool gradient.

XLA:CPU rewrites `select-and-scatter` into a plain `scatter` before the final
HLO text (`compiled.as_text()`), so a check for `select-and-scatter(` alone
passes on every CPU program; a gradient left to XLA shows as either spelling.
`reduce-scatter(` (a collective) is not one of them.
"""

from __future__ import annotations

import re

__all__ = ["POOL_GRADIENT_OP", "pool_gradient_ops"]

POOL_GRADIENT_OP = re.compile(r"(?<![\w-])(?:select-and-scatter|scatter)\(")


def pool_gradient_ops(hlo: str) -> int:
    """How many select-and-scatter or scatter instructions the compiled HLO text holds."""
    return len(POOL_GRADIENT_OP.findall(hlo))
