"""Stage "model": what a user feels: a Flax C3D-style train step, `jax.jit` against `pool3d_pass.jit`.

The model of bench/flax_c3d.py (channels-last Conv 3x3x3 + ReLU + max_pool
per level, Adam), at a GPU-sized batch, in f32 and in bf16 activations. Both
programs run on the same arguments; the record holds the step times, the
pool3d kernel calls in the rewritten program, both losses and the largest
difference of the updated parameters.
"""

from __future__ import annotations

import time

import numpy as np

from device_check.jobs import kernel_calls
from device_check.timing import _jax_timer, measure

DEVICE = {"batch": (8, 16, 112, 112, 3), "channels": (64, 128, 256, 256)}
DRY_RUN = {"batch": (1, 4, 8, 8, 3), "channels": (4, 8)}


def run(rec, budget, dry_run: bool, log, rounds: int) -> None:
    import jax
    import jax.numpy as jnp
    import optax

    import cases
    import flax_c3d
    import pool3d_pass

    cfg = DRY_RUN if dry_run else DEVICE
    for name in ("bf16", "f32"):
        label = f"flax C3D {name} {cfg['batch']} channels {cfg['channels']}"
        if not budget.fits(20.0):
            rec.record("skipped", item=label, reason=f"budget: {budget.left():.0f} s left")
            continue
        start = time.monotonic()
        net = flax_c3d.model(cfg["channels"], flax_c3d.PRECISIONS[name])
        optimizer = optax.adam(1e-3)
        train_step, _ = flax_c3d.steps(net, optimizer)
        rng = np.random.default_rng(2)
        x = jnp.asarray(rng.standard_normal(cfg["batch"], np.float32))
        labels = jnp.asarray(rng.integers(0, flax_c3d.CLASSES, cfg["batch"][0], dtype=np.int32))
        params = net.init(jax.random.PRNGKey(0), x)
        args = (params, optimizer.init(params), x, labels)
        plain = jax.jit(train_step).lower(*args).compile()
        ours = pool3d_pass.jit(train_step, strategy="indices").lower(*args).compile()
        ms = measure({"jax.jit": _jax_timer(plain, [args]), "pool3d_pass.jit": _jax_timer(ours, [args])}, rounds)
        p_plain, _, loss_plain = plain(*args)
        p_ours, _, loss_ours = ours(*args)
        row = rec.record("model", model=label, ms=ms, kernel_calls=kernel_calls(ours.as_text()),
                         loss_jax_jit=float(loss_plain), loss_pool3d_pass_jit=float(loss_ours),
                         updated_params_max_abs_diff=cases.tree_max_abs_diff(p_plain, p_ours),
                         jax_over_pool3d=ms["jax.jit"]["min_ms"] / ms["pool3d_pass.jit"]["min_ms"])
        rec.table(f"| model | {label} | jax.jit {ms['jax.jit']['min_ms']:.2f} ms | pool3d_pass.jit "
                  f"{ms['pool3d_pass.jit']['min_ms']:.2f} ms | {row['jax_over_pool3d']:.2f}x | "
                  f"loss {float(loss_plain):.5f} / {float(loss_ours):.5f} | {row['kernel_calls']} kernel calls |")
        log(f"model {name}: {time.monotonic() - start:.1f} s")
