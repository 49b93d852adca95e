"""Section 2: a whole training step of a small 3-D CNN, plain jax.jit vs pool3d_pass.jit.

The model (models.cnn_*) is [conv 3x3x3, ReLU, max pool k2 s2] x 3, global
mean, dense, softmax cross-entropy, one SGD update. Both programs start from
the same parameters and batch; the record holds both losses and the largest
difference of the updated parameters, so "same result" is checked, not assumed.

When the pass's own choice on CPU is the indices strategy, a third program,
`pool3d_pass.jit` forced to the recompute strategy, is timed beside them:
what the layer calls gain in a training step.
"""

from __future__ import annotations

import jax
import numpy as np

from bench import models, rewritten
from bench.timing import blocking, measure
from cases import pooling

FULL = {"batch": (4, 1, 32, 64, 64), "channels": (1, 8, 16, 32), "repeats": 7}
QUICK = {**FULL, "repeats": 5}  # make bench-quick: the same step, fewer runs


def run(quick: bool, log=print) -> dict:
    cfg = QUICK if quick else FULL
    log(f"  training step: 3-D CNN, input {cfg['batch']}, channels {cfg['channels']}")
    rng = np.random.default_rng(1)
    params = models.cnn_init(0, cfg["channels"])
    x = jax.numpy.asarray(rng.standard_normal(cfg["batch"], np.float32))
    labels = jax.numpy.asarray(rng.integers(0, 10, cfg["batch"][0], dtype=np.int32))

    plain, rew, counts = rewritten.compile_both(models.cnn_train_step, params, x, labels)
    programs = {"jax_jit": plain, "pool3d_pass_jit": rew}
    censuses = {"pool3d_pass_jit": counts}
    if "indices" in rewritten.strategy_of(counts):
        forced = rewritten.compile_rewritten(models.cnn_train_step, params, x, labels, strategy="recompute")
        programs["recompute"] = forced
        censuses["recompute"] = rewritten.census(forced)

    results = {name: p(params, x, labels) for name, p in programs.items()}
    p_plain, loss_plain = results["jax_jit"]
    p_rew, loss_rew = results["pool3d_pass_jit"]

    stats = measure({name: blocking(p, params, x, labels) for name, p in programs.items()},
                    repeats=cfg["repeats"], warmup=1)
    loss_plain, loss_rew = float(loss_plain), float(loss_rew)
    strategies = {}
    for name in censuses:
        p_new, loss = results[name]
        strategies[name] = {
            "strategy": rewritten.strategy_of(censuses[name]),
            "census": censuses[name],
            "loss": float(loss),
            "updated_params_max_abs_diff": pooling.tree_max_abs_diff(p_plain, p_new),
            "speedup_of_min": stats["jax_jit"].min / stats[name].min,
            "speedup_of_median": stats["jax_jit"].median / stats[name].median,
        }
    return {
        "model": "3-D CNN: [conv3x3x3, ReLU, maxpool k2 s2] x 3, global mean, dense, softmax CE, SGD",
        "input_shape": list(cfg["batch"]),
        "channels": list(cfg["channels"]),
        "repeats": cfg["repeats"],
        "ms": dict(stats),
        "speedup_of_min": stats["jax_jit"].min / stats["pool3d_pass_jit"].min,
        "speedup_of_median": stats["jax_jit"].median / stats["pool3d_pass_jit"].median,
        "loss_jax_jit": loss_plain,
        "loss_pool3d_pass_jit": loss_rew,
        "loss_abs_diff": abs(loss_plain - loss_rew),
        "same_loss": bool(np.isclose(loss_plain, loss_rew, rtol=1e-5, atol=1e-6)),
        "updated_params_max_abs_diff": pooling.tree_max_abs_diff(p_plain, p_rew),
        "rewritten_kernel_calls": sum(counts[k] for k in ("backward", "forward", "backward_from_indices",
                                                          "backward_from_input")),
        "programs": strategies,
    }
