"""Which compiles go through the pass: the process-wide switch and the per-call scope.

Two things decide whether a compile is rewritten:

* the process-wide switch, flipped by `enable()` / `disable()` / `enabled()`,
  which routes every later `jax.jit` compile through the pass;
* a context-local scope that `pool3d_pass.jit` sets around its own calls
  (`__call__`, `.lower(...).compile()`), so its compiles are rewritten even
  while the switch is off.

Each carries the strategy the rewrite asks for (`pool3d_pass.rewrite`'s
`strategy`: "auto", "recompute" or "indices"); a scope's wins over the switch's.

Flipping the switch clears JAX's in-memory caches (`jax.clear_caches()`), so an
executable compiled on one side of the switch is never handed out on the other.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Iterator

from pool3d_pass.bindings.registry import AUTO, STRATEGIES

# A strategy: rewrite with it (inside a pool3d_pass.jit compile); None: follow the switch.
_scope: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "pool3d_pass_scope", default=None
)
_switch_lock = threading.Lock()
_globally_enabled = False
_global_strategy = AUTO


def check_strategy(strategy: str) -> str:
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; expected one of {', '.join(STRATEGIES)}")
    return strategy


def strategy() -> str | None:
    """The strategy a compile starting now, in this context, is rewritten with; None: not rewritten."""
    scoped = _scope.get()
    if scoped is not None:
        return scoped
    return _global_strategy if _globally_enabled else None


def active() -> bool:
    """Whether a compile starting now, in this context, should be rewritten."""
    return strategy() is not None


def is_enabled() -> bool:
    """The state of the process-wide switch."""
    return _globally_enabled


def global_strategy() -> str:
    """The strategy the process-wide switch rewrites with (when on)."""
    return _global_strategy


def set_enabled(value: bool, strategy: str = AUTO) -> bool:
    """Set the process-wide switch (and its strategy); clear JAX's caches if either changed. Returns the old state."""
    global _globally_enabled, _global_strategy
    import jax

    from pool3d_pass.integration import compile_hook

    check_strategy(strategy)
    if value:
        compile_hook.install()
    with _switch_lock:
        previous = _globally_enabled
        before = _global_strategy if previous else None
        _globally_enabled, _global_strategy = value, strategy
        if before != (strategy if value else None):
            # Executables compiled under the other setting sit in JAX's caches
            # (C++ jit caches, pxla._cached_compilation, primitive dispatch).
            jax.clear_caches()
    return previous


@contextlib.contextmanager
def scope(rewrite: str | None) -> Iterator[None]:
    """Within the block, compiles in this context are rewritten with strategy `rewrite`, or follow the switch (None)."""
    token = _scope.set(None if rewrite is None else check_strategy(rewrite))
    try:
        yield
    finally:
        _scope.reset(token)
