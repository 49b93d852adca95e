"""Two builds of the CPU kernels against each other, and how much one build moves on its own.

    python -m checks.kernel_ab --lib build/a.so --lib build/b.so            # A/B
    python -m checks.kernel_ab --lib build/a.so --lib build/a.so            # A/A: the noise
    python -m checks.kernel_ab --lib build/a.so --lib build/b.so --cases 3,9 --rounds 4 --repeats 20

A library from the current sources, with the package's own flags (CMakePresets.json's
`cpu` preset; CXXFLAGS at the first configure adds to them):

    cmake --preset cpu -B build/ab/new -DPython_EXECUTABLE=$PWD/.venv/bin/python && cmake --build build/ab/new
    # -> build/ab/new/_kernel.cpython-312-x86_64-linux-gnu.so

One XLA process can register only one kernel library (the target names are
global), so each library runs in child processes of its own
(`POOL3D_KERNEL_LIBRARY`, as `make sanitize` uses it), alternating A, B, A,
B, ... for `--rounds` rounds. A child times the four layer calls of
docs/contract.md (forward, forward_output, from_indices, from_input) on the
bench shapes (cases/pooling.py's FULL_CASES, or the indices `--cases` names), each
call after the settle step (cold caches), best of `--repeats`, and hashes
every result. The parent prints, per case and call, each library's best over
all its processes, the ratio, and each library's *spread*: the largest over
the smallest of its per-process bests. A difference inside the spread is
noise; the results' hashes must agree across libraries (else it says so and
exits 1).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the children import bench and checks from here
CALLS = ("forward", "forward_output", "from_indices", "from_input")


def child(case_indices: list[int], repeats: int) -> dict:
    """Time the layer calls of the cpu binding this process registered; {case: {ms, digest}}."""
    from functools import partial

    import jax
    import jax.numpy as jnp
    import numpy as np

    from bench.timing import settle
    from cases import pooling
    from pool3d_pass.bindings import cpu

    cpu.register()
    out = {}
    for i in case_indices:
        case = pooling.FULL_CASES[i]
        x_np, g_np = pooling.inputs(case)
        attrs = pooling.kernel_attrs(case)
        x5, g5 = pooling.as_rank5(jnp.asarray(x_np), case), pooling.as_rank5(jnp.asarray(g_np), case)
        forward = jax.jit(partial(cpu.max_pooling_3d_forward, **attrs))
        _, idx5 = jax.block_until_ready(forward(x5))
        calls = {
            "forward": (forward, (x5,)),
            "forward_output": (jax.jit(partial(cpu.max_pooling_3d_forward_output, **attrs)), (x5,)),
            "from_indices": (jax.jit(partial(cpu.max_pooling_3d_backward_from_indices,
                                             input_shape=tuple(x5.shape), **attrs)), (g5, idx5)),
            "from_input": (jax.jit(partial(cpu.max_pooling_3d_backward_from_input, **attrs)), (g5, x5)),
        }
        digest = hashlib.sha256()
        for name in CALLS:
            fn, args = calls[name]
            for leaf in jax.tree_util.tree_leaves(jax.block_until_ready(fn(*args))):
                digest.update(np.asarray(leaf).tobytes())
        best = dict.fromkeys(CALLS, float("inf"))
        for _ in range(repeats):
            for name in CALLS:
                fn, args = calls[name]
                settle()
                start = time.perf_counter()
                jax.block_until_ready(fn(*args))
                best[name] = min(best[name], (time.perf_counter() - start) * 1e3)
        out[case.name] = {"ms": best, "digest": digest.hexdigest()}
    return out


def summarize(runs: dict[str, list[dict]]) -> dict:
    """{label: [child result, ...]} -> per (case, call): each label's best and spread; digests agree?

    A label's best is its minimum over its processes; its spread is the largest
    per-process best over the smallest.
    """
    labels = list(runs)
    rows = []
    first = runs[labels[0]][0]
    for case in first:
        for call in first[case]["ms"]:
            row = {"case": case, "call": call, "best_ms": {}, "spread": {}}
            for label in labels:
                per_process = [r[case]["ms"][call] for r in runs[label]]
                row["best_ms"][label] = min(per_process)
                row["spread"][label] = max(per_process) / min(per_process)
            rows.append(row)
    digests = {case: {label: {r[case]["digest"] for r in runs[label]} for label in labels} for case in first}
    differing = sorted(case for case, by_label in digests.items()
                       if len(set().union(*by_label.values())) != 1)
    return {"labels": labels, "rows": rows, "results_differ": differing}


def table(summary: dict) -> str:
    """Markdown: best ms per label, each later label's speedup over the first, and the spreads."""
    labels = summary["labels"]
    base = labels[0]
    head = (["case", "call"] + [f"{lb} ms" for lb in labels] + [f"{base} / {lb}" for lb in labels[1:]]
            + [f"{lb} spread" for lb in labels])
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for row in summary["rows"]:
        best, spread = row["best_ms"], row["spread"]
        cells = ([row["case"], row["call"]] + [f"{best[lb]:.3g}" for lb in labels]
                 + [f"{best[base] / best[lb]:.2f}x" for lb in labels[1:]] + [f"{spread[lb]:.2f}x" for lb in labels])
        lines.append("| " + " | ".join(cells) + " |")
    spreads = sorted(s for row in summary["rows"] for s in row["spread"].values())
    if spreads:
        lines.append("")
        lines.append(f"Spread of one library's best across its processes: median {spreads[len(spreads) // 2]:.2f}x, "
                     f"largest {spreads[-1]:.2f}x ({len(spreads)} figures).")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m checks.kernel_ab", description=__doc__.split("\n\n")[0])
    ap.add_argument("--lib", action="append", default=[],
                    help="a built _kernel library; give two or more, labelled A, B, ... in order")
    ap.add_argument("--cases", help="comma-separated indices into cases/pooling.py's FULL_CASES (default: all)")
    ap.add_argument("--rounds", type=int, default=3, help="processes per library, alternating")
    ap.add_argument("--repeats", type=int, default=20, help="timed calls per call and process")
    ap.add_argument("--json", help="also write the summary here")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    from cases import pooling

    indices = [int(i) for i in args.cases.split(",")] if args.cases else list(range(len(pooling.FULL_CASES)))
    if args.child:
        print(json.dumps(child(indices, args.repeats)))
        return 0
    if len(args.lib) < 2:
        ap.error("give --lib at least twice (the same file twice measures the noise)")
    labels = [chr(ord("A") + i) for i in range(len(args.lib))]
    for label, path in zip(labels, args.lib):
        print(f"{label}: {path}")
    print()
    runs: dict[str, list[dict]] = {label: [] for label in labels}
    for r in range(args.rounds):
        for label, path in zip(labels, args.lib):
            print(f"round {r + 1}/{args.rounds}: {label}", file=sys.stderr)
            env = dict(os.environ, POOL3D_KERNEL_LIBRARY=os.path.abspath(path))
            done = subprocess.run([sys.executable, "-m", "checks.kernel_ab", "--child", "--cases",
                                   ",".join(map(str, indices)), "--repeats", str(args.repeats)],
                                  env=env, cwd=ROOT, capture_output=True, text=True)
            if done.returncode != 0:
                print(done.stderr[-4000:], file=sys.stderr)
                return done.returncode
            runs[label].append(json.loads(done.stdout.strip().splitlines()[-1]))
    summary = summarize(runs)
    print(table(summary))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    if summary["results_differ"]:
        print(f"RESULTS DIFFER between the libraries on: {', '.join(summary['results_differ'])}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
