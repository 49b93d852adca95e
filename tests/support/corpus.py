"""Where the tests' inputs live, and the fixtures' manifest, read once for every test module."""

from __future__ import annotations

import json
from pathlib import Path

import ml_dtypes
import numpy as np

ROOT = Path(__file__).resolve().parents[2]  # the repository
SUPPORT = ROOT / "tests" / "support"  # helper modules, and the scripts child processes run
FIXTURES = ROOT / "tests" / "fixtures"
EXAMPLE = ROOT / "examples" / "maxpool3d_grad.mlir"
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

# A bare gradient (the vjp of a pool, no forward before it) under the strategies
# the numerics tests run: recompute gives the backward call (and an inserted
# forward), indices the fused call.
BARE_GRADIENT_STRATEGIES = ("recompute", "indices")
BARE_GRADIENT_CALL = {"recompute": "pool3d.max_pooling_3d_backward", "indices": "pool3d.max_pooling_3d_backward_from_input"}
