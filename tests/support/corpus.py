"""Where the tests' inputs live, and the fixtures' manifest, read once for every test module."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository
SUPPORT = ROOT / "tests" / "support"  # helper modules, and the scripts child processes run
FIXTURES = ROOT / "tests" / "fixtures"
EXAMPLE = ROOT / "examples" / "maxpool3d_grad.mlir"
MANIFEST = json.loads((FIXTURES / "manifest.json").read_text())
ENTRIES = MANIFEST["fixtures"]  # in the manifest's order
BY_NAME = {entry["name"]: entry for entry in ENTRIES}

# A bare gradient (the vjp of a pool, no forward before it) under the strategies
# the numerics tests run: recompute gives the backward call (and an inserted
# forward), indices the fused call.
BARE_GRADIENT_STRATEGIES = ("recompute", "indices")
BARE_GRADIENT_CALL = {"recompute": "pool3d.max_pooling_3d_backward", "indices": "pool3d.max_pooling_3d_backward_from_input"}
