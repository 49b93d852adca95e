"""Which compiles go through the pass: the process-wide switch and the per-call scope.

Two things decide whether a compile is rewritten:

* the process-wide switch, flipped by `enable()` / `disable()` / `enabled()`,
  which routes every later `jax.jit` compile through the pass;
* a context-local scope that `pool3d_pass.jit` sets around its own calls
  (`__call__`, `.lower(...).compile()`), so its compiles are rewritten even
  while the switch is off.

Flipping the switch clears JAX's in-memory caches (`jax.clear_caches()`), so an
executable compiled on one side of the switch is never handed out on the other.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Iterator

# True: rewrite (inside a pool3d_pass.jit compile); None: follow the switch.
_scope: contextvars.ContextVar[bool | None] = contextvars.ContextVar(
    "pool3d_pass_scope", default=None
)
_switch_lock = threading.Lock()
_globally_enabled = False


def active() -> bool:
    """Whether a compile starting now, in this context, should be rewritten."""
    scope = _scope.get()
    return _globally_enabled if scope is None else scope


def is_enabled() -> bool:
    """The state of the process-wide switch."""
    return _globally_enabled


def set_enabled(value: bool) -> bool:
    """Set the process-wide switch; clear JAX's caches if it changed. Returns the old state."""
    global _globally_enabled
    import jax

    from pool3d_pass.integration import compile_hook

    if value:
        compile_hook.install()
    with _switch_lock:
        previous = _globally_enabled
        if previous != value:
            _globally_enabled = value
            # Executables compiled under the other setting sit in JAX's caches
            # (C++ jit caches, pxla._cached_compilation, primitive dispatch).
            jax.clear_caches()
    return previous


@contextlib.contextmanager
def scope(rewrite: bool | None) -> Iterator[None]:
    """Within the block, compiles in this context are rewritten (True) or follow the switch (None)."""
    token = _scope.set(rewrite)
    try:
        yield
    finally:
        _scope.reset(token)
