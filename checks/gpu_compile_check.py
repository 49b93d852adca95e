"""Deviceless XLA:GPU compile of the rewritten bench programs for an NVIDIA H200: no GPU needed.

    .venv-gpu-cuda13/bin/python -m checks.gpu_compile_check [--quick] [--spatial-only] [--json PATH]   (from the repository root)

(`make gpu-compile-check` makes .venv-gpu-cuda13: JAX, jax-cuda13-plugin/-pjrt of
the same version, the CUDA 13 nvcc wheel; checks/deviceless.py.) For every bench case
(cases/pooling.py), both jobs (forward + gradient, gradient only) and both
explicit strategies (indices, recompute: the gpu binding is opt-in), the job
goes through `pool3d_pass.jit` lowered for a compile-only H200
(`jax.experimental.topologies`) and is compiled by XLA:GPU down to ptxas for
sm_90a. Checked per program: the compiled HLO holds the gpu binding's Triton
calls and no scatter (XLA:GPU's own max-pool gradient is a scatter), and
ptxas compiled each expected Pallas kernel with no register spills.

Then spatially sharded programs for 4 and 8 H200s: two training steps
(3x3x3 convolution, ReLU, max pool, loss; batch 2, depth 32 split over the
GPUs, strategy indices; cases/spatial.py), NCDHW k2 s2
(windows aligned with the shards) and NDHWC k3 s2 p1 (windows straddling),
compiled by plain `jax.jit` and through `pool3d_pass.jit`. Checked per
program: the rewritten one holds the binding's kernels and no scatter, and
moves no more bytes between GPUs than XLA's (the collectives' results per
GPU, oracles/compiled_hlo.py); the aligned one exactly what XLA's
convolutions move. Prints a table (registers, spills per kernel; collectives
and bytes, XLA's and the rewrite's) and writes JSON; exits 1 on a failure.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from checks import deviceless  # imports no JAX

ROOT = Path(__file__).resolve().parents[1]

# XLA reads these when its CUDA plugin starts: before JAX is imported.
for _name, _value in deviceless.COMPILE_LOG_ENV.items():
    if _name == "XLA_FLAGS":
        os.environ[_name] = f"{os.environ.get(_name, '')} {_value}".strip()
    else:
        os.environ.setdefault(_name, _value)

JOBS = ("forward + gradient", "gradient only")
STRATEGIES = ("indices", "recompute")
# The Pallas kernels each (strategy, job) compiles to (bindings/gpu/calls.py).
EXPECTED_KERNELS = {
    ("indices", "forward + gradient"): ("pool3d_gpu_forward", "pool3d_gpu_gather"),
    ("indices", "gradient only"): ("pool3d_gpu_indices", "pool3d_gpu_gather"),
    ("recompute", "forward + gradient"): ("pool3d_gpu_select", "pool3d_gpu_gather"),
    ("recompute", "gradient only"): ("pool3d_gpu_select", "pool3d_gpu_gather"),
}


@contextmanager
def captured_stderr():
    """What C++ (XLA's log) writes on file descriptor 2 meanwhile; yields a list holding it after."""
    sys.stderr.flush()
    saved = os.dup(2)
    out: list[str] = []
    with tempfile.TemporaryFile(mode="w+b") as file:
        os.dup2(file.fileno(), 2)
        try:
            yield out
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            file.seek(0)
            out.append(file.read().decode("utf-8", "replace"))


def compile_one(case, job: str, strategy: str, sharding) -> dict:
    import jax
    import jax.numpy as jnp

    import pool3d_pass
    from cases import pooling

    dtype = jnp.dtype(pooling.np_dtype(case.dtype))
    x = jax.ShapeDtypeStruct(case.shape, dtype, sharding=sharding)
    g = jax.ShapeDtypeStruct(case.out_shape(), dtype, sharding=sharding)
    start = time.perf_counter()
    with captured_stderr() as log:
        compiled = pool3d_pass.jit(pooling.jax_job(job, pooling.pool_fn(case)), strategy=strategy).lower(x, g).compile()
    seconds = time.perf_counter() - start
    hlo = compiled.as_text()
    ptxas = deviceless.parse_ptxas(log[0])
    expected = EXPECTED_KERNELS[(strategy, job)]
    triton_calls = hlo.count('custom_call_target="__gpu$xla.gpu.triton"')
    names = sorted(set(re.findall(r'name = \\?"(pool3d_gpu_\w+)\\?"', hlo)))
    problems = []
    if re.search(r"\s(scatter|select-and-scatter)\(", hlo):  # an instruction, not a name in metadata
        problems.append("a scatter is left in the compiled program")
    for kernel in expected:
        report = next((v for k, v in ptxas.items() if k.startswith(kernel)), None)
        if report is None:
            problems.append(f"ptxas did not report {kernel}")
        elif report.get("spill_stores") or report.get("spill_loads"):
            problems.append(f"{kernel} spills registers: {report}")
    return {
        "case": case.name, "job": job, "strategy": strategy, "compile_s": round(seconds, 2),
        "triton_calls": triton_calls, "kernel_names_in_hlo": names, "ptxas": ptxas, "problems": problems,
    }


SPATIAL_GPUS = (4, 8)
SPATIAL_STEPS = (("NCDHW", "k2s2"), ("NDHWC", "k3s2p1"))


def _spelled(found: dict) -> str:
    return ", ".join(f"{entry['count']} {name}" for name, entry in sorted(found.items())) or "none"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m checks.gpu_compile_check", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="cases/pooling.py's QUICK_CASES instead of FULL_CASES")
    parser.add_argument("--spatial-only", action="store_true", help="only the spatially sharded programs")
    parser.add_argument("--json", type=Path, default=ROOT / "build" / "gpu_compile_check.json")
    args = parser.parse_args(argv)

    reason = deviceless.missing_wheels()
    if reason is not None:
        print(f"gpu_compile_check: {reason}", file=sys.stderr)
        return 2
    import jax

    from cases import pooling

    sharding = deviceless.replicated_on(deviceless.h200_devices())
    rows = []
    for case in [] if args.spatial_only else pooling.QUICK_CASES if args.quick else pooling.FULL_CASES:
        for job in JOBS:
            for strategy in STRATEGIES:
                rows.append(compile_one(case, job, strategy, sharding))
                r = rows[-1]
                kernels = ", ".join(
                    f"{k}: {v.get('registers')} regs, {v.get('spill_stores', '?')}/{v.get('spill_loads', '?')} spill B"
                    for k, v in sorted(r["ptxas"].items()))
                status = "ok" if not r["problems"] else "FAIL: " + "; ".join(r["problems"])
                print(f"{r['case']:44s} {job:18s} {strategy:9s} {r['compile_s']:5.1f}s  {kernels}  {status}", flush=True)
    spatial = []
    for gpus in SPATIAL_GPUS:
        for layout, window in SPATIAL_STEPS:
            with captured_stderr():  # XLA's ptxas log: the bench programs' table reports it
                spatial.append(deviceless.compile_spatial_step(gpus, layout, window))
            r = spatial[-1]
            status = "ok" if not r["problems"] else "FAIL: " + "; ".join(r["problems"])
            print(f"{r['case']:44s} {r['compile_s']:5.1f}s  XLA: {_spelled(r['plain_collectives'])}, "
                  f"{r['plain_bytes']:,} B; rewritten: {_spelled(r['rewritten_collectives'])}, "
                  f"{r['rewritten_bytes']:,} B  {status}", flush=True)
    failed = [r for r in rows + spatial if r["problems"]]
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({
        "jax": jax.__version__, "target": "NVIDIA H200 (sm_90a), deviceless", "rows": rows, "spatial": spatial,
        "failed": len(failed)}, indent=1))
    print(f"{len(rows) + len(spatial) - len(failed)} passed, {len(failed)} failed; JSON: {args.json}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
