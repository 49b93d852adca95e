"""Stage "jobs": each pooling job through `pool3d_pass.jit` against `jax.jit` of the same job, on the device.

The jobs are a user's (cases/pooling.py): "gradient only" (x, g -> dx),
"forward + gradient" (x, g -> (y, dx)) and "inference" (x -> y), on the
bench's quick shapes, for both strategies. Each compiled program must be the
rewritten one (kernel calls present, XLA's own scatter or reduce-window gone)
and agree with XLA:GPU: bit for bit without overlap in f32, else within the
summation bound.
"""

from __future__ import annotations

import re

import numpy as np

from checks.device_check.numerics import max_diff, same_bits

JOBS = ("gradient only", "forward + gradient", "inference")
STRATEGIES = ("indices", "recompute")


def kernel_calls(hlo_text: str) -> int:
    """Calls of the pool3d kernels in a compiled program: Triton (Pallas) or the contract's FFI targets."""
    return hlo_text.count("__gpu$xla.gpu.triton") + len(re.findall(r'custom_call_target="pool3d\.', hlo_text))


def not_rewritten(hlo_text: str, job: str, dry_run: bool = False) -> str | None:
    """Why a compiled program is not the rewritten one (None: it is).

    In the dry run the kernels are interpret-mode loops, so no kernel call is looked for there.
    """
    if re.search(r"\s(scatter|select-and-scatter)\(", hlo_text):
        return "XLA's own gradient (scatter) is left in the compiled program"
    if job == "inference" and re.search(r"\sreduce-window\(", hlo_text):
        return "XLA's reduce-window is left in the compiled program"
    if not dry_run and kernel_calls(hlo_text) == 0:
        return "no pool3d kernel call in the compiled program"
    return None


def job_function(job: str, pool):
    from cases import pooling

    return pool if job == "inference" else pooling.jax_job(job, pool)


def _as_list(r):
    return list(r) if isinstance(r, tuple) else [r]


def run(rec, budget, case_list, log, dry_run: bool, strategies=STRATEGIES) -> int:
    import time

    import jax
    import jax.numpy as jnp

    import pool3d_pass
    from cases import pooling

    failures, per_case = 0, 10.0
    for case in case_list:
        if not budget.fits(per_case):
            rec.record("skipped", item=case.name, reason=f"budget: {budget.left():.0f} s left")
            continue
        start = time.monotonic()
        x_np, g_np = pooling.inputs(case)
        x, g = jnp.asarray(x_np), jnp.asarray(g_np)
        overlap = any(s < k for k, s in zip(case.kernel, case.stride))
        for job in JOBS:
            fun = job_function(job, pooling.pool_fn(case))
            args = (x,) if job == "inference" else (x, g)
            expected = [np.asarray(a) for a in _as_list(jax.jit(fun)(*args))]
            for strategy in strategies if job != "inference" else strategies[:1]:
                jitted = pool3d_pass.jit(fun, strategy=strategy)
                compiled = jitted.lower(*args).compile()
                got = [np.asarray(a) for a in _as_list(compiled(*args))]
                exact = all(same_bits(a, b) for a, b in zip(got, expected))
                diffs = [max_diff(a, b) for a, b in zip(got, expected)]
                problems = []
                if (not overlap or job == "inference") and case.dtype == "float32" and not exact:
                    problems.append(f"not bit-exact vs XLA (max diffs {diffs})")
                bound = 1e-5 if case.dtype == "float32" else 2e-2
                scale = max(1.0, float(np.max(np.abs(expected[-1].astype(np.float32)))))
                if max(diffs) > bound * scale:
                    problems.append(f"max diffs {diffs} vs XLA above {bound} relative")
                text = compiled.as_text()
                if (reason := not_rewritten(text, job, dry_run)) is not None:
                    problems.append(reason)
                failures += bool(problems)
                rec.record("jobs", case=case.name, job=job, strategy=strategy, bit_exact_vs_xla=exact,
                           max_abs_diff_vs_xla=diffs, kernel_calls=kernel_calls(text), problems=problems)
                rec.table(f"| jobs | {case.name} | {job} / {strategy} | "
                          f"{'ok' if not problems else 'FAIL: ' + '; '.join(problems)} |")
        per_case = max(3.0, time.monotonic() - start)
        log(f"jobs {case.name}: {per_case:.1f} s")
    return failures
