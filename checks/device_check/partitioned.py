"""Stage "partitioned": sharded programs on the device's one GPU, `pool3d_pass.jit` against `jax.jit`.

A user's data-parallel program on one chip, written against the public API
only: a NamedSharding over a 1-device Mesh (batch axis "data") on the
arguments, and the same job under `jax.shard_map` over that mesh. Jobs:
"gradient only", "forward + gradient" and "inference", on a non-overlapping
and an overlapping case, f32, strategy "indices" (the binding wherever it
can run, whatever `auto`'s table says). Each rewritten program must agree with
`jax.jit` of the same function (bit for bit where windows do not overlap or
for inference, else within the f32 summation bound), keep the result's
sharding, and (on the device) hold a pool3d kernel call with XLA's own
scatter or reduce-window gone. On more devices the same code is the
multi-GPU check; on one it proves the partitioned path runs and is exact.
"""

from __future__ import annotations

import numpy as np

from checks.device_check.jobs import JOBS, job_function, kernel_calls, not_rewritten
from checks.device_check.numerics import max_diff, same_bits

FORMS = ("NamedSharding", "shard_map")


def _cases(dry_run: bool):
    from cases import pooling

    shape = (2, 8, 8, 8, 4) if dry_run else (4, 16, 32, 32, 32)  # NDHWC, batch sharded
    return [pooling.Case(shape, (2, 2, 2), (2, 2, 2), (0, 0, 0), layout="NDHWC", dtype="float32"),
            pooling.Case(shape, (3, 3, 3), (2, 2, 2), (1, 1, 1), layout="NDHWC", dtype="float32")]


def _sharded(fun, form: str, mesh, arity: int, job: str):
    import jax
    from jax.sharding import PartitionSpec as P

    if form == "NamedSharding":
        return fun
    out_specs = (P("data"), P("data")) if job == "forward + gradient" else P("data")
    return jax.shard_map(fun, mesh=mesh, in_specs=(P("data"),) * arity, out_specs=out_specs)


def run(rec, budget, log, dry_run: bool) -> int:
    import time

    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    import pool3d_pass
    from cases import pooling

    mesh = Mesh(np.array(jax.devices()[:1]), ("data",))
    sharding = NamedSharding(mesh, P("data"))
    failures, per_item = 0, 10.0
    for case in _cases(dry_run):
        overlap = any(s < k for k, s in zip(case.kernel, case.stride))
        x_np, g_np = pooling.inputs(case)
        x, g = jax.device_put(jnp.asarray(x_np), sharding), jax.device_put(jnp.asarray(g_np), sharding)
        for form in FORMS:
            for job in JOBS:
                label = f"{case.name} / {job} / {form}"
                if not budget.fits(per_item):
                    rec.record("skipped", item=label, reason=f"budget: {budget.left():.0f} s left")
                    continue
                start = time.monotonic()
                args = (x,) if job == "inference" else (x, g)
                fun = _sharded(job_function(job, pooling.pool_fn(case)), form, mesh, len(args), job)
                problems = []
                try:
                    expected = jax.jit(fun)(*args)
                    compiled = pool3d_pass.jit(fun, strategy="indices").lower(*args).compile()
                    got = compiled(*args)
                    pairs = list(zip(got, expected)) if isinstance(got, tuple) else [(got, expected)]
                    for a, b in pairs:
                        a_np, b_np = np.asarray(a), np.asarray(b)
                        if (not overlap or job == "inference") and not same_bits(a_np, b_np):
                            problems.append(f"not bit-exact vs jax.jit (max diff {max_diff(a_np, b_np):g})")
                        elif max_diff(a_np, b_np) > 1e-5 * max(1.0, float(np.max(np.abs(b_np)))):
                            problems.append(f"max diff {max_diff(a_np, b_np):g} vs jax.jit")
                        if a.sharding.spec != b.sharding.spec and not a.sharding.is_equivalent_to(b.sharding, a.ndim):
                            problems.append(f"result sharding {a.sharding} where jax.jit gives {b.sharding}")
                    text = compiled.as_text()
                    if (reason := not_rewritten(text, job, dry_run)) is not None:
                        problems.append(reason)
                    calls = kernel_calls(text)
                except Exception as error:  # noqa: BLE001 - a refusal or crash of the partitioned path is a result
                    problems.append(f"{type(error).__name__}: {str(error).splitlines()[0][:300] if str(error) else ''}")
                    calls = None
                failures += bool(problems)
                rec.record("partitioned", case=case.name, job=job, form=form, devices=mesh.size, kernel_calls=calls,
                           problems=problems)
                rec.table(f"| partitioned | {label} | {'ok' if not problems else 'FAIL: ' + '; '.join(problems)} |")
                per_item = max(3.0, time.monotonic() - start)
                log(f"partitioned {label}: {time.monotonic() - start:.1f} s")
    return failures
