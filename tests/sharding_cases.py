"""Multi-device cases, run in a child process with 8 host CPU devices (see test_sharding.py).

XLA reads `--xla_force_host_platform_device_count` once, when JAX starts its
CPU backend, so these cases cannot share the pytest process. Each case
compiles a program with plain `jax.jit` and through pool3d_pass, runs both on
the same sharded inputs, and prints one JSON line: the largest difference,
the collectives in each compiled program, the kernel calls left in the
rewritten one, and the output shardings.
"""

from __future__ import annotations

import os

os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"

import json  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import pool3d_pass  # noqa: E402

COLLECTIVES = ("all-gather", "all-to-all", "collective-permute", "all-reduce", "reduce-scatter")


def collectives(hlo: str) -> dict[str, int]:
    return {name: len(re.findall(rf"\b{name}(-start)?\(", hlo)) for name in COLLECTIVES}


def max_pool(x):
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 3, 3, 3), (1, 1, 2, 2, 2), ((0, 0), (0, 0), (1, 1), (1, 1), (1, 1)))


def max_pool_2d(x):  # NCHW: the pass reshapes to (B, C, 1, H, W) around the kernel
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")


def pool_2d_grad(x):
    return jax.grad(lambda x: jnp.sum(max_pool_2d(x) ** 2))(x)


def pool_grad(x):
    return jax.grad(lambda x: jnp.sum(max_pool(jax.nn.relu(x)) ** 2))(x)


def cnn_params(key, channels=8, widths=(8, 8)):
    params = []
    for width in widths:
        key, sub = jax.random.split(key)
        params.append(jax.random.normal(sub, (width, channels, 3, 3, 3)) * 0.2)
        channels = width
    return params


def cnn_loss(params, x):
    for kernel in params:
        x = lax.conv_general_dilated(x, kernel, (1, 1, 1), "SAME", dimension_numbers=("NCDHW", "OIDHW", "NCDHW"))
        x = lax.reduce_window(jax.nn.relu(x), -jnp.inf, lax.max, (1, 1, 2, 2, 2), (1, 1, 2, 2, 2), "VALID")
    return jnp.mean(x**2)


def train_step(params, x):
    loss, grads = jax.value_and_grad(cnn_loss)(params, x)
    return loss, jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)


def leaves_max_difference(a, b) -> float:
    return max(float(jnp.max(jnp.abs(jnp.asarray(u, jnp.float32) - jnp.asarray(v, jnp.float32))))
               for u, v in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True))


def compare(name, plain, rewritten, *args) -> dict:
    plain_compiled = plain.lower(*args).compile()
    rewritten_compiled = rewritten.lower(*args).compile()
    plain_hlo, rewritten_hlo = plain_compiled.as_text(), rewritten_compiled.as_text()
    expected, got = plain_compiled(*args), rewritten_compiled(*args)
    return {
        "case": name,
        "max_difference": leaves_max_difference(expected, got),
        "plain_collectives": collectives(plain_hlo),
        "rewritten_collectives": collectives(rewritten_hlo),
        "kernel_calls": rewritten_hlo.count("pool3d.max_pooling_3d_backward"),
        "select_and_scatter_left": rewritten_hlo.count("select-and-scatter("),
        "plain_out_shardings": [str(s) for s in jax.tree.leaves(plain_compiled.output_shardings)],
        "rewritten_out_shardings": [str(s) for s in jax.tree.leaves(rewritten_compiled.output_shardings)],
    }


def main() -> int:
    devices = np.array(jax.devices())
    assert devices.size == 8, f"expected 8 host devices, got {devices.size}"
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.integers(-3, 4, (8, 8, 8, 8, 8)).astype(np.float32))  # ties everywhere
    line = Mesh(devices, ("data",))
    grid = Mesh(devices.reshape(4, 2), ("data", "model"))
    results = []

    # Data-parallel training step: batch sharded over 8 devices, params replicated.
    params = cnn_params(jax.random.PRNGKey(0))
    batch = NamedSharding(line, P("data"))
    replicated = NamedSharding(line, P())
    step_options = {"in_shardings": (replicated, batch), "out_shardings": (replicated, replicated)}
    results.append(compare("train_step_batch_sharded_in_shardings", jax.jit(train_step, **step_options),
                           pool3d_pass.jit(train_step, **step_options), params, x))
    xb = jax.device_put(x, batch)
    results.append(compare("pool_grad_batch_sharded_device_put", jax.jit(pool_grad), pool3d_pass.jit(pool_grad), xb))
    # Channel sharding on a 2-D mesh: batch over "data", channels over "model".
    xc = jax.device_put(x, NamedSharding(grid, P("data", "model")))
    results.append(compare("pool_grad_batch_and_channel_sharded", jax.jit(pool_grad), pool3d_pass.jit(pool_grad), xc))
    x2 = jax.device_put(x.reshape(8, 8, 16, 32), batch)
    results.append(compare("pool_2d_grad_batch_sharded_through_reshapes", jax.jit(pool_2d_grad),
                           pool3d_pass.jit(pool_2d_grad), x2))
    xo = jax.device_put(x, NamedSharding(line, P(None, "data")))
    results.append(compare("pool_grad_channel_sharded", jax.jit(pool_grad), pool3d_pass.jit(pool_grad), xo))
    # Spatial sharding: windows cross shard borders; the pass must make D whole first.
    xs = jax.device_put(x, NamedSharding(line, P(None, None, "data")))
    results.append(compare("pool_grad_spatially_sharded", jax.jit(pool_grad), pool3d_pass.jit(pool_grad), xs))
    # enable(): a plain jax.jit compile of a batch-sharded training step is rewritten.
    plain_compiled = jax.jit(train_step, **step_options).lower(params, x).compile()
    expected = plain_compiled(params, x)
    with pool3d_pass.enabled():
        routed = jax.jit(train_step, **step_options).lower(params, x).compile()
        got = routed(params, x)
    results.append({
        "case": "train_step_through_enable",
        "max_difference": leaves_max_difference(expected, got),
        "plain_collectives": collectives(plain_compiled.as_text()),
        "rewritten_collectives": collectives(routed.as_text()),
        "kernel_calls": routed.as_text().count("pool3d.max_pooling_3d_backward"),
        "select_and_scatter_left": routed.as_text().count("select-and-scatter("),
        "plain_out_shardings": [str(s) for s in jax.tree.leaves(plain_compiled.output_shardings)],
        "rewritten_out_shardings": [str(s) for s in jax.tree.leaves(routed.output_shardings)],
    })

    for record in results:
        print(json.dumps(record))
    return 0


if __name__ == "__main__":
    sys.exit(main())
