"""Child process for test_memory.py: live memory of compiling many distinct shapes.

`python memory_cases.py MODE N`: MODE "plain" (jax.jit) or "enabled"
(`pool3d_pass.enable()` + jax.jit). Compiles and runs a max-pool gradient
for N distinct batch sizes, then calls `jax.clear_caches()`. Prints one JSON
line: the resident set size (after gc and malloc_trim, in MB) after a
warm-up, after the N compiles, and after clearing the caches.
"""

from __future__ import annotations

import ctypes
import gc
import json
import sys

import jax
import jax.numpy as jnp
from jax import lax

import pool3d_pass

mode, count = sys.argv[1], int(sys.argv[2])
_libc = ctypes.CDLL("libc.so.6")


def live_mb() -> float:
    gc.collect()
    _libc.malloc_trim(0)
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return pages * 4096 / 2**20


def grad(x):
    pool = lambda v: lax.reduce_window(v, -jnp.inf, lax.max, (1, 1, 2, 2, 2), (1, 1, 2, 2, 2), "VALID")
    return jax.grad(lambda v: jnp.sum(pool(v) ** 2))(x)


def compile_and_run(batch: int) -> None:
    jax.jit(grad)(jnp.ones((batch, 2, 4, 4, 4), jnp.float32)).block_until_ready()


if mode == "enabled":
    pool3d_pass.enable()
for batch in range(1, 11):  # warm-up: JAX's and pool3d_pass's own one-time state
    compile_and_run(batch)
start = live_mb()
for batch in range(11, 11 + count):
    compile_and_run(batch)
grown = live_mb()
jax.clear_caches()
cleared = live_mb()
lowerings = pool3d_pass.caches._AS_JAX_CACHE.cache_info()["_lowered"]
print(json.dumps({"mode": mode, "start": start, "grown": grown, "cleared": cleared,
                  "cached_lowerings": lowerings.currsize, "cache_limit": lowerings.maxsize}))
