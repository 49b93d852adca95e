"""The main job, end to end: a 3-D CNN training step with and without the pass (`make demo`).

Builds a small channels-last 3-D CNN (conv, ReLU, max pool, twice, then a
linear head) in plain JAX, compiles its training step with `jax.jit` and
with `pool3d_pass.jit`, says what the pass rewrote, checks that loss and
every gradient agree, then times

1. each pooling layer alone (its forward and gradient, as a training step
   runs them), under both: what the pass changes;
2. the whole training step under both, with the share of jax.jit's step
   the pools take: the convolutions take the rest, so a step gains far less
   than its pools do.

Every timing interleaves the two variants run by run (a burst of load from
elsewhere hits both alike) and prints the median and the range.
"""

from __future__ import annotations

import functools
import logging
import os
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import pool3d_pass
from pool3d_pass.contract import TARGETS

BATCH, SIZE, CHANNELS = 4, 32, 4  # input (BATCH, SIZE, SIZE, SIZE, CHANNELS), NDHWC as Flax has it
WIDTHS = (16, 32)  # output channels of the two convolutions
LAYER_RUNS, STEP_RUNS = 15, 7
GRADIENT_CALLS = ("backward", "backward_from_indices", "backward_from_input")


def init_params(key):
    params, in_channels = [], CHANNELS
    for width in WIDTHS:
        key, sub = jax.random.split(key)
        params.append(jax.random.normal(sub, (3, 3, 3, in_channels, width)) * (2.0 / (27 * in_channels)) ** 0.5)
        in_channels = width
    key, sub = jax.random.split(key)
    spatial = SIZE // 2 ** len(WIDTHS)
    params.append(jax.random.normal(sub, (in_channels * spatial**3, 10)) * 0.01)
    return params


def max_pool(x):  # NDHWC, 2x2x2, stride 2 (flax.linen.max_pool's lowering): the pass rewrites its gradient
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 2, 1), (1, 2, 2, 2, 1), "VALID")


def conv(x, kernel):
    return lax.conv_general_dilated(x, kernel, (1, 1, 1), "SAME", dimension_numbers=("NDHWC", "DHWIO", "NDHWC"))


def forward(params, x):
    for kernel in params[:-1]:
        x = max_pool(jax.nn.relu(conv(x, kernel)))
    return x.reshape(x.shape[0], -1) @ params[-1]


def loss_fn(params, x, labels):
    logits = forward(params, x)
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * jax.nn.one_hot(labels, 10), axis=-1))


def train_step(params, x, labels):
    return jax.value_and_grad(loss_fn)(params, x, labels)


def pool_layer(x, g):  # one pooling layer's share of a training step: its forward, and its gradient
    y, pullback = jax.vjp(max_pool, x)
    return y, pullback(g)[0]


def interleaved(variants: dict, runs: int) -> dict[str, list[float]]:
    """Milliseconds of `runs` calls of each no-argument callable, taking turns (after one warm-up call each)."""
    for call in variants.values():
        jax.block_until_ready(call())
    times = {name: [] for name in variants}
    for _ in range(runs):
        for name, call in variants.items():
            start = time.perf_counter()
            jax.block_until_ready(call())
            times[name].append((time.perf_counter() - start) * 1e3)
    return times


ROW = "  {:<34}{:>26}{:>26}  {}"


def row(what: str, plain: list[float], rewritten: list[float]) -> str:
    """A line of the table: each variant's median and range, then the ratio of medians and its run-by-run range."""
    def ms(times):
        return f"{statistics.median(times):.1f} ms ({min(times):.1f}-{max(times):.1f})"

    rounds = [a / b for a, b in zip(plain, rewritten)]  # each pair ran back to back
    ratio = statistics.median(plain) / statistics.median(rewritten)
    return ROW.format(what, ms(plain), ms(rewritten), f"{ratio:.3g}x ({min(rounds):.3g}x-{max(rounds):.3g}x)")


def kernel_calls(compiled) -> dict[str, int]:
    hlo = compiled.as_text()
    return {call: hlo.count(f'custom_call_target="{target}"') for call, target in TARGETS.items()}


