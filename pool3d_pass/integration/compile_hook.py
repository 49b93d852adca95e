"""The hook: where JAX hands a lowered StableHLO module to the XLA compiler.

`jax._src.compiler.compile_or_get_cached` is the one function every jit /
pjit / primitive-dispatch compile goes through (called as a module attribute
from `jax._src.interpreters.pxla._cached_compilation`). It receives the XLA
client (`backend.platform` says which platform) and the `ir.Module`, and
computes the persistent-cache key from that module itself, so replacing the
module before calling the original makes the cache key describe the rewritten
program. `devices` (the device assignment) says how many devices the program
spans. `install()` swaps the module attribute for a wrapper that asks
`routing.options()` and, if they are set, `module_rewrite.rewrite_for_platform`
with those options.

A rewrite never breaks a program: if XLA fails to compile the rewritten
module (any error), the original module is compiled instead, with one warning
naming the reason and a saved reproducer (`module_rewrite.compile_failed`).
While the rewritten module compiles, the binding lowerings spliced into it
are kept alive (the `spliced` list the rewrite fills, held by the wrapper):
XLA's partitioner calls back into their custom_partitioning callbacks, which
JAX holds only weakly.

`JAX_INTERNALS` lists every private JAX name this package relies on;
`check_jax_internals()` fails with a message naming what moved (both live in
`pool3d_pass.jax_compat`, with the other per-version differences).
See docs/jax_integration.md.
"""

from __future__ import annotations

import functools
import threading

# The private JAX names relied upon, and their check, live with everything
# else that differs between JAX versions (re-exported here for callers).
from pool3d_pass.jax_compat import JAX_INTERNALS, JaxInternalsChanged, check_jax_internals

__all__ = ["JAX_INTERNALS", "JaxInternalsChanged", "check_jax_internals", "install", "installed"]

HOOK_MARKER = "_pool3d_pass_hook"
_install_lock = threading.Lock()


def installed() -> bool:
    """Whether `compile_or_get_cached` is currently our wrapper."""
    from jax._src import compiler

    return getattr(compiler.compile_or_get_cached, HOOK_MARKER, False)


def install() -> None:
    """Wrap `jax._src.compiler.compile_or_get_cached` once per process (idempotent).

    The wrapper does nothing unless `routing.options()` is set; it stays installed.
    """
    from jax._src import compiler

    from pool3d_pass import caches
    from pool3d_pass.integration import module_rewrite, routing

    with _install_lock:
        if installed():
            return
        check_jax_internals()
        caches.register_with_jax()
        original = compiler.compile_or_get_cached

        @functools.wraps(original)
        def compile_or_get_cached(backend, computation, devices, *args, **kwargs):
            options = routing.options()
            if options is None:
                return original(backend, computation, devices, *args, **kwargs)
            # The lowerings spliced in, referenced by this frame until the compile below returns.
            spliced: list = []
            rewritten = module_rewrite.rewrite_for_platform(
                computation, backend.platform, devices=devices, options=options, spliced=spliced)
            if rewritten is computation:
                return original(backend, computation, devices, *args, **kwargs)
            try:
                return original(backend, rewritten, devices, *args, **kwargs)
            except Exception as error:  # noqa: BLE001 -- any failure: compile the original
                module_rewrite.compile_failed(computation, backend.platform, devices, options, error)
            return original(backend, computation, devices, *args, **kwargs)

        setattr(compile_or_get_cached, HOOK_MARKER, True)
        compile_or_get_cached._pool3d_pass_original = original
        compiler.compile_or_get_cached = compile_or_get_cached
