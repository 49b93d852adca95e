"""Timing two ways of doing one job, interleaved, and the verdict it gives: a median ratio and its spread.

`measure` takes timers (`timer(n)` runs n calls back to back, waits for the
last, returns seconds per call), warms each up, then runs `rounds` rounds in
a rotating order, so drift and another tenant's load hit every variant
alike; it returns each variant's samples, min and median. The device check
(checks/device_check/timing.py) times with it too.

`verdict(samples_xla, samples_kernels)`: per round, the ratio XLA time /
kernel time (the two timed side by side); `ratio` is their median and
`spread` their median absolute deviation from it (a burst of another
tenant's load in one or two rounds is not the spread; a machine whose every
round differs is). The kernels are used where they win beyond the spread,
`ratio - spread > 1`; within it, or slower, the job stays XLA's. So on a
noisy machine the decision leans to the program as the user wrote it.
"""

from __future__ import annotations

import math
import statistics
import time

ROUNDS = 7  # at least 5 (the median of >= 5), after one warm-up call of each variant
TARGET_S = 0.03  # each round's calls of one variant take about this long


def measure(timers: dict, rounds: int = ROUNDS, target_s: float = TARGET_S) -> dict:
    """{name: {"min_ms", "median_ms", "calls_per_round", "samples_ms"}}: warm-up, then interleaved rounds."""
    n = {}
    for name, timer in timers.items():
        once = timer(1)  # warm-up (and a first estimate)
        n[name] = max(2, min(50, math.ceil(target_s / max(timer(1), once, 1e-6))))
    times = {name: [] for name in timers}
    names = list(timers)
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            times[name].append(timers[name](n[name]) * 1e3)
    return {name: {"min_ms": min(t), "median_ms": statistics.median(t), "calls_per_round": n[name],
                   "samples_ms": t} for name, t in times.items()}


def verdict(xla_ms: list[float], kernels_ms: list[float]) -> dict:
    """{"rewrite", "ratio", "spread", "xla_ms", "kernels_ms", "rounds"} from two interleaved sample lists."""
    ratios = sorted(x / max(k, 1e-9) for x, k in zip(xla_ms, kernels_ms))
    ratio = statistics.median(ratios)
    spread = statistics.median(abs(r - ratio) for r in ratios)
    return {"rewrite": ratio - spread > 1.0, "ratio": round(ratio, 4), "spread": round(spread, 4),
            "xla_ms": round(statistics.median(xla_ms), 4), "kernels_ms": round(statistics.median(kernels_ms), 4),
            "rounds": len(ratios)}


def jax_timer(compiled, arguments):
    """A timer of a compiled JAX function over one argument tuple (results waited for once per round)."""
    import jax

    def run(n: int) -> float:
        start = time.perf_counter()
        out = None
        for _ in range(n):
            out = compiled(*arguments)
        jax.block_until_ready(out)
        return (time.perf_counter() - start) / n

    return run


def describe(v: dict) -> str:
    """"1.84x +- 0.05 (XLA 2.31 ms, kernels 1.25 ms)" for a speed verdict."""
    return f"{v['ratio']:.2f}x +- {v['spread']:.2f} (XLA {v['xla_ms']:.3g} ms, kernels {v['kernels_ms']:.3g} ms)"
