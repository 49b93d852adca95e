"""Section 1: the user's view. One pooling layer's two jobs, XLA vs pool3d_pass.jit vs PyTorch.

For each case (shape, window, layout, dtype) and each job:

* "gradient only"      x, g -> dx. JAX: `jax.vjp(pool, x)[1](g)[0]`, the primal
                       unused (what `jax.grad` of a loss through a pool
                       runs); torch: `max_pool3d_with_indices(x)` then
                       `max_pool3d_with_indices_backward(g, x, ..., indices)`
                       (torch needs the forward for its indices).
* "forward + gradient" x, g -> (y, dx). JAX: the same vjp keeping y (what a
                       training step runs); torch: the same two ops,
                       returning both.

Variants, timed interleaved (timing.py):

* xla         `jax.jit(job)`: XLA's own program (on CPU an argmax
              `reduce-window` plus a `scatter` for the gradient, a
              `reduce-window` for y).
* pool3d      `pool3d_pass.jit(job)`: what a user of the pass gets; the
              strategy is the pass's own choice for the platform (`indices`
              where the cpu binding runs the layer calls).
* recompute   `pool3d_pass.jit(job)` forced to the recompute strategy (the
              backward call on (g, x, y), with XLA's `reduce-window` for y),
              when the pass's own choice is another strategy: what the
              layer calls gained.
* torch       PyTorch CPU doing the same job, `torch.set_num_threads(cores)`.
* negate      `jax.jit(jnp.negative)(x)`: XLA's simplest program with a
              result of x's size (read x, write as much as dx): what XLA's
              own code pays for a result that size, dispatch, allocation and
              first-touch page faults included. Not a bound on the kernels
              (on large NCDHW shapes they beat it), a yardstick.
* jax_call    `jax.jit(jnp.negative)` of 4 elements: what any call from JAX
              costs before its program does anything, timed like the rest
              (after the settle step, so from cold caches).

The floor of a job is the fewest bytes it must move (read x and g; write dx,
and y for "forward + gradient") at the copy bandwidth measured in the same
run: no implementation's time goes below it, so `torch ms / floor ms` is the
largest `torch / pool3d_pass.jit` ratio any program could show on the
machine, and `XLA ms / (JAX call ms + floor ms)` (likewise torch's) the
largest ratio any program called from JAX could show: where it is below a
target, the target is out of reach through JAX.

Every program is compiled before timing (compile excluded); inputs live on
the device (host memory) before timing, so no transfer is timed; JAX results
are waited for. Each variant's results are compared with XLA's (max abs diff;
XLA's program is JAX's explicit-pad form: a -inf `pad`, then an unpadded
window), and the calls in the rewritten program are counted in what XLA
compiled (rewritten.census).
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np

from bench import rewritten
from bench.timing import blocking, jax_call, measure
from cases import pooling

try:
    import torch
except ImportError:  # torch is optional: its columns are skipped
    torch = None

JOBS = pooling.JOBS


def _torch_job(job: str, tp: pooling.TorchPool, x, g):
    if job == "gradient only":
        def run():
            _, idx = tp.pool_with_indices(x)
            return tp.grad_from_indices(g, x, idx)
    else:
        def run():
            y, idx = tp.pool_with_indices(x)
            return y, tp.grad_from_indices(g, x, idx)
    return run


def _as_tuple(r):
    return r if isinstance(r, tuple) else (r,)


def floor_bytes(job: str, x_np, g_np) -> int:
    """Bytes the job must move at least: read x and g, write dx (and y when the job returns it)."""
    outputs = x_np.size + (g_np.size if job == "forward + gradient" else 0)
    return int((x_np.size + g_np.size + outputs) * x_np.dtype.itemsize)


def run_job(case: pooling.Case, job: str, x, g, x_np, g_np, *, repeats: int,
            bandwidth_gb_s: float | None = None) -> dict:
    fun = pooling.jax_job(job, pooling.pool_fn(case))
    xla = rewritten.compile_plain(fun, x, g)
    pool3d = rewritten.compile_rewritten(fun, x, g)
    counts = {"xla": rewritten.census(xla), "pool3d": rewritten.census(pool3d)}
    programs = {"xla": xla, "pool3d": pool3d}
    strategy = rewritten.strategy_of(counts["pool3d"])
    if "indices" in strategy:
        recompute = rewritten.compile_rewritten(fun, x, g, strategy="recompute")
        programs["recompute"] = recompute
        counts["recompute"] = rewritten.census(recompute)

    variants = {name: blocking(p, x, g) for name, p in programs.items()}
    variants["negate"] = blocking(jax.jit(jnp.negative), x)
    variants["jax_call"] = jax_call(x.dtype)
    torch_run = None
    if torch is not None:
        tp = pooling.TorchPool(case, torch)
        torch_run = _torch_job(job, tp, tp.tensor(x_np), tp.tensor(g_np))
        variants["torch"] = torch_run

    # Results first (also warms every variant), then the interleaved timing.
    ref = [np.asarray(a) for a in _as_tuple(xla(x, g))]
    names = ["y", "dx"] if len(ref) == 2 else ["dx"]
    checks = {}
    for name, p in programs.items():
        if name == "xla":
            continue
        for out_name, a, b in zip(names, _as_tuple(p(x, g)), ref):
            checks[f"{name}_{out_name}_max_abs_diff_vs_xla"] = pooling.max_abs_diff(a, b)
    if torch_run is not None:
        for out_name, a, b in zip(names, _as_tuple(torch_run()), ref):
            checks[f"torch_{out_name}_max_abs_diff_vs_xla"] = pooling.max_abs_diff(tp.to_numpy(a), b)

    stats = measure(variants, repeats=repeats, warmup=1)
    floor_ms = None if not bandwidth_gb_s else floor_bytes(job, x_np, g_np) / (bandwidth_gb_s * 1e9) * 1e3

    def ratios(key: str) -> dict:
        ms = {name: s[key] for name, s in stats.items()}
        out = {"xla_vs_pool3d": ms["xla"] / ms["pool3d"]}
        if "torch" in ms:
            out["torch_vs_pool3d"] = ms["torch"] / ms["pool3d"]
        out["xla_vs_negate"] = ms["xla"] / ms["negate"]
        if floor_ms:
            out["xla_vs_jax_call_and_floor"] = ms["xla"] / (ms["jax_call"] + floor_ms)
        if "torch" in ms and floor_ms:
            out["torch_vs_floor"] = ms["torch"] / floor_ms
            out["torch_vs_jax_call_and_floor"] = ms["torch"] / (ms["jax_call"] + floor_ms)
        if "recompute" in ms:
            out["recompute_vs_pool3d"] = ms["recompute"] / ms["pool3d"]
            out["xla_vs_recompute"] = ms["xla"] / ms["recompute"]
        return out

    return {
        "job": job,
        "ms": dict(stats),
        "floor_ms": floor_ms,
        "ratios_of_min": ratios("min_ms"),
        "ratios_of_median": ratios("median_ms"),
        "strategy": strategy,
        "census": counts,
        "checks": checks,
    }


def run_case(case: pooling.Case, *, repeats: int | None = None, bandwidth_gb_s: float | None = None) -> dict:
    x_np, g_np = pooling.inputs(case)
    x, g = jax.block_until_ready((jnp.asarray(x_np), jnp.asarray(g_np)))
    jobs = [run_job(case, job, x, g, x_np, g_np, repeats=repeats or case.repeats, bandwidth_gb_s=bandwidth_gb_s)
            for job in JOBS]
    return {
        **pooling.describe(case, repeats or case.repeats),
        "jobs": jobs,
    }


def run(quick: bool, bandwidth_gb_s: float | None = None, log=print) -> dict:
    if torch is not None:
        torch.set_num_threads(os.cpu_count() or 1)
    results = []
    for case in pooling.QUICK_TABLE_CASES if quick else pooling.FULL_CASES:
        log(f"  user view: {case.name}")
        results.append(run_case(case, bandwidth_gb_s=bandwidth_gb_s))
    return {
        "cases": results,
        "layer_calls_in_cpu_binding": rewritten.binding_has_layer_calls(),
        "torch": None if torch is None else torch.__version__,
        "torch_threads": None if torch is None else torch.get_num_threads(),
        "note": None if torch is not None else "torch not installed: torch columns skipped "
                "(pip install torch==2.13.0)",
    }
