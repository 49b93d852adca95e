"""Section 3: the max-pool backward kernels alone, per shape, against XLA, torch and the floor.

For each case (shape, window, layout, dtype):

* xla          the original gradient program: `jax.jit(lambda x, g: vjp(pool, x)[1](g)[0])`,
               pool = `lax.reduce_window` max; XLA:CPU runs an argmax
               `reduce-window` plus a `scatter` (its `select_and_scatter`).
* rewritten    the same function through `pool3d_pass.jit` (its strategy:
               section 1 and the `calls` check).
* kernel       the recompute kernel alone, `jax.jit` of
               `bindings.cpu.max_pooling_3d_backward(g, x, y)`, y precomputed.
* from_indices `bindings.cpu.max_pooling_3d_backward_from_indices(g, indices)`
               with the forward call's indices precomputed (n/a until the
               cpu binding has the call).
* from_input   `bindings.cpu.max_pooling_3d_backward_from_input(g, x)`: the
               fused bare-gradient call (n/a until the cpu binding has it).
* torch        `aten.max_pool{2,3}d_with_indices_backward` given the forward's
               indices (torch threads = the machine's cores); absent without torch.
* floor        the fewest bytes the recompute kernel's job must move (read
               x, y, g; write dx) divided by the copy bandwidth measured in
               the same run. The from_indices floor is that call's own job
               (read g and its int16 indices; write dx): `torch / from_indices
               floor` is about the largest `from_indices vs torch` any program
               could show here.
* negate       `jax.jit(jnp.negative)(x)`: the cheapest XLA program that reads x
               and writes a fresh result of dx's size. XLA allocates every
               result anew (above glibc's 32 MiB mmap threshold a fresh
               mapping, whose first-touch page faults cost as much as the
               copy itself): this is the floor as seen from inside XLA.
* jax_call     `jax.jit(jnp.negative)` of 4 elements: what any call from JAX
               costs before its kernel does anything, timed like the others
               (after the settle step, so from cold caches).
* torch_call   `torch.neg` of 4 elements: the same for PyTorch.
               `from_indices net vs torch net` = (torch - torch_call) /
               (from_indices - jax_call): the kernels against each other once
               each framework's call is taken off. `torch / (JAX call + from_indices
               floor)` is the most any call from JAX could show against torch:
               where it is below a target, the target is out of reach through JAX.

2-D cases (NCHW) run the kernels on a unit depth axis (B, C, 1, H, W).
All variants are timed interleaved (see timing.py); their results are compared
against XLA's, so a fast wrong answer shows up in the JSON.
"""

from __future__ import annotations

import os
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from bench import rewritten
from bench.timing import blocking, jax_call, measure
from cases import pooling
from pool3d_pass.bindings import cpu as cpu_binding

try:
    import torch
except ImportError:  # torch is optional: its columns are skipped
    torch = None

# Kept for callers of the old module layout.
Case, FULL_CASES, QUICK_CASES = pooling.Case, pooling.FULL_CASES, pooling.QUICK_CASES


def _binding_call(name: str):
    return getattr(cpu_binding, name, None)


