"""Compile a function both ways, plain `jax.jit` and `pool3d_pass.jit`, once each.

`compile_both(fun, *args)` returns the two `jax.stages.Compiled` executables
(callable like the jitted function, on arguments of the same shapes) and the
number of `pool3d.max_pooling_3d_backward` calls in the program XLA compiled
for the rewritten one, so a benchmark proves it measured a rewritten program
without paying for a second compile.
"""

from __future__ import annotations

import jax

import pool3d_pass
from pool3d_pass.bindings import cpu as cpu_binding
from pool3d_pass.contract import TARGET_NAME

__all__ = ["compile_both"]


def compile_both(fun, *args):
    """(plain Compiled, rewritten Compiled, kernel calls in the rewritten program)."""
    if not hasattr(pool3d_pass, "jit"):
        raise ImportError("pool3d_pass.jit (pool3d_pass.integration) is not importable")
    cpu_binding.register()
    plain = jax.jit(fun).lower(*args).compile()
    rewritten = pool3d_pass.jit(fun).lower(*args).compile()
    calls = rewritten.as_text().count(f'custom_call_target="{TARGET_NAME}"')
    return plain, rewritten, calls
