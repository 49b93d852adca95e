"""Section 6: a C3D-style Flax model (NDHWC), its Adam train step and its inference step (cases/c3d.py).

Two programs per precision, each compiled by `jax.jit` and by
`pool3d_pass.jit`, timed interleaved:

* train step      (params, opt_state, x, labels) -> (params, opt_state, loss);
* inference step  (params, x) -> logits, no gradient: what the pass does with
                  forward max pools alone (forward_output where the binding's
                  speed rule says it is faster, XLA's reduce_window elsewhere).

The record holds the calls counted in each compiled program, both losses,
the largest difference of the updated parameters, and whether the inference
logits are bit-identical, so "same result" is checked, not assumed.
"""

from __future__ import annotations

import numpy as np

from bench import rewritten
from bench.timing import blocking, measure
from cases import c3d, pooling


def _timed(programs: dict, args, repeats: int) -> dict:
    stats = measure({name: blocking(p, *args) for name, p in programs.items()}, repeats=repeats, warmup=1)
    return {"ms": dict(stats),
            "speedup_of_min": stats["jax_jit"].min / stats["pool3d_pass_jit"].min,
            "speedup_of_median": stats["jax_jit"].median / stats["pool3d_pass_jit"].median}


def run_precision(name: str, cfg: dict, log=print) -> dict:
    case = c3d.problem(cfg, name)
    train_step, inference_step, params, x = case.train_step, case.inference_step, case.params, case.x

    log(f"  flax C3D {name}: train step")
    train_args = case.train_arguments
    plain, rew, counts = rewritten.compile_both(train_step, *train_args)
    train = _timed({"jax_jit": plain, "pool3d_pass_jit": rew}, train_args, cfg["repeats"])
    p_plain, _, loss_plain = plain(*train_args)
    p_rew, _, loss_rew = rew(*train_args)
    train.update({
        "strategy": rewritten.strategy_of(counts), "census": counts,
        "loss_jax_jit": float(loss_plain), "loss_pool3d_pass_jit": float(loss_rew),
        "same_loss": bool(np.isclose(float(loss_plain), float(loss_rew), rtol=1e-5, atol=1e-6)),
        "updated_params_max_abs_diff": pooling.tree_max_abs_diff(p_plain, p_rew),
    })

    log(f"  flax C3D {name}: inference step")
    plain, rew, counts = rewritten.compile_both(inference_step, params, x)
    inference = _timed({"jax_jit": plain, "pool3d_pass_jit": rew}, (params, x), cfg["repeats"])
    logits_plain, logits_rew = np.asarray(plain(params, x)), np.asarray(rew(params, x))
    inference.update({
        "census": counts, "forward_output_calls": counts.get("forward_output", 0),
        "reduce_windows_left": counts.get("reduce-window", 0),
        "logits_bit_identical": bool(np.array_equal(logits_plain.view(np.uint32), logits_rew.view(np.uint32))),
        "logits_max_abs_diff": float(np.max(np.abs(logits_plain - logits_rew))),
    })
    return {"precision": name, "train": train, "inference": inference}


def run(quick: bool, log=print) -> dict:
    cfg = c3d.QUICK if quick else c3d.FULL
    log(f"  flax C3D: input {cfg['batch']} (NDHWC), channels {cfg['channels']}")
    return {
        "model": "flax.linen C3D-style: [Conv 3x3x3 SAME, ReLU, max_pool (1,2,2) then (2,2,2)] x levels, "
                 "mean, Dense; softmax CE, optax.adam",
        "input_shape": list(cfg["batch"]),
        "channels": list(cfg["channels"]),
        "repeats": cfg["repeats"],
        "precisions": [run_precision(name, cfg, log) for name in c3d.PRECISIONS],
    }
