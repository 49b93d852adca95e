"""The package's per-shape caches: bounded, and cleared with JAX's own.

Every cache that grows with the shapes a process compiles (binding lowerings,
partitionable wrappers) is made by `bounded(n)`: a `functools.lru_cache` of
at most n entries. `clear_caches()` (public as `pool3d_pass.clear_caches`)
empties them all, and so does `jax.clear_caches()`: the first lowering
registers them with JAX's cache registry (`jax._src.util.register_cache`, the
one `jax.clear_caches()` walks; listed in jax_compat.JAX_INTERNALS).
"""

from __future__ import annotations

import functools
import threading

_caches: list = []
_registered_with_jax = False
_lock = threading.Lock()


def bounded(maxsize: int):
    """`functools.lru_cache(maxsize)`, cleared by `clear_caches()` and `jax.clear_caches()`."""

    def decorate(function):
        cached = functools.lru_cache(maxsize=maxsize)(function)
        _caches.append(cached)
        return cached

    return decorate


def clear_caches() -> None:
    """Empty every cache of pool3d_pass (JAX's own caches are `jax.clear_caches()`'s)."""
    for cache in _caches:
        cache.cache_clear()


class _AsJaxCache:
    """What `jax._src.util.register_cache` takes: cache_clear, cache_info, cache_keys."""

    def cache_clear(self) -> None:
        clear_caches()

    def cache_info(self) -> dict:
        return {cache.__wrapped__.__qualname__: cache.cache_info() for cache in _caches}

    def cache_keys(self) -> list:
        return []


_AS_JAX_CACHE = _AsJaxCache()  # JAX's registry holds caches weakly


def register_with_jax() -> None:
    """Make `jax.clear_caches()` clear pool3d_pass's caches too (idempotent; imports jax)."""
    global _registered_with_jax
    if _registered_with_jax:
        return
    with _lock:
        if not _registered_with_jax:
            from jax._src import util

            util.register_cache(_AS_JAX_CACHE, "pool3d_pass: binding lowerings and partitionable wrappers")
            _registered_with_jax = True