def run_case(case: pooling.Case, bandwidth_gb_s: float, *, repeats: int | None = None) -> dict:
    """Time one case every way and return its JSON record (ms figures and ratios)."""
    x_np, g_np = pooling.inputs(case)
    pool = pooling.pool_fn(case)

    def grad(x, g):
        return jax.vjp(pool, x)[1](g)[0]

    x, g = jnp.asarray(x_np), jnp.asarray(g_np)
    y = jax.block_until_ready(jax.jit(pool)(x))

    xla, rew, counts = rewritten.compile_both(grad, x, g)
    attrs = pooling.kernel_attrs(case)
    g5, x5, y5 = pooling.as_rank5(g, case), pooling.as_rank5(x, case), pooling.as_rank5(y, case)
    kern = jax.jit(partial(cpu_binding.max_pooling_3d_backward, **attrs))

    variants = {
        "xla": blocking(xla, x, g),
        "rewritten": blocking(rew, x, g),
        "kernel": blocking(kern, g5, x5, y5),
        "negate": blocking(jax.jit(jnp.negative), x),
        "jax_call": jax_call(x.dtype),
    }
    layer = {}
    forward = _binding_call("max_pooling_3d_forward")
    from_indices = _binding_call("max_pooling_3d_backward_from_indices")
    from_input = _binding_call("max_pooling_3d_backward_from_input")
    if rewritten.binding_has_layer_calls() and forward and from_indices and from_input:
        _, idx5 = jax.block_until_ready(jax.jit(partial(forward, **attrs))(x5))
        layer["from_indices"] = (jax.jit(partial(from_indices, input_shape=tuple(x5.shape), **attrs)), (g5, idx5))
        layer["from_input"] = (jax.jit(partial(from_input, **attrs)), (g5, x5))
        for name, (fn, args) in layer.items():
            variants[name] = blocking(fn, *args)
    torch_run = None
    if torch is not None:
        tp = pooling.TorchPool(case, torch)
        xt, gt = tp.tensor(x_np), tp.tensor(g_np)
        _, idx_t = tp.pool_with_indices(xt)

        def torch_run():
            return tp.grad_from_indices(gt, xt, idx_t)

        variants["torch"] = torch_run
        tiny_t = torch.zeros(4, dtype=tp.dtype)
        variants["torch_call"] = lambda: torch.neg(tiny_t)

    # Results first (this also compiles the kernels and warms torch), then the interleaved timing.
    dx_xla = np.asarray(xla(x, g))
    checks = {
        "rewritten_max_abs_diff_vs_xla": pooling.max_abs_diff(rew(x, g), dx_xla),
        "kernel_max_abs_diff_vs_xla": pooling.max_abs_diff(np.asarray(kern(g5, x5, y5)).reshape(dx_xla.shape), dx_xla),
    }
    for name, (fn, args) in layer.items():
        checks[f"{name}_max_abs_diff_vs_xla"] = pooling.max_abs_diff(np.asarray(fn(*args)).reshape(dx_xla.shape),
                                                                    dx_xla)
    if torch_run is not None:
        checks["torch_max_abs_diff_vs_xla"] = pooling.max_abs_diff(tp.to_numpy(torch_run()), dx_xla)

    stats = measure(variants, repeats=repeats or case.repeats, warmup=1)

    itemsize = pooling.np_dtype(case.dtype).itemsize
    floor_bytes = (2 * x_np.size + 2 * g_np.size) * itemsize  # read x, y, g; write dx
    floor_ms = floor_bytes / (bandwidth_gb_s * 1e9) * 1e3
    # from_indices' own job: read g and its int16 indices; write dx
    from_indices_floor_ms = (g_np.size * (itemsize + 2) + x_np.size * itemsize) / (bandwidth_gb_s * 1e9) * 1e3

    def ratios(key: str) -> dict:
        ms = {name: s[key] for name, s in stats.items()}
        out = {
            "kernel_vs_xla_speedup": ms["xla"] / ms["kernel"],
            "rewritten_vs_xla_speedup": ms["xla"] / ms["rewritten"],
            "floor_fraction": floor_ms / ms["kernel"],
            "negate_fraction": ms["negate"] / ms["kernel"],
        }
        if "torch" in ms:
            out["kernel_vs_torch_speedup"] = ms["torch"] / ms["kernel"]
        for name in layer:
            out[f"{name}_vs_xla_speedup"] = ms["xla"] / ms[name]
            if "torch" in ms:
                out[f"{name}_vs_torch_speedup"] = ms["torch"] / ms[name]
        if "from_indices" in ms:
            out["from_indices_floor_fraction"] = from_indices_floor_ms / ms["from_indices"]
            if "torch" in ms:
                out["torch_vs_from_indices_floor"] = ms["torch"] / from_indices_floor_ms
                out["torch_vs_jax_call_and_from_indices_floor"] = ms["torch"] / (ms["jax_call"] + from_indices_floor_ms)
                net_ours, net_torch = ms["from_indices"] - ms["jax_call"], ms["torch"] - ms["torch_call"]
                if net_ours > 0 and net_torch > 0:
                    out["from_indices_net_vs_torch_net"] = net_torch / net_ours
        return out

    return {
        **pooling.describe(case, repeats or case.repeats),
        "ms": dict(stats),
        "floor_bytes": int(floor_bytes),
        "floor_ms": floor_ms,
        "from_indices_floor_ms": from_indices_floor_ms,
        "ratios_of_min": ratios("min_ms"),
        "ratios_of_median": ratios("median_ms"),
        "rewritten_census": counts,
        "rewritten_strategy": rewritten.strategy_of(counts),
        "rewritten_kernel_calls": sum(counts[k] for k in ("backward", "forward", "backward_from_indices",
                                                          "backward_from_input")),
        "checks": checks,
        "torch_threads": torch.get_num_threads() if torch is not None else None,
    }


def run(quick: bool, bandwidth_gb_s: float, log=print) -> dict:
    """All cases of the kernel-alone section."""
    if torch is not None:
        torch.set_num_threads(os.cpu_count() or 1)
    results = []
    for case in pooling.QUICK_CASES if quick else pooling.FULL_CASES:
        log(f"  kernels alone: {case.name}")
        results.append(run_case(case, bandwidth_gb_s))
    return {
        "cases": results,
        "torch": None if torch is None else torch.__version__,
        "note": None if torch is not None else "torch not installed: torch columns skipped "
                "(pip install torch==2.13.0)",
    }
