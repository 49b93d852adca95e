"""The pass option `calibration` and the process's calibration budget: their words, and where they come from.

* "first-use" (the default): stored verdicts where there are any; a class
  without one that the binding wants measured here (a GPU's or NeuronCore's
  every class, the CPU's thin margins) is measured on first use, in a child
  process, within the budget, and remembered;
* "cached": stored verdicts only, else the binding's prior; never a child
  process (what several processes, a CI job or a timing-sensitive start use);
* "off": the binding's prior alone; the cache is neither read nor written.

The option (`PassOptions.calibration`, a setting of every entry: `enable()`,
`jit()`, `rewrite()`, `pool3d-opt --calibration`) wins; where it is not
given, `$POOL3D_CALIBRATION` (read when the options are made); else
"first-use". The words are options.py's. The budget is the seconds one
process may spend calibrating (`$POOL3D_CALIBRATION_BUDGET_S`, default 60):
beyond it a class that wanted measuring stays the platform compiler's, said
once. No JAX is imported here.
"""

from __future__ import annotations

import os

from pool3d_pass import environment
from pool3d_pass.options import CACHED, CALIBRATION_MODES, FIRST_USE, OFF, PassOptions

MODES = CALIBRATION_MODES
DEFAULT_BUDGET_S = 60.0

__all__ = ["CACHED", "FIRST_USE", "MODES", "OFF", "budget_s", "mode"]


def mode(options: PassOptions | None = None) -> str:
    """The calibration mode of a run with `options` (None: a PassOptions made now: $POOL3D_CALIBRATION, else
    first-use)."""
    return (PassOptions() if options is None else options).calibration


def budget_s() -> float:
    """Seconds one process may spend calibrating: $POOL3D_CALIBRATION_BUDGET_S, else 60."""
    try:
        return max(0.0, float(os.environ.get(environment.CALIBRATION_BUDGET, "") or DEFAULT_BUDGET_S))
    except ValueError:
        return DEFAULT_BUDGET_S
