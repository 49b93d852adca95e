"""`python -m pool3d_pass` reports what the installation has, and works where jax or a piece is missing."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import jax
import jaxlib

import pool3d_pass

REPOSITORY = Path(__file__).resolve().parents[2]
# The pool3d_pass these tests import (the tree under an editable install, site-packages
# under make test's JAX 0.9 venv), so the command reports the same installation.
INSTALLED = Path(pool3d_pass.__file__).resolve().parents[1]


def run(python: str, path: Path = INSTALLED, **env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "PYTHONPATH": str(path), "JAX_PLATFORMS": "cpu", **env}
    return subprocess.run([python, "-m", "pool3d_pass"], capture_output=True, text=True, env=environment,
                          cwd=REPOSITORY, timeout=300, check=False)


def lines_of(done: subprocess.CompletedProcess) -> dict[str, str]:
    assert done.returncode == 0 and not done.stderr.strip(), done.stdout + done.stderr
    return {line.split(":", 1)[0]: line for line in done.stdout.splitlines() if ":" in line}


def test_reports_every_piece_of_this_installation():
    lines = lines_of(run(sys.executable))
    assert f"jax {jax.__version__}, jaxlib {jaxlib.__version__}" in lines["JAX"]
    assert "OUTSIDE" not in lines["JAX"]
    assert lines["CPU kernels"].startswith("CPU kernels: built, loaded (") and "_kernel" in lines["CPU kernels"]
    assert lines["Pallas"].startswith("Pallas: importable")
    assert lines["Neuron SDK"].startswith("Neuron SDK: ")
    assert lines["CUDA kernels"].startswith("CUDA kernels: ")


def test_missing_or_broken_kernels_are_lines_not_errors(tmp_path):
    """No CUDA library and a CPU extension that does not load: each says so, the command still exits 0."""
    broken = tmp_path / "_kernel.so"
    broken.write_bytes(b"not an ELF file")
    lines = lines_of(run(sys.executable, POOL3D_CUDA_LIBRARY=str(tmp_path / "none.so"),
                         POOL3D_KERNEL_LIBRARY=str(broken)))
    assert "CUDA kernels: not in this installation" in lines["CUDA kernels"]
    assert "Pallas kernels" in lines["CUDA kernels"]
    assert lines["CPU kernels"].startswith("CPU kernels: not usable (")


def test_runs_without_jax(tmp_path):
    """A bare interpreter (a venv holding nothing) that imports the tree: every line says what is missing."""
    venv.create(tmp_path / "bare", with_pip=False)
    lines = lines_of(run(str(tmp_path / "bare" / "bin" / "python"), path=REPOSITORY))
    assert lines["JAX"] == "JAX: jax and jaxlib not installed (pool3d_pass needs jax and jaxlib >=0.9.0,<0.13)"
    assert lines["Pallas"].startswith("Pallas: not importable (")
    assert lines["Neuron SDK"].startswith("Neuron SDK: ")
