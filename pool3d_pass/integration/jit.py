"""`pool3d_pass.jit`: `jax.jit` whose compiled program has every max-pool gradient rewritten.

`jit(fun, **jit_kwargs)` is `jax.jit` applied to a thin wrapper of `fun`, so:

* JAX's caches (tracing, lowering, executables) are keyed on the wrapper, a
  different object from `fun`: plain `jax.jit(fun)` never receives a
  rewritten executable and `pool3d_pass.jit(fun)` never a plain one;
* every jax.jit option (pytrees, static_argnums/argnames, donate_*,
  in/out_shardings, ...) is jax.jit's own, untouched.

Compiles started by `__call__`, by `.lower(...).compile()` and by
`.trace(...).lower().compile()` run in a `routing.scope(options)` (the
`PassOptions` made, and checked, from the settings given when `jit` is
called), which the compile hook sees, and report to the object's own
`routing.ReportSlot` (`last_report`: the `RewriteReport` of its last compile). While
the user's function is being traced the scope and the slot are reset, so
eager computations inside it follow the process-wide switch and report nowhere.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from typing import Any

from jax._src import source_info_util, stages, traceback_util

from pool3d_pass.integration import compile_hook, routing
from pool3d_pass.options import FIELDS, PassOptions, compile_options

# Keep this file's frames (the trace-time wrapper) out of the source locations
# JAX writes into the module and of user tracebacks, as JAX does for its own
# files: a program without pooling then compiles to exactly jax.jit's text.
source_info_util.register_exclusion(__file__)
traceback_util.register_exclusion(__file__)


class RewritingLowered(stages.Lowered):
    """A `jax.stages.Lowered` whose `compile()` goes through the pool3d pass.

    `as_text()` / `compiler_ir()` still show the module before the rewrite;
    `.compile().as_text()` shows what XLA compiled.
    """

    __slots__ = ()
    # Class attributes (no new slot: instances are recast by `__class__`), set per `Jitted` (`_stage_class`).
    options: PassOptions | None = None
    reports: routing.ReportSlot | None = None

    def compile(self, *args: Any, **kwargs: Any) -> stages.Compiled:
        with routing.scope(self.options, self.reports):
            return super().compile(*args, **kwargs)


class RewritingTraced(stages.Traced):
    """A `jax.stages.Traced` whose `lower()` returns a `RewritingLowered`."""

    __slots__ = ()
    options: PassOptions | None = None
    reports: routing.ReportSlot | None = None
    lowered_class: type = RewritingLowered

    def lower(self, *args: Any, **kwargs: Any) -> RewritingLowered:
        with routing.scope(self.options, self.reports):
            return _recast(super().lower(*args, **kwargs), self.lowered_class)


def _stage_class(cls: type, **attributes: Any) -> type:
    """A subclass of `cls` (same slots) with `attributes` as class attributes: one per `Jitted`."""
    return type(cls.__name__, (cls,), {"__slots__": (), "__module__": cls.__module__, **attributes})


def _recast(stage: Any, cls: type) -> Any:
    """A shallow copy of `stage` as an instance of `cls` (a subclass of its class, same slots)."""
    recast = copy.copy(stage)
    recast.__class__ = cls
    return recast


class Jitted:
    """What `pool3d_pass.jit` returns: a `jax.jit` object whose compiles are rewritten."""

    def __init__(self, fun: Callable, jit_kwargs: dict[str, Any], options: PassOptions):
        import jax

        self._options = options
        self._reports = routing.ReportSlot()
        lowered = _stage_class(RewritingLowered, options=options, reports=self._reports)
        self._lowered_class = lowered
        self._traced_class = _stage_class(RewritingTraced, options=options, reports=self._reports,
                                          lowered_class=lowered)
        compile_hook.install()

        @functools.wraps(fun)
        def traced_body(*args: Any, **kwargs: Any) -> Any:
            # Runs at trace time: eager work inside `fun` follows the switch, and is no compile of this object's.
            with routing.scope(None):
                return fun(*args, **kwargs)

        self._fun = fun
        self._jitted = jax.jit(traced_body, **jit_kwargs)
        functools.update_wrapper(self, fun)

    @property
    def last_report(self):
        """The `RewriteReport` of this object's last compile (None before the first): what was rewritten, what
        was missed and why, each with its location; `print()` it. A call that reuses a compiled program leaves
        it as it was."""
        return self._reports.report

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with routing.scope(self._options, self._reports):
            return self._jitted(*args, **kwargs)

    def lower(self, *args: Any, **kwargs: Any) -> RewritingLowered:
        with routing.scope(self._options, self._reports):
            return _recast(self._jitted.lower(*args, **kwargs), self._lowered_class)

    def trace(self, *args: Any, **kwargs: Any) -> RewritingTraced:
        with routing.scope(self._options, self._reports):
            return _recast(self._jitted.trace(*args, **kwargs), self._traced_class)

    def __getattr__(self, name: str) -> Any:
        # eval_shape, clear_cache, ...: jax.jit's own.
        if name == "_jitted":  # not set yet (failed __init__, copy): no recursion
            raise AttributeError(name)
        return getattr(self._jitted, name)

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        # Decorating a method: bind like a function does.
        return self if instance is None else functools.partial(self, instance)

    def __repr__(self) -> str:
        return f"pool3d_pass.jit({self._fun!r})"


def jit(fun: Callable | None = None, /, *, options: PassOptions | None = None, **kwargs: Any) -> Any:
    """`jax.jit(fun, **jit_kwargs)` with every max-pool gradient rewritten at compile time.

    The pass's settings (options.py `SETTINGS`: `strategy`, "auto", the
    platform's choice, "recompute" or "indices"; `gpu_kernels`;
    `gpu_interpret`; ...) are keywords of the same names, or one
    `options=PassOptions(...)`; every other keyword is jax.jit's. Also usable
    as `@pool3d_pass.jit` or `@pool3d_pass.jit(static_argnums=...)`.
    """
    settings = {name: kwargs.pop(name) for name in FIELDS if name in kwargs}  # the input's are refused
    made = compile_options(options, **settings)  # a bad setting fails here, not at the decorated definition
    if fun is None:
        return functools.partial(jit, options=made, **kwargs)
    if not callable(fun):
        raise TypeError(f"fun must be a callable (the function to compile), got {fun!r:.60} ({type(fun).__name__})")
    return Jitted(fun, kwargs, made)
