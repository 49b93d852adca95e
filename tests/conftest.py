"""Shared pytest configuration for tests/ (grouped by the code they test: rewriting/, contract/,
bindings/<platform>/, integration/, numerics/, cli/, structure/, bench/, checks/, packaging/;
helper modules in support/, inputs in fixtures/).

* Test modules import their helpers by name (``from oracles.xla_runner import
  run_stablehlo``, ``from corpus import FIXTURES, MANIFEST``): pyproject.toml's
  pytest ``pythonpath`` puts ``support/`` on the path.
* Shared fixtures: ``cpu_kernels`` (the CPU kernels registered: a broken build
  fails there, never skips) and ``switch_off`` (the process-wide
  ``pool3d_pass.enable()`` switch off before and after a test); a module asks
  for them with ``pytestmark = pytest.mark.usefixtures(...)``.
* Strategy `auto`'s calibration (pool3d_pass/calibration/) reads and writes
  a verdict cache of this test process only (``POOL3D_CACHE_DIR``, a
  temporary folder) and starts no child process (``POOL3D_CALIBRATION=cached``):
  the suite decides by the bindings' priors, as on a machine never
  calibrated. tests/calibration/ turns first-use on where it tests it.
* Registers the Hypothesis profiles used by the property-based tests:

  - ``ci`` (the default, and always when the environment variable ``CI`` is
    ``true``): derandomized (a fixed seed, so every run draws the same
    examples), ~40 examples per test, no deadline (XLA compiles dominate and
    vary), failing examples printed as reproduction blobs.
  - ``long``: ~1000 examples per test, randomized, for a soak run. Select it
    with Hypothesis' own pytest flag::

        .venv/bin/python -m pytest tests/numerics/test_numerics_hypothesis.py --hypothesis-profile=long

  ``--hypothesis-profile`` overrides the profile loaded here (the Hypothesis
  pytest plugin applies it after conftest.py is imported).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import pytest

# Set before pool3d_pass is imported by any test module (the variables are read at each decision).
_CACHE = tempfile.mkdtemp(prefix="pool3d_test_cache_")
atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)
os.environ["POOL3D_CACHE_DIR"] = _CACHE
os.environ["POOL3D_CALIBRATION"] = "cached"


@pytest.fixture(scope="session")
def cpu_kernels():
    """The CPU kernels must be built and registrable: a broken build fails here, never skips."""
    from pool3d_pass.bindings import cpu

    cpu.register()


@pytest.fixture
def switch_off():
    """The test starts and ends with the process-wide switch off."""
    import pool3d_pass

    pool3d_pass.disable()
    yield
    pool3d_pass.disable()


try:
    from hypothesis import settings
except ImportError:  # pragma: no cover - hypothesis is in the test extras
    pass
else:
    # Health checks stay on: the strategies draw only configurations the pass and
    # the kernels accept (nothing is filtered out), and a test that counts on the
    # kernels asserts how many of its examples called one (support/kernel_examples.py).
    settings.register_profile(
        "ci",
        derandomize=True,
        max_examples=40,
        deadline=None,
        print_blob=True,
    )
    settings.register_profile(
        "long",
        max_examples=1000,
        deadline=None,
        print_blob=True,
    )
    # "ci" is the default, locally and under CI=true alike (CI must be
    # reproducible); `pytest --hypothesis-profile=long` replaces it for a soak
    # run. HYPOTHESIS_PROFILE=long in the environment does the same when CI is
    # not "true".
    _profile = os.environ.get("HYPOTHESIS_PROFILE", "ci")
    if os.environ.get("CI", "").lower() == "true":
        _profile = "ci"
    settings.load_profile(_profile)
