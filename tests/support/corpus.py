"""Where the tests' inputs live: the fixture corpus (cases/fixtures.py, shared with checks/) and the tests' own paths.

The tests import these names from here, by this module's name (tests/support
is on pytest's path).
"""

from __future__ import annotations

from cases.fixtures import BY_NAME, ENTRIES, FIXTURES, MANIFEST, ROOT, fixture_text, numpy_dtype, tie_heavy_inputs

__all__ = ["BARE_GRADIENT_CALL", "BARE_GRADIENT_STRATEGIES", "BY_NAME", "ENTRIES", "EXAMPLE", "FIXTURES", "MANIFEST",
           "ROOT", "SUPPORT", "fixture_text", "numpy_dtype", "tie_heavy_inputs"]

SUPPORT = ROOT / "tests" / "support"  # helper modules, and the scripts child processes run
EXAMPLE = ROOT / "examples" / "maxpool3d_grad.mlir"

# A bare gradient (the vjp of a pool, no forward before it) under the strategies
# the numerics tests run: recompute gives the backward call (and an inserted
# forward), indices the fused call.
BARE_GRADIENT_STRATEGIES = ("recompute", "indices")
BARE_GRADIENT_CALL = {"recompute": "pool3d.max_pooling_3d_backward", "indices": "pool3d.max_pooling_3d_backward_from_input"}
