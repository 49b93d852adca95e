"""Child-process steps for test_kernel_registration.py: each runs in a fresh Python process.

  serialize DIR    compile a max-pool gradient under enable(), save the
                   serialized executable, its input and jax.jit's result in DIR
  deserialize DIR  `import pool3d_pass` (and nothing else of it), load and run
                   the executable, compare; prints a JSON line
  cached DIR N     with JAX's persistent cache in DIR, compile and run a
                   4-device batch-sharded gradient under enable(); prints a
                   JSON line with the cache's hit/miss counts and the result
"""

from __future__ import annotations

import json
import os
import pickle
import sys

step, folder = sys.argv[1], sys.argv[2]
if step == "cached":
    os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax


def max_pool(x):
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 3, 3, 3), (1, 1, 2, 2, 2),
                             ((0, 0), (0, 0), (1, 1), (1, 1), (1, 1)))


def layer(x):
    y, vjp = jax.vjp(max_pool, x)
    return y, vjp(2 * y - 1)[0]


def data(batch=4):
    return jnp.asarray(np.random.default_rng(0).integers(-3, 4, (batch, 3, 8, 8, 8)), jnp.float32)


def serialize() -> None:
    from jax.experimental import serialize_executable

    import pool3d_pass

    x = data()
    with pool3d_pass.enabled():
        compiled = jax.jit(layer).lower(x).compile()
    assert "pool3d.max_pooling_3d_forward" in compiled.as_text()
    payload = serialize_executable.serialize(compiled)
    with open(os.path.join(folder, "executable.pickle"), "wb") as file:
        pickle.dump(payload, file)
    np.save(os.path.join(folder, "x.npy"), np.asarray(x))
    for name, value in zip(("y", "dx"), jax.jit(layer)(x)):
        np.save(os.path.join(folder, f"{name}.npy"), np.asarray(value))


def deserialize() -> None:
    from jax.experimental import serialize_executable

    import pool3d_pass  # noqa: F401 -- what the user's program does: no other pool3d call

    with open(os.path.join(folder, "executable.pickle"), "rb") as file:
        payload, in_tree, out_tree = pickle.load(file)
    compiled = serialize_executable.deserialize_and_load(payload, in_tree, out_tree)
    y, dx = compiled(jnp.asarray(np.load(os.path.join(folder, "x.npy"))))
    print(json.dumps({
        "y_equal": bool(np.array_equal(y, np.load(os.path.join(folder, "y.npy")))),
        "dx_equal": bool(np.array_equal(dx, np.load(os.path.join(folder, "dx.npy")))),
    }))


def cached() -> None:
    from jax._src import monitoring
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    import pool3d_pass

    counts = {"hits": 0, "misses": 0}

    def listen(event, **_):
        if event == "/jax/compilation_cache/cache_hits":
            counts["hits"] += 1
        elif event == "/jax/compilation_cache/cache_misses":
            counts["misses"] += 1

    monitoring.register_event_listener(listen)
    jax.config.update("jax_compilation_cache_dir", folder)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    mesh = Mesh(np.array(jax.devices()), ("data",))
    x = jax.device_put(data(), NamedSharding(mesh, PartitionSpec("data")))
    pool3d_pass.enable()
    before = dict(counts)
    compiled = jax.jit(layer).lower(x).compile()  # only this compile is counted
    rewritten = {k: counts[k] - before[k] for k in counts}
    y, dx = compiled(x)
    pool3d_pass.disable()
    expected = jax.jit(layer)(x)
    print(json.dumps({**rewritten, "rewritten": "CustomSPMDPartitioning" not in compiled.as_text()
                      and "pool3d.max_pooling_3d_forward" in compiled.as_text(),
                      "equal": bool(np.array_equal(y, expected[0]) and np.array_equal(dx, expected[1])),
                      "flag": bool(jax.config.jax_remove_custom_partitioning_ptr_from_cache_key)}))


if __name__ == "__main__":
    {"serialize": serialize, "deserialize": deserialize, "cached": cached}[step]()
