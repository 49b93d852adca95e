"""Check an installed pool3d_pass against the JAX release it sits beside (`make check-jax`).

Prints the JAX version and, for a channels-last (NDHWC, Flax's layout)
max-pool gradient and training-style forward + gradient, how many pool3d
kernel calls `pool3d_pass.jit` compiled and the largest difference from
jax.jit. Exits non-zero unless every program was rewritten and exact.
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import pool3d_pass


def pool(x, k, s, p):
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, k, k, k, 1), (1, s, s, s, 1),
                             ((0, 0), (p, p), (p, p), (p, p), (0, 0)))


def programs(k: int, s: int, p: int) -> dict:
    """The two programs checked for one window: a bare gradient, and a forward with its gradient."""
    return {
        "gradient": jax.grad(lambda v: jnp.sum(pool(v, k, s, p) ** 2)),
        "forward + gradient": lambda v: jax.vjp(lambda u: pool(u, k, s, p), v)[1](jnp.ones_like(pool(v, k, s, p))),
    }


def main() -> int:
    print(f"jax {jax.__version__}, jaxlib {jax.lib.__version__ if hasattr(jax.lib, '__version__') else '?'}, "
          f"Python {sys.version.split()[0]}")
    x = jnp.asarray(np.random.default_rng(0).integers(-4, 5, (2, 8, 12, 12, 16)), jnp.float32)  # NDHWC, ties
    failures = 0
    for k, s, p in ((2, 2, 0), (3, 2, 1)):
        for name, program in programs(k, s, p).items():
            compiled = pool3d_pass.jit(program).lower(x).compile()
            calls = compiled.as_text().count('custom_call_target="pool3d.')
            difference = max(float(jnp.max(jnp.abs(a - b))) for a, b in zip(
                jax.tree.leaves(compiled(x)), jax.tree.leaves(jax.jit(program)(x))))
            ok = calls > 0 and difference == 0.0
            failures += not ok
            print(f"NDHWC k{k} s{s} p{p} {name}: {calls} pool3d kernel call(s), max difference {difference} "
                  f"{'ok' if ok else 'FAILED'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
