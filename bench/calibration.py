"""What strategy auto's calibration costs (docs/calibration.md): a cache hit per compile, a first-use calibration.

    python -m bench.calibration            (from the repository root; CPU; a temporary verdict cache)

Not a section of `make bench` (whose rows calibrate with `python -m pool3d_pass calibrate --bench`):

1. A cache hit: the decisions of one compile of a program with four pool
   classes, each with a stored verdict (a new decider, as every pass run
   makes, reading the device's key and eight verdict files), median of 200;
   the pass on it under calibration "cached" against "off" (the prior alone,
   nothing read), interleaved, median of 30 each; and the same program's
   whole `pool3d_pass.jit` compile, for scale.
2. A first-use calibration of one CPU class: the wall time from the compile
   that meets the class to the verdict stored (one child process: start,
   JAX import, the numerics battery, the timing), three times, each with an
   empty cache.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time

import jax
import numpy as np
from jax import lax


def _program():
    pools = [((2, 2, 2), (2, 2, 2)), ((3, 3, 3), (2, 2, 2)), ((3, 3, 3), (1, 1, 1)), ((1, 2, 2), (1, 2, 2))]

    def step(xs, gs):
        return [jax.vjp(lambda x, w=w, s=s: lax.reduce_window(x, np.float32(-np.inf), lax.max, (1, 1, *w),
                                                               (1, 1, *s), "VALID"), x)[1](g)[0]
                for (w, s), x, g in zip(pools, xs, gs)]

    xs = [np.ones((2, 8, 16, 16, 16), np.float32) for _ in pools]
    gs = [np.ones(jax.eval_shape(lambda x, w=w, s=s: lax.reduce_window(x, np.float32(-np.inf), lax.max, (1, 1, *w),
                                                                       (1, 1, *s), "VALID"), x).shape, np.float32)
          for (w, s), x in zip(pools, xs)]
    return step, xs, gs


def cache_hit() -> dict:
    import pool3d_pass
    from pool3d_pass.calibration import decide

    step, xs, gs = _program()
    text = jax.jit(step).lower(xs, gs).as_text()
    os.environ["POOL3D_CALIBRATION_BUDGET_S"] = "600"
    pool3d_pass.rewrite_text(text, target="cpu", calibration="first-use")  # thin classes only: none here
    # store a verdict for every class, as a calibration would (the command measures them all)
    from jaxlib.mlir import ir

    from pool3d_pass.bindings.registry import binding_for
    from pool3d_pass.calibration import ahead
    from pool3d_pass.ir.context import make_context
    from pool3d_pass.options import PassOptions, binding_settings
    from pool3d_pass.rewriting.strategy import StrategyChooser

    binding = binding_for("cpu")
    chooser = StrategyChooser(PassOptions(target="cpu"), binding, binding_settings())
    with make_context():
        requests = chooser.requests_in(ir.Module.parse(text).operation)
    start = time.monotonic()
    ahead.measure(binding, binding_settings(), [r.subject() for r in requests], 600, rounds=5)
    measured_s = time.monotonic() - start
    times = {"cached": [], "off": []}
    for round_ in range(30):
        for mode in ("cached", "off") if round_ % 2 else ("off", "cached"):  # alternate who goes first
            decide.reset()
            begin = time.perf_counter()
            _, report = pool3d_pass.rewrite_text(text, target="cpu", calibration=mode)
            times[mode].append((time.perf_counter() - begin) * 1e3)
            assert report.rewritten == 4, report
    # the lookups alone: a pass run's decider (a new one per compile) asked about the module's four classes
    lookups = []
    for _ in range(200):
        begin = time.perf_counter()
        decider = decide.Decider(PassOptions(target="cpu", calibration="cached"), binding, binding_settings())
        decisions = [decider.decide(r) for r in requests]
        lookups.append((time.perf_counter() - begin) * 1e3)
    assert all("this machine's calibration" in d.source for d in decisions), decisions
    compile_ms = []
    for _ in range(5):
        begin = time.perf_counter()
        pool3d_pass.jit(step, calibration="cached").lower(xs, gs).compile()
        compile_ms.append((time.perf_counter() - begin) * 1e3)
    return {"classes": len(requests), "rewrite_cached_ms": statistics.median(times["cached"]),
            "rewrite_off_ms": statistics.median(times["off"]),
            "hit_cost_ms": statistics.median(c - o for c, o in zip(times["cached"], times["off"])),
            "lookups_ms": statistics.median(lookups),
            "jit_compile_ms": statistics.median(compile_ms), "calibrating_all_s": measured_s}


def first_use() -> list[float]:
    import pool3d_pass
    from pool3d_pass.calibration import decide

    def pool(x):
        return lax.reduce_window(x, np.float32(-np.inf), lax.max, (1, 2, 2, 2, 1), (1, 2, 2, 2, 1), "VALID")

    x = np.ones((4, 16, 48, 48, 32), np.float32)  # the CPU's thin class: channels-last, windows that do not overlap
    seconds = []
    for _ in range(3):
        os.environ["POOL3D_CACHE_DIR"] = tempfile.mkdtemp(prefix="pool3d_bench_cache_")
        decide.reset()
        text = jax.jit(pool).lower(x).as_text()
        begin = time.perf_counter()
        _, report = pool3d_pass.rewrite_text(text, target="cpu", calibration="first-use")
        seconds.append(time.perf_counter() - begin)
        assert any("this machine's calibration" in e.remark() for e in report.events), report.remarks()
    return seconds


def main() -> int:
    os.environ["POOL3D_CACHE_DIR"] = tempfile.mkdtemp(prefix="pool3d_bench_cache_")
    hit = cache_hit()
    print(f"cache hit: {hit['classes']} classes; the decisions of one compile (a new decider, every verdict read) "
          f"{hit['lookups_ms']:.3f} ms (median of 200); the pass with them {hit['rewrite_cached_ms']:.1f} ms, with the "
          f"prior alone {hit['rewrite_off_ms']:.1f} ms (difference {hit['hit_cost_ms']:.2f} ms, median of 30 "
          f"interleaved pairs: noise at this size); the whole pool3d_pass.jit compile {hit['jit_compile_ms']:.0f} ms; "
          f"measuring all four classes ahead: {hit['calibrating_all_s']:.1f} s")
    seconds = first_use()
    print(f"first-use calibration of one CPU class (NDHWC f32 (4,16,48,48,32) k2 s2 inference), from the compile to "
          f"the verdict: {', '.join(f'{s:.2f}' for s in seconds)} s (median {statistics.median(seconds):.2f} s)")
    print(f"load average: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    sys.exit(main())
