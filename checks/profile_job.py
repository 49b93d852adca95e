"""Run one section-1 job in a loop, for a profiler: where does pool3d_pass.jit's time go?

    python -m checks.profile_job --case 0 --job gradient --variant pool3d --seconds 10
    perf record -g -o /tmp/p.data -- .venv/bin/python -m checks.profile_job --case 2 --job both
    perf report -i /tmp/p.data --stdio --no-children --sort dso,sym | head -60
    python -m checks.profile_job --case 0 --job both --hlo      # the entry computation XLA compiled

--case indexes cases/pooling.py's FULL_CASES (QUICK_CASES with --quick); --job is
"gradient" (gradient only) or "both" (forward + gradient); --variant is
"pool3d" (pool3d_pass.jit), "recompute" (forced), "xla" (jax.jit) or "torch".
Compiles first (outside the loop), then calls the program back to back for
--seconds and prints the calls made and the mean time per call.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time


def entry_computation(text: str) -> str:
    """The ENTRY computation of an HLO module's text, metadata dropped."""
    start = text.index("\nENTRY ")
    body = text[start + 1:text.index("\n}", start) + 2]
    return re.sub(r", metadata=\{[^}]*\}", "", body)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m checks.profile_job", description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", type=int, default=0)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--job", choices=("gradient", "both"), default="gradient")
    ap.add_argument("--variant", choices=("pool3d", "recompute", "xla", "torch"), default="pool3d")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--hlo", action="store_true", help="print the compiled entry computation and exit")
    args = ap.parse_args(argv)

    import jax
    import jax.numpy as jnp

    from bench import rewritten, user_view
    from cases import pooling

    case = (pooling.QUICK_CASES if args.quick else pooling.FULL_CASES)[args.case]
    job = user_view.JOBS[0 if args.job == "gradient" else 1]
    x_np, g_np = pooling.inputs(case)
    if args.variant == "torch":
        import torch

        torch.set_num_threads(os.cpu_count() or 1)
        tp = pooling.TorchPool(case, torch)
        call = user_view._torch_job(job, tp, tp.tensor(x_np), tp.tensor(g_np))
    else:
        x, g = jax.block_until_ready((jnp.asarray(x_np), jnp.asarray(g_np)))
        fun = pooling.jax_job(job, pooling.pool_fn(case))
        if args.variant == "xla":
            program = rewritten.compile_plain(fun, x, g)
        else:
            program = rewritten.compile_rewritten(fun, x, g,
                                                  strategy="recompute" if args.variant == "recompute" else None)
        counts = rewritten.census(program)
        print(f"{case.name}, {job}, {args.variant}: {rewritten.strategy_of(counts)}; {rewritten.calls_text(counts)}",
              file=sys.stderr)
        if args.hlo:
            print(entry_computation(program.as_text()))
            return 0

        def call():
            return jax.block_until_ready(program(x, g))

    call()
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < args.seconds:
        call()
        n += 1
    print(f"{n} calls, {1e3 * (time.perf_counter() - start) / n:.3g} ms per call", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
