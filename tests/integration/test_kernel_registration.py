"""Kernels are registered on `import pool3d_pass`, so compiled pool3d programs run in any process that imported it.

Each step runs in a fresh process (tests/support/kernel_registration_cases.py):
* `import pool3d_pass` registers the CPU handlers without importing jax;
* an executable compiled under `enable()` and serialized
  (`jax.experimental.serialize_executable`) runs after `deserialize_and_load`
  in a new process that only imported pool3d_pass;
* a 4-device batch-sharded forward + gradient compiled under `enable()` (the
  partitionable binding: custom_partitioning calls) misses JAX's persistent
  compilation cache in the first process and hits it in the second and third,
  with JAX's `jax_remove_custom_partitioning_ptr_from_cache_key` left off.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from corpus import SUPPORT

CASES = SUPPORT / "kernel_registration_cases.py"
ENVIRONMENT = dict(os.environ, JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="1")


def _run(*arguments: str) -> dict | None:
    completed = subprocess.run([sys.executable, str(CASES), *arguments], capture_output=True, text=True,
                               timeout=300, env=ENVIRONMENT, cwd=CASES.parent)
    assert completed.returncode == 0, completed.stderr[-4000:]
    lines = [line for line in completed.stdout.splitlines() if line.startswith("{")]
    return json.loads(lines[-1]) if lines else None


def test_import_registers_the_kernels_without_importing_jax():
    code = ("import sys, pool3d_pass; from pool3d_pass.bindings.cpu import registration; "
            "print(registration.is_registered(), 'jax' in sys.modules, pool3d_pass.KERNEL_REGISTRATION_FAILURES)")
    # cwd: not the work tree, whose pool3d_pass may hold another venv's build
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                               env=ENVIRONMENT, cwd=CASES.parent)
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert completed.stdout.split(None, 2) == ["True", "False", "{}\n"], completed.stdout


def test_a_deserialized_executable_runs_in_a_fresh_process(tmp_path):
    _run("serialize", str(tmp_path))
    assert _run("deserialize", str(tmp_path)) == {"y_equal": True, "dx_equal": True}


def test_a_sharded_program_hits_the_persistent_cache_in_later_processes(tmp_path):
    runs = [_run("cached", str(tmp_path)) for _ in range(3)]
    for run in runs:
        assert run["rewritten"] and run["equal"] and not run["flag"], run
    assert (runs[0]["hits"], runs[0]["misses"]) == (0, 1), runs
    assert [(run["hits"], run["misses"]) for run in runs[1:]] == [(1, 0), (1, 0)], runs
