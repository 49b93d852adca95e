"""Stage "model": what a user feels: a Flax C3D-style train step, `jax.jit` against `pool3d_pass.jit`.

The model of cases/c3d.py (channels-last Conv 3x3x3 + ReLU + max_pool
per level, Adam), at a GPU-sized batch, in f32 and in bf16 activations. Both
programs run on the same arguments; the record holds the step times, the
pool3d kernel calls in the rewritten program, both losses and the largest
difference of the updated parameters. Then each program runs a few steps
under `jax.profiler.trace` and its device time is split by kernel class
(trace.py: the pass's kernels, XLA's pool pieces, convolutions, transposes
and copies, other), one `model_split` record per program, so the whole-step
figure is explained by where the time went.
"""

from __future__ import annotations

import tempfile
import time

from checks.device_check import trace
from checks.device_check.jobs import kernel_calls
from checks.device_check.timing import _jax_timer, measure


def run(rec, budget, dry_run: bool, log, rounds: int) -> None:
    import jax

    import pool3d_pass
    from cases import c3d, pooling

    cfg = c3d.DRY_RUN if dry_run else c3d.DEVICE
    for name in ("bf16", "f32"):
        label = f"flax C3D {name} {cfg['batch']} channels {cfg['channels']}"
        if not budget.fits(20.0):
            rec.record("skipped", item=label, reason=f"budget: {budget.left():.0f} s left")
            continue
        start = time.monotonic()
        case = c3d.problem(cfg, name)
        args = case.train_arguments
        plain = jax.jit(case.train_step).lower(*args).compile()
        ours = pool3d_pass.jit(case.train_step, strategy="indices").lower(*args).compile()
        ms = measure({"jax.jit": _jax_timer(plain, [args]), "pool3d_pass.jit": _jax_timer(ours, [args])}, rounds)
        p_plain, _, loss_plain = plain(*args)
        p_ours, _, loss_ours = ours(*args)
        row = rec.record("model", model=label, ms=ms, kernel_calls=kernel_calls(ours.as_text()),
                         loss_jax_jit=float(loss_plain), loss_pool3d_pass_jit=float(loss_ours),
                         updated_params_max_abs_diff=pooling.tree_max_abs_diff(p_plain, p_ours),
                         jax_over_pool3d=ms["jax.jit"]["min_ms"] / ms["pool3d_pass.jit"]["min_ms"])
        rec.table(f"| model | {label} | jax.jit {ms['jax.jit']['min_ms']:.2f} ms | pool3d_pass.jit "
                  f"{ms['pool3d_pass.jit']['min_ms']:.2f} ms | {row['jax_over_pool3d']:.2f}x | "
                  f"loss {float(loss_plain):.5f} / {float(loss_ours):.5f} | {row['kernel_calls']} kernel calls |")
        for program, compiled in (("jax.jit", plain), ("pool3d_pass.jit", ours)):
            try:
                with tempfile.TemporaryDirectory(prefix="pool3d-trace-") as log_dir:
                    split = trace.profile(compiled, args, 2 if dry_run else 5, log_dir)
            except Exception as error:  # noqa: BLE001 - the timing above stands without its split
                rec.record("error", item=f"{label} / {program} trace",
                           error=f"{type(error).__name__}: {str(error)[:300]}")
                continue
            split["step_min_ms"] = ms[program]["min_ms"]
            rec.record("model_split", model=label, program=program, **split)
            rec.table(f"| model split | {label} | {program} | {split_text(split)} |")
        log(f"model {name}: {time.monotonic() - start:.1f} s")


def split_text(split: dict) -> str:
    """One line: device ms per step by class, or why there is none."""
    if not split.get("device_events"):
        return split.get("note", "no device events")
    per = split["per_step_ms"]
    total = sum(per.values())
    text = f"device {total:.2f} ms/step: " + ", ".join(f"{cls} {ms:.2f}" for cls, ms in per.items())
    if isinstance(split.get("step_min_ms"), (int, float)):  # the step's time outside kernels: gaps, launches
        text += f"; step minus kernels {split['step_min_ms'] - total:.2f} ms"
    return text
