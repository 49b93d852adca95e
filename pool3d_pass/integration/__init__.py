"""JAX integration: `jit`, and the process-wide `enable` / `disable` / `enabled` switch.

* `jit(fun, *, strategy="auto", ..., **jit_kwargs)`: a drop-in for `jax.jit` whose
  compiled program has every max-pool gradient (`stablehlo.select_and_scatter`)
  rewritten into the pool3d kernel calls.
* `enable()` / `disable()` / `with enabled():` route every later `jax.jit`
  compile (Flax, Equinox, plain JAX) through the pass, with no change to the
  user's code.

`jit`, `enable` and `enabled` take the pass's settings (options.py
`SETTINGS`: `strategy`, "auto" (the platform's choice), "recompute" or
"indices"; `gpu_kernels`; `gpu_interpret`; ...) as keywords, or one
`options=PassOptions(...)`: `pool3d_pass.rewrite`'s settings, checked alike.

Modules compiled for a platform with a binding (`pool3d_pass.bindings.registry`)
are rewritten; the others compile unchanged. Every compile that meets a
max-pool gradient logs at INFO on logger "pool3d_pass" what was rewritten and
what a speed rule left to XLA, and one WARNING naming every gradient left for
any other reason, with locations and reasons (module_rewrite.py). How it hooks
into JAX, and which JAX internals it relies on: docs/jax_integration.md.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from pool3d_pass.integration.jit import jit
from pool3d_pass.options import PassOptions, compile_options

__all__ = ["jit", "enable", "disable", "enabled"]


def enable(strategy: str | None = None, *, options: PassOptions | None = None, **settings) -> None:
    """Route every later `jax.jit` compile in this process through the pass.

    The settings (`strategy`: "auto", the platform's choice, "recompute" or
    "indices"; `gpu_kernels`; `gpu_interpret`; ...: options.py `SETTINGS`)
    as keywords, or `options=PassOptions(...)`. Clears JAX's in-memory
    compilation caches if the switch or its settings change, so functions
    compiled before are recompiled (and rewritten) on their next call.
    Under calibration "first-use", a device one process owns (NeuronCores)
    whose kernels can run here is verified now, before the program takes it
    (docs/calibration.md).
    """
    _set_enabled(True, _options(strategy, options, settings))


def disable() -> None:
    """Stop routing `jax.jit` compiles through the pass (`pool3d_pass.jit` still rewrites).

    Clears JAX's in-memory compilation caches if the switch changes, so no
    rewritten executable is handed to plain `jax.jit` afterwards.
    """
    _set_enabled(False)


@contextlib.contextmanager
def enabled(strategy: str | None = None, *, options: PassOptions | None = None, **settings) -> Iterator[None]:
    """`enable(...)` with these settings for the duration of the block, then restore the previous state."""
    from pool3d_pass.integration import routing

    options = _options(strategy, options, settings)
    previous_options = routing.global_options()
    previous = _set_enabled(True, options)
    try:
        yield
    finally:
        _set_enabled(previous, previous_options)


def _options(strategy: str | None, options: PassOptions | None, settings: dict) -> PassOptions:
    """The switch's options from `enable` / `enabled`'s arguments (`strategy` may come first, by position)."""
    if strategy is not None:
        settings = {"strategy": strategy, **settings}
    return compile_options(options, **settings)


def _set_enabled(value: bool, options: PassOptions | None = None) -> bool:
    """The switch (routing.py), with the compile hook installed before it is first turned on."""
    from pool3d_pass.integration import compile_hook, routing

    if value:
        compile_hook.install()
        from pool3d_pass.calibration import ahead

        ahead.before_program(options)  # devices one process owns: verified before the program holds them
    return routing.set_enabled(value, options)
