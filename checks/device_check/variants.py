"""Stage "variants": the CUDA kernels' launch variants timed side by side on the 1 GiB rows.

The CUDA library reads two environment variables at every call:
`POOL3D_CUDA_THREADS` (threads per block: 128, 256 or 512; default 256) and
`POOL3D_CUDA_VECTOR=0` (force the scalar paths). JAX caches compiled
executables and the pass caches lowerings per process, so each variant runs
in a child process of its own with its variables set (`child`), each with an
equal share of what is left of the stage's budget and the same rows in the
same order, so a short budget cuts the same rows from every variant. Rows:
the timing stage's large class rows (1 GiB of f32 input, half that of bf16),
jobs "gradient only" and "inference", pool3d_pass.jit with strategy
"indices" only. Each child appends `variant_timing` records; the stage then
records, per row, every variant's time and the fastest (`variant_best`).

Where the Pallas kernels serve, the variables change nothing: the records
say which implementation ran, and the figures are then a repeatability check.
"""

from __future__ import annotations

import math
import os
import time

from pool3d_pass import environment

THREADS_ENV = environment.CUDA_THREADS
VECTOR_ENV = environment.CUDA_VECTOR
# name: the variables the child runs with (the first is the library's default)
VARIANTS = {
    "256 threads, vector": {THREADS_ENV: "256"},
    "128 threads, vector": {THREADS_ENV: "128"},
    "512 threads, vector": {THREADS_ENV: "512"},
    "256 threads, scalar": {THREADS_ENV: "256", VECTOR_ENV: "0"},
}
JOBS = ("gradient only", "inference")


def rows(dry_run: bool) -> list:
    """(Timed, job) pairs every variant times, in order: each large class row, gradient then inference.

    The dry run (interpret-mode compiles take seconds each): the first row's gradient alone.
    """
    from checks.device_check.timing import device_cases

    timed = device_cases(dry_run)
    if dry_run:
        return [(timed[0], JOBS[0])]
    return [(t, job) for t in timed if t.size_class == "large" for job in JOBS]


def child(rec, budget, dry_run: bool, log, rounds: int, variant: str) -> None:
    """In the variant's own process: time each row with pool3d_pass.jit (indices); one record per row."""
    import jax

    import pool3d_pass
    from cases import pooling
    from checks.device_check.jobs import job_function, kernel_calls, not_rewritten
    from checks.device_check.timing import _jax_sets, _jax_timer, measure
    from pool3d_pass.bindings.gpu.binding import implementation

    per_item = 3.0
    for t, job in rows(dry_run):
        item = f"{t.case.name} / {job}"
        if not budget.fits(per_item):
            rec.record("skipped", item=f"variant {variant}: {item}", reason=f"budget: {budget.left():.0f} s left")
            continue
        start = time.monotonic()
        try:
            sets = _jax_sets(t, 2, key=len(t.case.name))
            arg_sets = [(x,) if job == "inference" else (x, g) for x, g in sets]
            compiled = pool3d_pass.jit(job_function(job, pooling.pool_fn(t.case)), strategy="indices").lower(
                *arg_sets[0]).compile()
            text = compiled.as_text()
            ms = measure({"pool3d indices": _jax_timer(compiled, arg_sets)}, rounds)["pool3d indices"]
            rec.record("variant_timing", variant=variant, env={k: os.environ.get(k) for k in (THREADS_ENV, VECTOR_ENV)},
                       implementation=implementation(), case=t.case.name, job=job, ms=ms,
                       kernel_calls=kernel_calls(text), problem=not_rewritten(text, job, dry_run))
            log(f"variant {variant}: {item}: {ms['min_ms']:.3f} ms")
        except Exception as error:  # noqa: BLE001 - one row's failure is a result; the others still run
            rec.record("error", item=f"variant {variant}: {item}", error=f"{type(error).__name__}: {str(error)[:300]}")
        per_item = max(per_item * 0.5, time.monotonic() - start)
        jax.clear_caches()


def best(records: list[dict]) -> list[dict]:
    """Per (case, job): {"case", "job", "ms": {variant: min ms}, "fastest", "over_default"} from variant_timing rows."""
    table: dict = {}
    for r in records:
        if r.get("kind") == "variant_timing" and not r.get("problem"):
            table.setdefault((r["case"], r["job"]), {})[r["variant"]] = float(r["ms"]["min_ms"])
    default = next(iter(VARIANTS))
    out = []
    for (case, job), ms in table.items():
        fastest = min(ms, key=ms.get)
        over = ms[default] / ms[fastest] if default in ms and ms[fastest] > 0 else None
        out.append({"case": case, "job": job, "ms": ms, "fastest": fastest, "default_over_fastest": over})
    return out


def run(rec, budget, run_child, log) -> None:
    """Each variant in its own process (`run_child(variant, env, seconds)` -> exit status or "killed")."""
    from checks.device_check.record import read_records

    names = list(VARIANTS)
    for i, name in enumerate(names):
        seconds = budget.left() / (len(names) - i)
        if seconds < 5:
            rec.record("skipped", item=f"variant {name}", reason=f"budget: {budget.left():.0f} s left")
            continue
        log(f"variant {name}: {seconds:.0f} s")
        status = run_child(name, VARIANTS[name], seconds)
        if status != 0:
            rec.record("stage_error", item=f"variant {name}", error=f"its process ended with {status}")
    for row in best(read_records(rec.out)):
        rec.record("variant_best", **row)
        cells = " | ".join(f"{v} {row['ms'][v]:.3f}" if v in row["ms"] else f"{v} -" for v in names)
        over = row["default_over_fastest"]
        rec.table(f"| variants | {row['case']} / {row['job']} | {cells} | fastest: {row['fastest']}"
                  f"{f' ({over:.2f}x the default)' if isinstance(over, float) and math.isfinite(over) else ''} |")
