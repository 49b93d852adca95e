"""shard_map cases, run in a child process with N host CPU devices (see test_shard_map.py).

`python shard_map_cases.py N` compiles each program with plain `jax.jit` and
through pool3d_pass (`pool3d_pass.jit`, and `enable()` for some), runs both on
the same inputs and prints one JSON line per case (sharding_cases.record's
fields). Inside `jax.shard_map` values are per-device shards: the pass must
splice the single-device kernels there (splicing/per_shard.py), also in a
function called from a function the body calls (a `jax.jit` inside a
`jax.jit` inside the body), and custom_partitioning only where values are
auto-sharded. A body whose manual axis splits the volume's depth pools its
own planes: locally (windows aligned with the shards), or after exchanging
halo planes itself (`lax.ppermute`); per shard is what such a program says,
so the single-device kernel there computes its results exactly.
"""

from __future__ import annotations

import os
import sys

DEVICES = int(sys.argv[1]) if len(sys.argv) > 1 else 4
os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count={DEVICES}"

import json
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from sharding_cases import Plain, bare_pool_grad, cnn_loss, cnn_params, compare, pool_grad, through_enable


def shard_map(fun, mesh, in_specs, out_specs, axis_names=None):
    options = {} if axis_names is None else {"axis_names": axis_names}
    return jax.shard_map(fun, mesh=mesh, in_specs=in_specs, out_specs=out_specs, **options)


def aligned_pool(x):  # k2 s2: every window inside the device's planes
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 2, 2, 2), (1, 1, 2, 2, 2), "VALID")


def aligned_pool_grad(x):
    return jax.grad(lambda v: jnp.sum(aligned_pool(v) ** 2))(x)


def halo_pool_grad(x):
    """k3 s2 over depth with the plane below fetched from the device below (-inf on the first): the
    body's own halo exchange, then a pool of its 3 planes (padding 1 on H and W)."""
    index = lax.axis_index("b")
    below = lax.ppermute(x[:, :, -1:], "b", [(i, i + 1) for i in range(DEVICES - 1)])
    below = jnp.where(index == 0, -jnp.inf, below)

    def loss(v):
        widened = jnp.concatenate([below, v], axis=2)
        pooled = lax.reduce_window(widened, -jnp.inf, lax.max, (1, 1, 3, 3, 3), (1, 1, 2, 2, 2),
                                   ((0, 0), (0, 0), (0, 0), (1, 1), (1, 1)))
        return jnp.sum(pooled ** 2)

    return jax.grad(loss)(x)


def main() -> int:
    devices = np.array(jax.devices())
    assert devices.size == DEVICES, f"expected {DEVICES} host devices, got {devices.size}"
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.integers(-3, 4, (DEVICES, 4, 8, 8, 8)).astype(np.float32))  # ties everywhere
    line = Mesh(devices, ("b",))
    grid = Mesh(devices.reshape(DEVICES // 2, 2), ("b", "m"))
    results = []

    def case(name, fun, *args, enable=False):
        plain = Plain(fun, *args)
        results.append(compare(name, None, plain, fun, *args))
        if enable:
            results.append(through_enable(name + "_through_enable", None, plain, fun, *args))

    # Fully manual: the body sees one batch shard per device.
    full = shard_map(pool_grad, line, P("b"), P("b"))
    case("full_manual_pool_grad", full, x, enable=True)
    case("full_manual_bare_pool_grad", shard_map(bare_pool_grad, line, P("b"), P("b")), x)
    # Partially manual: manual over "b", automatic over "m".
    xg = jax.device_put(x, NamedSharding(grid, P("b")))
    partial_manual = shard_map(pool_grad, grid, P("b"), P("b"), axis_names=frozenset({"b"}))
    case("partially_manual_pool_grad", partial_manual, xg, enable=True)
    # A jax.jit inside the shard_map body: the gradient sits in a function the body calls.
    case("jit_inside_shard_map", shard_map(jax.jit(pool_grad), line, P("b"), P("b")), x)
    # ... and one level deeper: a function called from the function the body calls.
    nested = jax.jit(lambda v: 2.0 * jax.jit(pool_grad)(v))
    case("jit_inside_jit_inside_shard_map", shard_map(nested, line, P("b"), P("b")), x)
    # The manual axis splits the depth: 2 planes per device.
    xd = jnp.asarray(rng.integers(-3, 4, (2, 4, 2 * DEVICES, 8, 8)).astype(np.float32))
    depth = P(None, None, "b")
    case("depth_manual_local_pool", shard_map(aligned_pool_grad, line, depth, depth), xd)
    case("depth_manual_halo_exchanged_by_the_body", shard_map(halo_pool_grad, line, depth, depth), xd)
    # shard_map inside a jitted function with sharded arguments, automatic code around it.
    xb = jax.device_put(x, NamedSharding(line, P("b")))

    def around(x):
        return 2.0 * shard_map(pool_grad, line, P("b"), P("b"))(jnp.tanh(x)) + pool_grad(x)

    case("shard_map_inside_jit_sharded_arguments", around, xb, enable=True)

    # A data-parallel step written with shard_map: the weight gradient is psum'd.
    params = cnn_params(jax.random.PRNGKey(0), channels=4, widths=(4, 4))

    @partial(shard_map, mesh=line, in_specs=(P(), P("b")), out_specs=(P(), P()))
    def step(params, x):
        loss, grads = jax.value_and_grad(cnn_loss)(params, x)
        grads = jax.tree.map(lambda g: lax.psum(g, "b") / DEVICES, grads)
        return lax.psum(loss, "b") / DEVICES, jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)

    case("psum_weight_gradient_train_step", step, params, x, enable=True)
    for result in results:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
