"""Which compiles go through the pass: the process-wide switch and the per-call scope.

Two things decide whether a compile is rewritten:

* the process-wide switch, flipped by `enable()` / `disable()` / `enabled()`,
  which routes every later `jax.jit` compile through the pass;
* a context-local scope that `pool3d_pass.jit` sets around its own calls
  (`__call__`, `.lower(...).compile()`), so its compiles are rewritten even
  while the switch is off.

Each carries the `PassOptions` the rewrite asks for (made, and so checked, by
`enable` / `pool3d_pass.jit`; its strategy is "auto", "recompute" or
"indices"); a scope's wins over the switch's. The compile hook fills in the
target and mesh of each compile. Neither this module nor the switch installs
the hook: `enable` and `pool3d_pass.jit` do (compile_hook.py).

The switch is also a JAX config state (`SWITCH_STATE`: "off", or a word
naming the switch's options) included in JAX's jit and trace-context cache
keys: an executable is cached under the switch setting its call started
with, so one compiled (rewritten) just before `disable()` and cached after it
can never be handed to a call made after `disable()` (nor a plain one after
`enable()`, nor one rewritten with other settings after `enable(...)` with
new ones). Flipping the switch also clears JAX's in-memory caches
(`jax.clear_caches()`). Threads: see docs/jax_integration.md, "Threads".
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Iterator

from pool3d_pass.options import PassOptions


class ReportSlot:
    """Where a `pool3d_pass.jit` object keeps the `RewriteReport` of its last compile (`last_report`)."""

    __slots__ = ("report",)

    def __init__(self) -> None:
        self.report = None

    def __call__(self, report) -> None:
        self.report = report


# The package's one context variable. (options, report slot): rewrite with the options (inside
# a pool3d_pass.jit compile) and hand the report to the slot (or to none); None: follow the
# switch, report nowhere. A context variable because JAX calls the compile hook deep inside
# `jax.jit` with no argument of ours: the scope set around a pool3d_pass.jit call must reach
# that hook in the same thread or task and no other. What the rewrite itself needs (options,
# then the binding's settings) is passed on as arguments from the hook down.
_scope: contextvars.ContextVar[tuple[PassOptions, ReportSlot | None] | None] = contextvars.ContextVar(
    "pool3d_pass_scope", default=None
)
_switch_lock = threading.Lock()
_globally_enabled = False
_global_options: PassOptions | None = None  # the switch's options; None: PassOptions() (made when first asked)

SWITCH_STATE = "pool3d_pass_rewrite"  # the JAX config state's name
OFF = "off"
_switch_state = None  # the JAX config state, made on the first flip; False: this JAX cannot
# The switch's words (the state's values) and the options each stands for: words, not the
# options object, go into JAX's cache keys (a str hashes and compares alike in every JAX).
_switch_options: dict[str, PassOptions] = {}


def _switch_word(options: PassOptions) -> str:
    """The state's value for a switch on with `options`: its settings, spelt out."""
    word = ",".join(f"{name}={value}" for name, value in options.settings().items())
    _switch_options.setdefault(word, options)
    return word


def _jax_switch_state():
    """The JAX config state mirroring the switch, in JAX's cache keys (None if this JAX cannot)."""
    global _switch_state
    if _switch_state is None:
        from jax._src import config as jax_config

        existing = getattr(jax_config, "config_states", {}).get(SWITCH_STATE)
        try:
            _switch_state = existing if existing is not None else jax_config.string_or_object_state(
                name=SWITCH_STATE, default=OFF,
                help="pool3d_pass.enable(): the settings every jax.jit compile is rewritten with, or off.",
                include_in_jit_key=True, include_in_trace_context=True)
        except (AttributeError, TypeError):  # pragma: no cover - a JAX without key-carrying states
            _switch_state = False
    return _switch_state if _switch_state is not False else None


def options() -> PassOptions | None:
    """The options a compile starting now, in this context, is rewritten with; None: not rewritten."""
    scoped = _scope.get()
    if scoped is not None:
        return scoped[0]
    state = _switch_state
    if state is not None and state is not False:
        # The value this thread's JAX cache keys carry (the switch, read once).
        value = state.value
        return _switch_options.get(value)  # None: off (or a word this process never set)
    return global_options() if _globally_enabled else None


def is_enabled() -> bool:
    """The state of the process-wide switch."""
    return _globally_enabled


def global_options() -> PassOptions:
    """The options the process-wide switch rewrites with (when on)."""
    global _global_options
    if _global_options is None:
        _global_options = PassOptions()
    return _global_options


def global_strategy() -> str:
    """The strategy the process-wide switch rewrites with (when on)."""
    return global_options().strategy


def set_enabled(value: bool, options: PassOptions | None = None) -> bool:
    """Set the process-wide switch (and its options: None, the defaults); clear JAX's caches if either
    changed. Returns the old state."""
    global _globally_enabled, _global_options
    import jax

    options = PassOptions() if options is None else options
    with _switch_lock:
        previous = _globally_enabled
        before = _switch_word(global_options()) if previous else OFF
        _globally_enabled, _global_options = value, options
        after = _switch_word(options) if value else OFF
        if before != after:
            state = _jax_switch_state()
            if state is not None:
                state._set(after)
            # Executables compiled under the other setting sit in JAX's caches
            # (C++ jit caches, pxla._cached_compilation, primitive dispatch).
            jax.clear_caches()
    return previous


def report_slot() -> ReportSlot | None:
    """Where the report of a compile starting now, in this context, goes (a pool3d_pass.jit object's), or None."""
    scoped = _scope.get()
    return None if scoped is None else scoped[1]


@contextlib.contextmanager
def scope(rewrite: PassOptions | None, reports: ReportSlot | None = None) -> Iterator[None]:
    """Within the block, compiles in this context are rewritten with options `rewrite` and report to `reports`,
    or follow the switch and report nowhere (None)."""
    token = _scope.set(None if rewrite is None else (rewrite, reports))
    try:
        yield
    finally:
        _scope.reset(token)
