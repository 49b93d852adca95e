"""The lowered programs under tests/fixtures: where they are, their manifest, and inputs for them.

`scripts/lower_fixtures.py` writes the fixtures and `manifest.json` (each
entry's name, file, arguments and what the pass must do with it). The tests,
the fuzz check and the neuron check read them through this module.
"""

from __future__ import annotations

import json
from pathlib import Path

import ml_dtypes
import numpy as np

ROOT = Path(__file__).resolve().parents[1]  # the repository
FIXTURES = ROOT / "tests" / "fixtures"
MANIFEST = json.loads((FIXTURES / "manifest.json").read_text())
ENTRIES = MANIFEST["fixtures"]  # in the manifest's order
BY_NAME = {entry["name"]: entry for entry in ENTRIES}


def fixture_text(name: str) -> str:
    return (FIXTURES / BY_NAME[name]["file"]).read_text()


def numpy_dtype(name: str) -> np.dtype:
    """The numpy dtype of a manifest argument's dtype name ("float32", "bfloat16", "int32", ...)."""
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def tie_heavy_inputs(entry: dict, seed: int = 0) -> list[np.ndarray]:
    """Inputs for a manifest entry's `args`: integers in [-3, 3], so maxima tie and sums are exact."""
    rng = np.random.default_rng(seed)
    return [rng.integers(-3, 4, a["shape"]).astype(numpy_dtype(a["dtype"])) for a in entry["args"]]
