"""Compiling many shapes under `enable()` grows live memory no more than plain jax.jit does, and
`jax.clear_caches()` gives it back.

Both modes run at once in child processes (tests/support/memory_cases.py), compiling
a max-pool gradient for SHAPES distinct batch sizes (a service, or a loop over
variable-size volumes). What pool3d_pass keeps per shape is a lowering's text
in a bounded cache (splicing/splice.py), which `jax.clear_caches()` empties.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from corpus import SUPPORT

pytestmark = pytest.mark.slow

CASES = SUPPORT / "memory_cases.py"
SHAPES = 40
ALLOWED_GROWTH = 1.25  # x plain jax.jit's growth
SLACK_MB = 32  # allocator noise on what clear_caches leaves behind


def test_memory_growth_is_bounded_and_given_back():
    environment = dict(os.environ, JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="1", POOL3D_CPU_THREADS="1")
    children = [subprocess.Popen([sys.executable, str(CASES), mode, str(SHAPES)], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env=environment) for mode in ("plain", "enabled")]
    plain, enabled = [], []
    for child, into in zip(children, (plain, enabled)):
        out, err = child.communicate(timeout=600)
        assert child.returncode == 0, err[-4000:]
        into.append(json.loads(out.strip().splitlines()[-1]))
    plain, enabled = plain[0], enabled[0]
    plain_growth = plain["grown"] - plain["start"]
    enabled_growth = enabled["grown"] - enabled["start"]
    assert plain_growth > 0, plain
    assert enabled_growth <= ALLOWED_GROWTH * plain_growth, (enabled, plain)
    plain_kept = plain["cleared"] - plain["start"]
    enabled_kept = enabled["cleared"] - enabled["start"]
    assert enabled_kept <= max(ALLOWED_GROWTH * plain_kept, plain_kept + SLACK_MB), (enabled, plain)
    assert enabled["cached_lowerings"] == 0 and enabled["cache_limit"] > 0, enabled
