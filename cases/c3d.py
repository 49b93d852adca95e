"""The C3D-style Flax model (NDHWC) that `make bench` and the device check run: the model, its two steps, inputs.

What a Flax user runs: `flax.linen` Conv 3x3x3 'SAME' + ReLU + `nn.max_pool`
per level, channels-last, C3D's pools (1, 2, 2) first, (2, 2, 2) after
(Tran et al., "Learning Spatiotemporal Features with 3D Convolutional
Networks", 2015), a global mean and a Dense head; softmax cross-entropy and
`optax.adam`. Two precisions: f32, and bf16 activations with f32 parameters
(`dtype=jnp.bfloat16`, Flax's mixed precision). The sizes: `FULL` and
`QUICK` (bench/flax_c3d.py, with their repeats), `DEVICE` and `DRY_RUN`
(the device check: checks/device_check/model.py times the train step,
timing.py the pools).
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

FULL = {"batch": (4, 16, 56, 56, 3), "channels": (32, 64, 128, 128), "repeats": 7}
QUICK = {"batch": (2, 4, 8, 8, 3), "channels": (4, 8), "repeats": 2}
DEVICE = {"batch": (8, 16, 112, 112, 3), "channels": (64, 128, 256, 256)}
DRY_RUN = {"batch": (1, 4, 8, 8, 3), "channels": (4, 8)}
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


@dataclass(frozen=True)
class Problem:
    """One precision of the model at one size: its steps and their arguments (seeded)."""

    net: object
    optimizer: object
    train_step: object  # (params, opt_state, x, labels) -> (params, opt_state, loss)
    inference_step: object  # (params, x) -> logits
    params: object
    opt_state: object
    x: jax.Array
    labels: jax.Array

    @property
    def train_arguments(self) -> tuple:
        return self.params, self.opt_state, self.x, self.labels


def problem(size: dict, precision: str) -> Problem:
    """The model with `size`'s channels at `precision` ("f32" or "bf16"), Adam, and inputs of `size`'s batch."""
    import optax

    net = model(size["channels"], PRECISIONS[precision])
    optimizer = optax.adam(1e-3)
    train_step, inference_step = steps(net, optimizer)
    rng = np.random.default_rng(2)
    x = jnp.asarray(rng.standard_normal(size["batch"], np.float32))
    labels = jnp.asarray(rng.integers(0, CLASSES, size["batch"][0], dtype=np.int32))
    params = net.init(jax.random.PRNGKey(0), x)
    return Problem(net, optimizer, train_step, inference_step, params, optimizer.init(params), x, labels)