def check_step(params, x, labels):
    """Compile the step both ways, say what the pass did and whether the results agree.

    Returns (whether they agree, the gradients rewritten, both compiled steps)."""
    plain = jax.jit(train_step)
    rewritten = pool3d_pass.jit(train_step)
    calls = kernel_calls(rewritten.lower(params, x, labels).compile())
    print(f"pool3d_pass.jit's compiled step: {rewritten.last_report.one_line()}")
    print("  kernel calls: " + ", ".join(f"{n} {call}" for call, n in calls.items() if n))
    loss_a, grads_a = plain(params, x, labels)
    loss_b, grads_b = rewritten(params, x, labels)
    worst = max(float(jnp.max(jnp.abs(a - b)) / (jnp.max(jnp.abs(a)) + 1e-30))
                for a, b in zip(jax.tree.leaves(grads_a), jax.tree.leaves(grads_b)))
    same = bool(np.isclose(loss_a, loss_b, rtol=1e-6)) and worst < 1e-5
    print(f"  loss: jax.jit {float(loss_a):.6f}, pool3d_pass.jit {float(loss_b):.6f}; largest gradient "
          f"difference {worst:.1e} of the gradient's scale: {'the same' if same else 'DIFFERENT'}")
    return same, sum(calls[call] for call in GRADIENT_CALLS), plain, rewritten


def main() -> int:
    sys.stdout.reconfigure(line_buffering=True)  # each line as it comes, through `make` and pipes too
    logging.basicConfig(format="  %(message)s")  # the pass's warnings, should a gradient be left to XLA
    key = jax.random.PRNGKey(0)
    params = init_params(key)
    x = jax.nn.relu(jax.random.normal(key, (BATCH, SIZE, SIZE, SIZE, CHANNELS)))  # ReLU input: many ties
    labels = jnp.arange(BATCH) % 10
    print(f"A 3-D CNN's training step: input {x.shape} f32 (NDHWC), {len(WIDTHS)} x [conv 3x3x3, ReLU, "
          f"max pool 2x2x2],\na dense head; jax {jax.__version__}, {os.cpu_count()} CPU cores")
    same, gradients, plain, rewritten = check_step(params, x, labels)

    print(f"\nTimes: median (range) of {LAYER_RUNS} runs for a layer, {STEP_RUNS} for the step, the two "
          "variants taking turns")
    print(ROW.format("", "jax.jit", "pool3d_pass.jit", "faster (run by run)"))
    print("  1. each pooling layer alone, its forward + gradient:")
    pools_ms = 0.0
    layer_x = conv(x, params[0])
    for level, kernel in enumerate(params[:-1]):
        if level:
            layer_x = conv(max_pool(jax.nn.relu(layer_x)), kernel)
        a = jax.nn.relu(layer_x)
        g = jnp.ones_like(max_pool(a))
        times = interleaved({"plain": functools.partial(plain_layer, a, g),
                             "pool3d": functools.partial(rewritten_layer, a, g)}, LAYER_RUNS)
        pools_ms += statistics.median(times["plain"])
        print(row(f"   layer {level + 1} {tuple(a.shape)}".replace(", ", ","), times["plain"], times["pool3d"]))

    print("  2. the whole training step:")
    times = interleaved({"plain": lambda: plain(params, x, labels),
                         "pool3d": lambda: rewritten(params, x, labels)}, STEP_RUNS)
    print(row("   conv + pool + head, gradients", times["plain"], times["pool3d"]))
    share = min(pools_ms / statistics.median(times["plain"]), 1.0)
    print(f"\nThe pools take about {share:.0%} of jax.jit's step (the layers' medians over the step's). The "
          f"convolutions\nand the rest, about {1 - share:.0%}, run as before: even pools that took no time would "
          f"make this step\nabout {1 / max(1 - share, 1e-9):.2f}x faster, give or take the run-to-run spread. "
          "A model whose pools take more of its step\ngains more.")
    return 0 if same and gradients == len(WIDTHS) else 1


# Made once: each keeps its compiled programs across calls.
plain_layer, rewritten_layer = jax.jit(pool_layer), pool3d_pass.jit(pool_layer)

if __name__ == "__main__":
    sys.exit(main())
