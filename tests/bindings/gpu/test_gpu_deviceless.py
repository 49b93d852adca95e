"""The deviceless XLA:GPU compile of rewritten programs for an NVIDIA H200, and the device check's dry run.

The compile needs the CUDA wheels (jax-cuda12-plugin and -pjrt of the
installed JAX's version, nvidia-cuda-nvcc-cu12): `make gpu-compile-check`
installs them into .venv-gpu and runs this file there. Elsewhere those tests
skip, saying so. checks/gpu_compile_check.py compiles the quick bench cases
(both jobs, both explicit strategies) in a subprocess (XLA's ptxas report
is logged on stderr only when set up before JAX starts); each program must
hold the gpu binding's Triton calls and no scatter, and ptxas must report
every expected Pallas kernel for sm_90a with no spills.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from checks import deviceless

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[3]
MISSING = deviceless.missing_wheels()


def run_check(module: str, *args: str, env=None, timeout=600) -> subprocess.CompletedProcess:
    """`python -m checks.<module>` from the repository root."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-m", f"checks.{module}", *args], capture_output=True, text=True,
                          env=env, timeout=timeout, cwd=ROOT)


def test_parse_ptxas():
    log = """I1201 subprocess_compilation.cc:356] ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'pool3d_gpu_forward' for 'sm_90a'
ptxas info    : Function properties for pool3d_gpu_forward
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 32 registers, used 0 barriers
ptxas info    : Compiling entry function 'pool3d_gpu_gather' for 'sm_90a'
ptxas info    : Function properties for pool3d_gpu_gather
    8 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 40 registers, used 0 barriers
"""
    assert deviceless.parse_ptxas(log) == {
        "pool3d_gpu_forward": {"arch": "sm_90a", "stack_bytes": 0, "spill_stores": 0, "spill_loads": 0, "registers": 32},
        "pool3d_gpu_gather": {"arch": "sm_90a", "stack_bytes": 8, "spill_stores": 8, "spill_loads": 4, "registers": 40},
    }


@pytest.mark.skipif(MISSING is not None, reason=f"deviceless H200 compile skipped: {MISSING}")
def test_rewritten_bench_programs_compile_for_h200_without_spills(tmp_path):
    out = tmp_path / "compile.json"
    # the Pallas kernels (their Triton calls are what this checks; test_cuda_deviceless.py compiles the CUDA ones)
    done = run_check("gpu_compile_check", "--quick", "--json", str(out), env={"JAX_PLATFORMS": "cpu", "POOL3D_GPU_IMPL": "pallas"})
    assert done.returncode == 0, done.stdout + done.stderr[-4000:]
    result = json.loads(out.read_text())
    assert result["failed"] == 0 and len(result["rows"]) >= 20  # 4 per quick bench case
    assert len(result["spatial"]) == 4  # the depth-sharded steps for 4 and 8 H200s, judged by the check
    for row in result["rows"]:
        assert row["triton_calls"] >= 2, row
        kernels = {name: report for name, report in row["ptxas"].items() if name.startswith("pool3d_gpu_")}
        assert {"pool3d_gpu_gather"} < set(kernels), row
        for report in kernels.values():
            assert report["arch"] == "sm_90a" and report["spill_stores"] == report["spill_loads"] == 0, row


def test_gpu_check_dry_run(tmp_path):
    """The device check (checks/device_check/) on CPU (interpret mode), beside the CUDA plugin where it is installed: its
    numerics stage's checks pass (tests/checks/test_device_check.py runs the jobs stage's)."""
    done = run_check("device_check", "--platform", "cpu", "--no-torch", "--budget-s", "45", "--stages",
                      "numerics", "--out", str(tmp_path))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    rows = [json.loads(line) for line in (tmp_path / "gpu_check.jsonl").read_text().splitlines()]
    machine = next(r for r in rows if r["kind"] == "machine")
    checks = [r for r in rows if r["kind"] == "calls"]
    assert machine["dry_run"] and checks and not [r for r in checks if r["problems"]]


@pytest.mark.skipif(MISSING is not None, reason=f"deviceless H200 compile skipped: {MISSING}")
def test_batch_sharded_layer_compiles_for_two_h200s_with_the_pallas_kernels_per_shard(monkeypatch):
    """The gpu binding's partitionable calls with the Pallas kernels: XLA lowers each shard's Triton
    kernels while it partitions (bindings/partitioned.py), down to ptxas; no collective."""
    import re

    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax import lax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    import pool3d_pass

    monkeypatch.setenv("POOL3D_GPU_IMPL", "pallas")
    monkeypatch.delenv("POOL3D_GPU_INTERPRET", raising=False)
    pool3d_pass.clear_caches()

    def layer(x):
        pool = lambda v: lax.reduce_window(v, -jnp.inf, lax.max, (1, 1, 2, 2, 2), (1, 1, 2, 2, 2), "VALID")
        y, vjp = jax.vjp(pool, x)
        return y, vjp(2 * y - 1)[0]

    mesh = Mesh(np.array(deviceless.h200_devices(2)), ("data",))
    x = jax.ShapeDtypeStruct((8, 4, 16, 16, 16), jnp.float32, sharding=NamedSharding(mesh, PartitionSpec("data")))
    try:
        hlo = pool3d_pass.jit(layer, strategy="indices").lower(x).compile().as_text()
    finally:
        pool3d_pass.clear_caches()
    triton = [line for line in hlo.splitlines() if "xla.gpu.triton" in line and "custom-call(" in line]
    assert len(triton) == 2, triton  # the window kernel (forward) and the gather kernel, once per device program
    assert re.search(r"entry_computation_layout=\{\(f32\[4,4,16,16,16\]", hlo)  # each device's input: its batch half
    assert not re.search(r"\b(all-gather|all-to-all|collective-permute|all-reduce)(-start)?\(", hlo)


@pytest.mark.skipif(MISSING is not None, reason=f"deviceless H200 compile skipped: {MISSING}")
@pytest.mark.parametrize("gpus", [4, 8])
def test_a_depth_sharded_training_step_runs_the_pallas_kernels_per_gpu_with_halos(monkeypatch, gpus):
    """k3 s2 p1 windows straddling the GPUs' planes: each GPU's Triton kernels (lowered while XLA
    partitions) take one plane from the GPU below; no more bytes between GPUs than XLA's program."""
    import pool3d_pass

    monkeypatch.setenv("POOL3D_GPU_IMPL", "pallas")
    monkeypatch.delenv("POOL3D_GPU_INTERPRET", raising=False)
    pool3d_pass.clear_caches()
    try:
        record = deviceless.compile_spatial_step(gpus, "NDHWC", "k3s2p1")
    finally:
        pool3d_pass.clear_caches()
    assert not record["problems"], record
    assert record["triton_calls"] == 2, record  # the forward's window kernel and the gather kernel
    assert "all-gather" not in record["rewritten_collectives"], record
