"""Which compiles go through the pass: the process-wide switch and the per-call scope.

Two things decide whether a compile is rewritten:

* the process-wide switch, flipped by `enable()` / `disable()` / `enabled()`,
  which routes every later `jax.jit` compile through the pass;
* a context-local scope that `pool3d_pass.jit` sets around its own calls
  (`__call__`, `.lower(...).compile()`), so its compiles are rewritten even
  while the switch is off.

Each carries the strategy the rewrite asks for (`pool3d_pass.rewrite`'s
`strategy`: "auto", "recompute" or "indices"); a scope's wins over the switch's.

The switch is also a JAX config state (`SWITCH_STATE`, "off" or the strategy)
included in JAX's jit and trace-context cache keys: an executable is cached
under the switch setting its call started with, so one compiled (rewritten)
just before `disable()` and cached after it can never be handed to a call
made after `disable()` (nor a plain one after `enable()`). Flipping the switch
also clears JAX's in-memory caches (`jax.clear_caches()`). Threads: see
docs/jax_integration.md, "Threads".
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

SWITCH_STATE = "pool3d_pass_rewrite"  # the JAX config state's name
OFF = "off"
_switch_state = None  # the JAX config state, made on the first flip; False: this JAX cannot


def _jax_switch_state():
    """The JAX config state mirroring the switch, in JAX's cache keys (None if this JAX cannot)."""
    global _switch_state
    if _switch_state is None:
        from jax._src import config as jax_config

        existing = getattr(jax_config, "config_states", {}).get(SWITCH_STATE)
        try:
            _switch_state = existing if existing is not None else jax_config.enum_state(
                name=SWITCH_STATE, enum_values=[OFF, *STRATEGIES], default=OFF,
                help="pool3d_pass.enable(): the strategy every jax.jit compile is rewritten with, or off.",
                include_in_jit_key=True, include_in_trace_context=True)
        except (AttributeError, TypeError):  # pragma: no cover - a JAX without key-carrying states
            _switch_state = False
    return _switch_state if _switch_state is not False else None


def check_strategy(strategy: str) -> str:
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; expected one of {', '.join(STRATEGIES)}")
    return strategy


def strategy() -> str | None:
    """The strategy a compile starting now, in this context, is rewritten with; None: not rewritten."""
    scoped = _scope.get()
    if scoped is not None:
        return scoped
    state = _switch_state
    if state is not None and state is not False:
        # The value this thread's JAX cache keys carry (the switch, read once).
        value = state.value
        return None if value == OFF else value
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
            state = _jax_switch_state()
            if state is not None:
                state._set(strategy if value else OFF)
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
