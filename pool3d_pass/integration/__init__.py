"""JAX integration: `jit`, and the process-wide `enable` / `disable` / `enabled` switch.

* `jit(fun, *, strategy="auto", **jit_kwargs)`: a drop-in for `jax.jit` whose
  compiled program has every max-pool gradient (`stablehlo.select_and_scatter`)
  rewritten into the pool3d kernel calls.
* `enable()` / `disable()` / `with enabled():` route every later `jax.jit`
  compile (Flax, Equinox, plain JAX) through the pass, with no change to the
  user's code.

`strategy` (also a keyword of `enable` / `enabled`) is `pool3d_pass.rewrite`'s:
"auto" (the platform's choice), "recompute" or "indices".

Modules compiled for a platform with a binding (`pool3d_pass.bindings.registry`)
are rewritten; the others compile unchanged. Every compile that meets a
max-pool gradient logs at INFO on logger "pool3d_pass" what was
rewritten and what was missed, with reasons. How it hooks into JAX, and which
JAX internals it relies on: docs/jax_integration.md.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from pool3d_pass.integration.jit import jit
from pool3d_pass.options import AUTO, PassOptions

__all__ = ["jit", "enable", "disable", "enabled"]


def enable(strategy: str = AUTO) -> None:
    """Route every later `jax.jit` compile in this process through the pass.

    `strategy` is `pool3d_pass.rewrite`'s: "auto" (the platform's choice),
    "recompute" or "indices". Clears JAX's in-memory compilation caches if the
    switch or its strategy changes, so functions compiled before are
    recompiled (and rewritten) on their next call.
    """
    _set_enabled(True, PassOptions(strategy=strategy))


def disable() -> None:
    """Stop routing `jax.jit` compiles through the pass (`pool3d_pass.jit` still rewrites).

    Clears JAX's in-memory compilation caches if the switch changes, so no
    rewritten executable is handed to plain `jax.jit` afterwards.
    """
    _set_enabled(False)


@contextlib.contextmanager
def enabled(strategy: str = AUTO) -> Iterator[None]:
    """`enable(strategy)` for the duration of the block, then restore the previous state."""
    from pool3d_pass.integration import routing

    options = PassOptions(strategy=strategy)
    previous_options = routing.global_options()
    previous = _set_enabled(True, options)
    try:
        yield
    finally:
        _set_enabled(previous, previous_options)


def _set_enabled(value: bool, options: PassOptions = PassOptions()) -> bool:
    """The switch (routing.py), with the compile hook installed before it is first turned on."""
    from pool3d_pass.integration import compile_hook, routing

    if value:
        compile_hook.install()
    return routing.set_enabled(value, options)
