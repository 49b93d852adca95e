"""The main job, end to end: a 3-D CNN training step with and without the pass.

Builds a small 3-D CNN (conv, ReLU, max pool, twice, then a linear head) in
plain JAX, compiles its training step with `jax.jit` and with
`pool3d_pass.jit`, prints what the pass rewrote, checks that loss and every
gradient agree, and prints the time of both. Run with `make demo`.
"""

from __future__ import annotations

import logging
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import pool3d_pass
from pool3d_pass.contract import TARGETS

BATCH, CHANNELS, SIZE = 4, 4, 48
WIDTHS = (16, 32)
REPEATS = 5


def init_params(key):
    params, in_channels = [], CHANNELS
    for width in WIDTHS:
        key, sub = jax.random.split(key)
        fan_in = in_channels * 27
        params.append(jax.random.normal(sub, (width, in_channels, 3, 3, 3)) * (2.0 / fan_in) ** 0.5)
        in_channels = width
    key, sub = jax.random.split(key)
    spatial = SIZE // 2 ** len(WIDTHS)
    params.append(jax.random.normal(sub, (in_channels * spatial**3, 10)) * 0.01)
    return params


def max_pool(x):  # NCDHW, 2x2x2, stride 2: the pooling whose gradient the pass rewrites
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 2, 2, 2), (1, 1, 2, 2, 2), "VALID")


def forward(params, x):
    for kernel in params[:-1]:
        x = lax.conv_general_dilated(x, kernel, (1, 1, 1), "SAME", dimension_numbers=("NCDHW", "OIDHW", "NCDHW"))
        x = max_pool(jax.nn.relu(x))
    return x.reshape(x.shape[0], -1) @ params[-1]


def loss_fn(params, x, labels):
    logits = forward(params, x)
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * jax.nn.one_hot(labels, 10), axis=-1))


def train_step(params, x, labels):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, labels)
    return loss, grads


def time_ms(step, *args) -> float:
    jax.block_until_ready(step(*args))  # compile and warm up
    samples = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        jax.block_until_ready(step(*args))
        samples.append((time.perf_counter() - start) * 1e3)
    return statistics.median(samples)


def main() -> int:
    logging.basicConfig(format="  %(message)s")
    logging.getLogger("pool3d_pass").setLevel(logging.INFO)
    key = jax.random.PRNGKey(0)
    params = init_params(key)
    x = jax.nn.relu(jax.random.normal(key, (BATCH, CHANNELS, SIZE, SIZE, SIZE)))  # ReLU input: many ties
    labels = jnp.arange(BATCH) % 10

    print(f"3-D CNN training step, input {x.shape} f32, {len(WIDTHS)} conv+ReLU+maxpool levels, {jax.device_count()} CPU device")
    print("pool3d_pass.jit compiles the step; the pass reports:")
    plain = jax.jit(train_step)
    rewritten = pool3d_pass.jit(train_step)
    compiled = rewritten.lower(params, x, labels).compile()
    hlo = compiled.as_text()
    calls = {call: hlo.count(f'custom_call_target="{target}"') for call, target in TARGETS.items()}
    left = hlo.count("select-and-scatter")
    listed = ", ".join(f"{n} {call}" for call, n in calls.items() if n)
    print(f"compiled program: pool3d kernel calls: {listed}; {left} select-and-scatter left")
    gradients = calls["backward"] + calls["backward_from_indices"] + calls["backward_from_input"]

    loss_a, grads_a = plain(params, x, labels)
    loss_b, grads_b = rewritten(params, x, labels)
    worst = max(
        float(jnp.max(jnp.abs(a - b)) / (jnp.max(jnp.abs(a)) + 1e-30))
        for a, b in zip(jax.tree.leaves(grads_a), jax.tree.leaves(grads_b))
    )
    same = bool(np.isclose(loss_a, loss_b, rtol=1e-6)) and worst < 1e-5
    print(f"loss: jax.jit {float(loss_a):.6f}, pool3d_pass.jit {float(loss_b):.6f}; "
          f"largest gradient difference {worst:.2e} of the gradient's scale -> {'same' if same else 'DIFFERENT'}")

    plain_ms = time_ms(plain, params, x, labels)
    rewritten_ms = time_ms(rewritten, params, x, labels)
    print(f"training step (median of {REPEATS}): jax.jit {plain_ms:.1f} ms, "
          f"pool3d_pass.jit {rewritten_ms:.1f} ms -> {plain_ms / rewritten_ms:.2f}x")
    return 0 if same and gradients == len(WIDTHS) and left == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
