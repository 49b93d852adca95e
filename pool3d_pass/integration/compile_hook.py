"""The hook: where JAX hands a lowered StableHLO module to the XLA compiler.

`jax._src.compiler.compile_or_get_cached` is the one function every jit /
pjit / primitive-dispatch compile goes through (called as a module attribute
from `jax._src.interpreters.pxla._cached_compilation`). It receives the XLA
client (`backend.platform` says which platform) and the `ir.Module`, and
computes the persistent-cache key from that module itself, so replacing the
module before calling the original makes the cache key describe the rewritten
program. `devices` (the device assignment) says how many devices the program
spans. `install()` swaps the module attribute for a wrapper that asks
`routing.active()` and, if so, `module_rewrite.rewrite_for_platform`.

`JAX_INTERNALS` lists every private JAX name this package relies on;
`check_jax_internals()` fails with a message naming what moved.
See docs/jax_integration.md.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import threading


# (module, attribute, the leading parameter names we rely on, or None)
JAX_INTERNALS: tuple[tuple[str, str, tuple[str, ...] | None], ...] = (
    ("jax._src.compiler", "compile_or_get_cached",
     ("backend", "computation", "devices", "compile_options", "host_callbacks",
      "executable_devices", "pgle_profiler")),
    ("jax._src.interpreters.pxla", "_cached_compilation",
     None),  # calls `compiler.compile_or_get_cached(backend, computation, ...)`
    ("jax._src.stages", "Lowered", None),
    ("jax._src.stages", "Traced", None),
    ("jax", "clear_caches", ()),
    ("jax._src.source_info_util", "register_exclusion", ("path",)),
    ("jax._src.traceback_util", "register_exclusion", ("path",)),
)

HOOK_MARKER = "_pool3d_pass_hook"
_install_lock = threading.Lock()


class JaxInternalsChanged(ImportError):
    """This JAX lacks (or changed) a private name the pool3d_pass JAX hook relies on."""


def check_jax_internals() -> None:
    """Raise JaxInternalsChanged naming every relied-upon internal that moved or changed."""
    problems = []
    for module_name, attribute, parameters in JAX_INTERNALS:
        try:
            module = importlib.import_module(module_name)
        except ImportError as error:
            problems.append(f"module {module_name} is gone ({error})")
            continue
        target = getattr(module, attribute, None)
        if target is None:
            problems.append(f"{module_name}.{attribute} is gone")
            continue
        target = getattr(target, "_pool3d_pass_original", target)
        if parameters:
            found = tuple(inspect.signature(target).parameters)[: len(parameters)]
            if found != parameters:
                problems.append(
                    f"{module_name}.{attribute} parameters are {found}, expected {parameters}")
    for cls_name, method in (("Lowered", "compile"), ("Traced", "lower")):
        stages = importlib.import_module("jax._src.stages")
        if not callable(getattr(getattr(stages, cls_name, None), method, None)):
            problems.append(f"jax._src.stages.{cls_name}.{method} is gone")
    if problems:
        import jax

        raise JaxInternalsChanged(
            f"pool3d_pass's JAX hook was written for jax 0.10.2 (this is {jax.__version__}); "
            "see docs/jax_integration.md. Changed: " + "; ".join(problems))


def installed() -> bool:
    """Whether `compile_or_get_cached` is currently our wrapper."""
    from jax._src import compiler

    return getattr(compiler.compile_or_get_cached, HOOK_MARKER, False)


def install() -> None:
    """Wrap `jax._src.compiler.compile_or_get_cached` once per process (idempotent).

    The wrapper does nothing unless `routing.active()`; it stays installed.
    """
    from jax._src import compiler

    from pool3d_pass.integration import module_rewrite, routing

    with _install_lock:
        if installed():
            return
        check_jax_internals()
        original = compiler.compile_or_get_cached

        @functools.wraps(original)
        def compile_or_get_cached(backend, computation, devices, *args, **kwargs):
            if routing.active():
                computation = module_rewrite.rewrite_for_platform(
                    computation, backend.platform, devices=devices)
            return original(backend, computation, devices, *args, **kwargs)

        setattr(compile_or_get_cached, HOOK_MARKER, True)
        compile_or_get_cached._pool3d_pass_original = original
        compiler.compile_or_get_cached = compile_or_get_cached
