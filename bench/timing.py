"""Timing helpers for the benchmarks: interleaved repeats, min/median, copy bandwidth.

`measure({name: fn, ...}, repeats=, warmup=)` calls every fn `warmup` times,
then runs `repeats` rounds in which each fn is called once, in turn. Running
the variants interleaved (not all repeats of one, then all of the next) means
a burst of noise from another tenant of this shared machine hits every variant
alike, so ratios of the figures are fairer than the figures themselves.

Before every timed call, `settle()` (untimed) allocates, fills and frees a
128 MiB numpy array, so every call starts from the same memory state (cold
caches): a call right after XLA's own pooling program ran several times
slower than after anything else, and only a large fresh allocation in
between removed that. Each round also starts one variant further along
(round r runs variant r mod n first).

Every fn must block until its result is ready (use `blocking(...)` for JAX).

`copy_bandwidth()` measures a plain memory copy: bytes read + bytes written
per second, best of a few single-threaded and multi-threaded numpy copies.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Callable

import numpy as np

__all__ = ["Stats", "measure", "measure_one", "blocking", "jax_call", "copy_bandwidth", "settle"]


class Stats(dict):
    """Timing of one variant: min_ms, median_ms, runs_ms (a JSON-ready dict)."""

    @classmethod
    def from_seconds(cls, seconds: list[float]) -> Stats:
        ms = [s * 1e3 for s in seconds]
        return cls(min_ms=min(ms), median_ms=statistics.median(ms), runs_ms=[round(m, 4) for m in ms])

    @property
    def min(self) -> float:
        return self["min_ms"]

    @property
    def median(self) -> float:
        return self["median_ms"]


def blocking(fn: Callable, *args) -> Callable[[], object]:
    """A no-argument callable that runs fn(*args) and waits for every JAX result."""
    import jax

    def call():
        return jax.block_until_ready(fn(*args))

    return call


def jax_call(dtype) -> Callable[[], object]:
    """`jax.jit(jnp.negative)` of 4 elements: what any call from JAX costs before its program does anything."""
    import jax
    import jax.numpy as jnp

    return blocking(jax.jit(jnp.negative), jnp.zeros(4, dtype))


SETTLE_BYTES = 128 * 2**20


def settle() -> None:
    """Allocate, fill and free SETTLE_BYTES: the same memory state before every timed call."""
    scratch = np.empty(SETTLE_BYTES // 8)
    scratch.fill(1.0)
    del scratch


def measure(fns: dict[str, Callable[[], object]], *, repeats: int, warmup: int = 1,
            settle_between: bool = True) -> dict[str, Stats]:
    """Interleaved timing of several no-argument callables; see the module docstring."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    seconds: dict[str, list[float]] = {name: [] for name in fns}
    names = list(fns)
    for r in range(repeats):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            if settle_between:
                settle()
            start = time.perf_counter()
            fns[name]()
            seconds[name].append(time.perf_counter() - start)
    return {name: Stats.from_seconds(s) for name, s in seconds.items()}


def measure_one(fn: Callable[[], object], *, repeats: int, warmup: int = 1) -> Stats:
    """Timing of one no-argument callable."""
    return measure({"fn": fn}, repeats=repeats, warmup=warmup)["fn"]


def _threaded_copy(dst: np.ndarray, src: np.ndarray, threads: int) -> None:
    # numpy releases the GIL while copying plain numeric arrays.
    bounds = np.linspace(0, src.size, threads + 1).astype(int)
    workers = [threading.Thread(target=np.copyto, args=(dst[lo:hi], src[lo:hi]))
               for lo, hi in zip(bounds[:-1], bounds[1:])]
    for w in workers:
        w.start()
    for w in workers:
        w.join()


def copy_bandwidth(*, nbytes: int = 256 * 2**20, repeats: int = 5) -> dict:
    """Copy bandwidth in GB/s (1e9 bytes/s, read + written), best of single- and multi-threaded.

    The array (default 256 MiB) is much larger than any cache, so this is a
    memory-to-memory rate: the rate a memory-bound kernel could at best move
    its bytes at on this machine, now.
    """
    src = np.ones(nbytes // 4, np.float32)
    dst = np.empty_like(src)
    threads = os.cpu_count() or 1
    variants = {
        "numpy_copyto_1_thread": lambda: np.copyto(dst, src),
        f"numpy_copyto_{threads}_threads": lambda: _threaded_copy(dst, src, threads),
    }
    stats = measure(variants, repeats=repeats, warmup=1)
    rates = {name: 2 * src.nbytes / (s.min / 1e3) / 1e9 for name, s in stats.items()}
    best = max(rates, key=rates.get)
    return {
        "array_bytes": int(src.nbytes),
        "gb_per_s_by_method": {k: round(v, 3) for k, v in rates.items()},
        "gb_per_s": rates[best],
        "method": best,
        "note": "bytes read + bytes written per second, best (min-time) of the repeats",
    }
