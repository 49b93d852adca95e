"""Section 6: a C3D-style Flax model (NDHWC), its Adam train step and its inference step.

What a Flax user runs: `flax.linen` Conv 3x3x3 'SAME' + ReLU + `nn.max_pool`
per level, channels-last, C3D's pools (1, 2, 2) first, (2, 2, 2) after
(Tran et al., "Learning Spatiotemporal Features with 3D Convolutional
Networks", 2015), a global mean and a Dense head; softmax cross-entropy and
`optax.adam`. Two precisions: f32, and bf16 activations with f32 parameters
(`dtype=jnp.bfloat16`, Flax's mixed precision).

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

import jax
import jax.numpy as jnp
import numpy as np

from bench import cases, rewritten
from bench.timing import blocking, measure

FULL = {"batch": (4, 16, 56, 56, 3), "channels": (32, 64, 128, 128), "repeats": 7}
QUICK = {"batch": (2, 4, 8, 8, 3), "channels": (4, 8), "repeats": 2}
PRECISIONS = {"f32": jnp.float32, "bf16": jnp.bfloat16}
CLASSES = 10


def model(channels, dtype):
    import flax.linen as nn

    class C3D(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = x.astype(dtype)
            for level, c in enumerate(channels):
                x = nn.relu(nn.Conv(c, (3, 3, 3), padding="SAME", dtype=dtype)(x))
                window = (1, 2, 2) if level == 0 else (2, 2, 2)
                x = nn.max_pool(x, window, strides=window)
            return nn.Dense(CLASSES, dtype=dtype)(x.mean(axis=(1, 2, 3))).astype(jnp.float32)

    return C3D()


def steps(net, optimizer):
    import optax

    def loss_fn(params, x, labels):
        logits = net.apply(params, x)
        return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()

    def train_step(params, opt_state, x, labels):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, labels)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    def inference_step(params, x):
        return net.apply(params, x)

    return train_step, inference_step


def _timed(programs: dict, args, repeats: int) -> dict:
    stats = measure({name: blocking(p, *args) for name, p in programs.items()}, repeats=repeats, warmup=1)
    return {"ms": dict(stats),
            "speedup_of_min": stats["jax_jit"].min / stats["pool3d_pass_jit"].min,
            "speedup_of_median": stats["jax_jit"].median / stats["pool3d_pass_jit"].median}


def run_precision(name: str, cfg: dict, log=print) -> dict:
    import optax

    dtype = PRECISIONS[name]
    net = model(cfg["channels"], dtype)
    optimizer = optax.adam(1e-3)
    train_step, inference_step = steps(net, optimizer)
    rng = np.random.default_rng(2)
    x = jnp.asarray(rng.standard_normal(cfg["batch"], np.float32))
    labels = jnp.asarray(rng.integers(0, CLASSES, cfg["batch"][0], dtype=np.int32))
    params = net.init(jax.random.PRNGKey(0), x)
    opt_state = optimizer.init(params)

    log(f"  flax C3D {name}: train step")
    train_args = (params, opt_state, x, labels)
    plain, rew, counts = rewritten.compile_both(train_step, *train_args)
    train = _timed({"jax_jit": plain, "pool3d_pass_jit": rew}, train_args, cfg["repeats"])
    p_plain, _, loss_plain = plain(*train_args)
    p_rew, _, loss_rew = rew(*train_args)
    train.update({
        "strategy": rewritten.strategy_of(counts), "census": counts,
        "loss_jax_jit": float(loss_plain), "loss_pool3d_pass_jit": float(loss_rew),
        "same_loss": bool(np.isclose(float(loss_plain), float(loss_rew), rtol=1e-5, atol=1e-6)),
        "updated_params_max_abs_diff": cases.tree_max_abs_diff(p_plain, p_rew),
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
    cfg = QUICK if quick else FULL
    log(f"  flax C3D: input {cfg['batch']} (NDHWC), channels {cfg['channels']}")
    return {
        "model": "flax.linen C3D-style: [Conv 3x3x3 SAME, ReLU, max_pool (1,2,2) then (2,2,2)] x levels, "
                 "mean, Dense; softmax CE, optax.adam",
        "input_shape": list(cfg["batch"]),
        "channels": list(cfg["channels"]),
        "repeats": cfg["repeats"],
        "precisions": [run_precision(name, cfg, log) for name in PRECISIONS],
    }
