"""Section 3: how long the pass takes, against canonicalize, JAX lowering and XLA compile.

Modules:

* unet       a 3-D U-Net training step (models.unet_*) lowered by JAX.
* synthetic  `blocks` copies of a block of elementwise ops around one max pool
             (cycling k2 s2 / k3 s2 p1 / k3 s1 p1), summed and differentiated
             by jax.grad and lowered by JAX: one select_and_scatter (with its
             pad/slice where padded) per block among ~75 other ops per block.
             Lowered at 1x, 2x, 5x and 10x `blocks`, to see how the pass's
             time grows with module size.

For each module the StableHLO text is parsed afresh for every repetition (not
timed) and only `PassManager.run` is timed: once with the pool3d pass
(`pool3d_pass.add_pass`), once with upstream `canonicalize`, interleaved.
Both pass managers verify the module after the pass (MLIR's default), so the
comparison is like for like. JAX's lowering (trace + lower of a fresh function
object) and XLA's compile of the lowered program are timed for the U-Net and
for the largest synthetic module, as the budget a compile already spends.

Linearity: time(Nx) / (N * time(1x)) for the largest N; 1.0 is linear,
above 1 grows faster than the module.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
from jax import lax
from jaxlib.mlir import ir, passmanager

import pool3d_pass
from bench import models
from bench.timing import Stats, measure_one
from pool3d_pass.ir.context import make_context

FULL = {"unet_input": (1, 1, 32, 32, 32), "unet_channels": (1, 8, 16, 32, 64),
        "blocks": 20, "scales": (1, 2, 5, 10), "repeats": 7, "unet_compile_repeats": 2,
        "compile_repeats": 1}
QUICK = {"unet_input": (1, 1, 8, 8, 8), "unet_channels": (1, 2, 4, 8),
         "blocks": 3, "scales": (1, 2), "repeats": 2, "unet_compile_repeats": 1,
         "compile_repeats": 1}

_WINDOWS = [(2, 2, 0), (3, 2, 1), (3, 1, 1)]  # (kernel, stride, padding), cubic


def _pool(x, k, s, p):
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, k, k, k), (1, 1, s, s, s),
                             ((0, 0), (0, 0)) + ((p, p),) * 3)


def synthetic_function(blocks: int):
    """grad of a sum of `blocks` pooled elementwise blocks: `blocks` pool gradients."""

    def loss(x, w):
        total = 0.0
        for i in range(blocks):
            h = jnp.tanh(x * w[i] + 0.01 * i)
            h = jnp.maximum(h, 0.1 * h) * 1.5 - jnp.sin(x) * 0.2
            h = h / (1.0 + jnp.abs(h))
            k, s, p = _WINDOWS[i % len(_WINDOWS)]
            total = total + jnp.sum(_pool(h, k, s, p) ** 2)
        return total

    return jax.grad(loss)


def _lower_timed(make_fun, args, repeats: int):
    """(Stats of trace+lower of a fresh function object, last Lowered)."""
    box = {}

    def lower():
        box["lowered"] = jax.jit(make_fun()).lower(*args)

    stats = measure_one(lower, repeats=repeats, warmup=0)
    return stats, box["lowered"]


def count_ops(module: ir.Module) -> int:
    """Every operation in the module, nested regions included (the module op excluded)."""
    n = 0

    def visit(op):
        nonlocal n
        n += 1
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return n - 1


def time_passes(text: str, repeats: int) -> dict:
    """Time the pool3d pass and canonicalize on fresh parses of `text`, interleaved."""
    ctx = make_context()
    reports = []
    with ctx:
        pm_pool = passmanager.PassManager("builtin.module")
        pool3d_pass.add_pass(pm_pool, on_report=reports.append)
        pm_canon = passmanager.PassManager.parse("builtin.module(canonicalize)")
        probe = ir.Module.parse(text)
        ops = count_ops(probe)
        del probe

        seconds: dict[str, list[float]] = {"pool3d_pass": [], "canonicalize": []}
        for rep in range(repeats + 1):  # the first round is warm-up
            for name, pm in (("pool3d_pass", pm_pool), ("canonicalize", pm_canon)):
                module = ir.Module.parse(text)
                start = time.perf_counter()
                pm.run(module.operation)
                elapsed = time.perf_counter() - start
                if rep:
                    seconds[name].append(elapsed)
                del module
    stats = {name: Stats.from_seconds(s) for name, s in seconds.items()}
    report = reports[0]
    return {
        "ops": ops,
        "select_and_scatter": report.candidates,
        "rewritten": report.rewritten,
        "missed": len(report.missed),
        "forward_inserted": report.forward_inserted,
        "text_bytes": len(text),
        "ms": stats,
        "pass_vs_canonicalize_of_min": stats["pool3d_pass"].min / stats["canonicalize"].min,
        "pass_vs_canonicalize_of_median": stats["pool3d_pass"].median / stats["canonicalize"].median,
        "pass_us_per_op": stats["pool3d_pass"].min * 1e3 / ops,
        "canonicalize_us_per_op": stats["canonicalize"].min * 1e3 / ops,
    }


def _compile_timed(make_fun, args, repeats: int) -> Stats:
    """XLA compile of a fresh lowering each repeat (a Lowered caches its executable)."""
    seconds = []
    for _ in range(repeats):
        lowered = jax.jit(make_fun()).lower(*args)
        start = time.perf_counter()
        lowered.compile()
        seconds.append(time.perf_counter() - start)
    return Stats.from_seconds(seconds)


def _with_jax_times(record: dict, lower: Stats, compile_: Stats) -> dict:
    p = record["ms"]["pool3d_pass"].min
    record["ms"]["jax_lowering"] = lower
    record["ms"]["xla_compile"] = compile_
    record["pass_vs_jax_lowering_of_min"] = p / lower.min
    record["pass_vs_xla_compile_of_min"] = p / compile_.min
    record["pass_vs_lowering_plus_compile_of_min"] = p / (lower.min + compile_.min)
    return record


def run_unet(cfg: dict, log=print) -> dict:
    log(f"  pass speed: U-Net training step, input {cfg['unet_input']}, channels {cfg['unet_channels']}")
    params = models.unet_init(0, cfg["unet_channels"])
    x = jnp.zeros(cfg["unet_input"], jnp.float32)
    def make_fun():
        return lambda p, a, b: models.unet_train_step(p, a, b)

    lower, lowered = _lower_timed(make_fun, (params, x, x), repeats=cfg["repeats"])
    record = time_passes(lowered.as_text(), cfg["repeats"])
    compile_ = _compile_timed(make_fun, (params, x, x), cfg["unet_compile_repeats"])
    record.update(input_shape=list(cfg["unet_input"]), channels=list(cfg["unet_channels"]))
    return _with_jax_times(record, lower, compile_)


def run_synthetic(cfg: dict, log=print) -> dict:
    x = jnp.zeros((1, 2, 8, 8, 8), jnp.float32)
    scales = []
    for scale in cfg["scales"]:
        blocks = cfg["blocks"] * scale
        log(f"  pass speed: synthetic module x{scale} ({blocks} pool gradients)")
        w = jnp.ones((blocks,), jnp.float32)
        lower, lowered = _lower_timed(lambda b=blocks: synthetic_function(b), (x, w),
                                      repeats=1 if scale > 2 else 2)
        record = time_passes(lowered.as_text(), cfg["repeats"])
        record["scale"] = scale
        record["blocks"] = blocks
        record["ms"]["jax_lowering"] = lower
        scales.append(record)
    largest = scales[-1]
    log(f"  pass speed: XLA compile of the synthetic module x{largest['scale']}")
    compile_ = _compile_timed(lambda: synthetic_function(largest["blocks"]), (x, w), cfg["compile_repeats"])
    _with_jax_times(largest, largest["ms"]["jax_lowering"], compile_)

    first, n = scales[0], largest["scale"] / scales[0]["scale"]

    def linearity(name):
        return largest["ms"][name].min / (n * first["ms"][name].min)

    return {
        "block": "x*w -> tanh, leaky max, sin, rational -> max pool (k2s2 | k3s2p1 | k3s1p1) -> sum of squares",
        "tensor": [1, 2, 8, 8, 8],
        "scales": scales,
        "growth": f"x{scales[0]['scale']} -> x{largest['scale']}",
        "linearity_pool3d_pass": linearity("pool3d_pass"),
        "linearity_canonicalize": linearity("canonicalize"),
        "note": "linearity = time(largest) / (size ratio * time(smallest)), of min times; 1.0 is linear",
    }


def run(quick: bool, log=print) -> dict:
    cfg = QUICK if quick else FULL
    return {"unet": run_unet(cfg, log), "synthetic": run_synthetic(cfg, log)}
