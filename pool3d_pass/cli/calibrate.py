"""`python -m pool3d_pass calibrate`: strategy auto's verdicts measured ahead of time, and the cache's listing.

    python -m pool3d_pass calibrate --shape 8,32,32,64,64 --kernel 2 --stride 2        (NCDHW f32, every job)
    python -m pool3d_pass calibrate --shape 4,16,48,48,32 --layout NDHWC --dtype bf16 --kernel 3 --stride 2 --padding 1 --job inference
    python -m pool3d_pass calibrate --bench [--quick]        (make bench's per-layer rows, from a source checkout)
    python -m pool3d_pass calibrate --platform gpu ...       (on the GPU, before a program holds it)

Each class is what the pass itself sees in the job's program (JAX's max pool
and its vjp, lowered, then the pass's kernel view: the strategy's calls,
the size bucket), so the verdicts are the ones a compile of that program
reads. Every class given is measured again, in one child process, and
stored (calibration/store.py); the table says, per class and job, the
numerics battery's verdict, the decision, XLA time / kernel time with its
spread, both medians, the shape timed, and where it is stored.
`python -m pool3d_pass` lists what the cache holds (`cache_lines`).
"""

from __future__ import annotations

import argparse
import sys

from pool3d_pass import environment
from pool3d_pass.calibration import modes
from pool3d_pass.calibration.key import FORWARD_AND_GRADIENT, GRADIENT_ONLY, INFERENCE, NUMERICS
from pool3d_pass.calibration.store import Store

JOBS = {"gradient": GRADIENT_ONLY, "forward+gradient": FORWARD_AND_GRADIENT, "inference": INFERENCE}
DTYPES = ("f32", "bf16", "f16")


def _triple(text: str) -> tuple[int, int, int]:
    values = tuple(int(v) for v in text.split(","))
    if len(values) == 1:
        values *= 3
    if len(values) != 3 or min(values) < 0:
        raise argparse.ArgumentTypeError(f"expected one number or three (D,H,W), got {text!r}")
    return values


def _shape(text: str) -> tuple[int, ...]:
    values = tuple(int(v) for v in text.split(","))
    if len(values) != 5 or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected five positive sizes (in the layout's order), got {text!r}")
    return values


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m pool3d_pass calibrate", description=__doc__.split("\n\n")[0])
    p.add_argument("--platform", default="cpu", help="the binding's platform: cpu (default), gpu or neuron")
    p.add_argument("--shape", type=_shape, action="append", help="an input shape, in --layout's order (repeatable)")
    p.add_argument("--layout", choices=("NCDHW", "NDHWC"), default="NCDHW")
    p.add_argument("--dtype", choices=DTYPES, default="f32")
    p.add_argument("--kernel", type=_triple, default=(2, 2, 2))
    p.add_argument("--stride", type=_triple, default=None, help="default: the kernel")
    p.add_argument("--padding", type=_triple, default=(0, 0, 0))
    p.add_argument("--job", choices=(*JOBS, "all"), default="all")
    p.add_argument("--strategy", choices=("auto", "indices", "recompute"), default="auto",
                   help="whose calls are timed (auto: the platform's choice)")
    p.add_argument("--bench", action="store_true", help="make bench's per-layer rows (cases/pooling.py)")
    p.add_argument("--quick", action="store_true", help="with --bench: make bench-quick's rows")
    p.add_argument("--budget-s", type=float, default=600.0, help="the whole run's seconds (default 600)")
    p.add_argument("--rounds", type=int, default=None, help="timed rounds per class (default 7)")
    return p


def _programs(args):
    """(label, job, function, example arguments) per program to calibrate for."""
    import jax

    from pool3d_pass.calibration import jobs
    from pool3d_pass.contract.pool_config import PoolConfig

    wanted = list(JOBS.values()) if args.job == "all" else [JOBS[args.job]]
    if args.bench:
        from cases import pooling  # a source checkout's cases/ (--bench says so)

        for case in pooling.QUICK_CASES if args.quick else pooling.FULL_CASES:
            pool = pooling.pool_fn(case)
            x, g = pooling.inputs(case)
            for job in wanted:
                function = pool if job == INFERENCE else pooling.jax_job(
                    {GRADIENT_ONLY: "gradient only", FORWARD_AND_GRADIENT: "forward + gradient"}[job], pool)
                yield case.name, job, function, (x,) if job == INFERENCE else (x, g)
        return
    if not args.shape:
        raise SystemExit("python -m pool3d_pass calibrate: give --shape (and the window), or --bench")
    dtype = jax.numpy.dtype(jobs.JAX_DTYPES[args.dtype])
    pool = PoolConfig(args.kernel, args.stride or args.kernel, args.padding, args.layout)
    if (reason := pool.invalid()) is not None:
        raise SystemExit(f"python -m pool3d_pass calibrate: {reason}")
    for shape in args.shape:
        try:
            pooled = pool.pooled_shape(shape)
        except ValueError as error:
            raise SystemExit(f"python -m pool3d_pass calibrate: {error}") from None
        if min(pooled) < 1:
            raise SystemExit(f"python -m pool3d_pass calibrate: shape {shape} has no window of {args.kernel}")
        x, g = jax.ShapeDtypeStruct(shape, dtype), jax.ShapeDtypeStruct(pooled, dtype)
        for job in wanted:
            yield f"{args.layout} {args.dtype} {shape}", job, jobs.xla_job(job, pool, dtype), (x,) if job == INFERENCE else (x, g)


def subjects(args, binding, settings) -> list:
    """(class, program) for each class the pass sees in each program (its own requests), in order."""
    import jax
    from jaxlib.mlir import ir

    from pool3d_pass.ir.context import make_context
    from pool3d_pass.options import PassOptions
    from pool3d_pass.rewriting.strategy import StrategyChooser

    options = PassOptions(target=binding.platform, strategy=args.strategy)
    chooser = StrategyChooser(options, binding, settings)
    found = []
    for label, job, function, arguments in _programs(args):
        text = jax.jit(function).lower(*arguments).as_text()
        with make_context():
            module = ir.Module.parse(text)
            requests = [r for r in chooser.requests_in(module.operation) if r.job == job]
        found += [(request.subject(), label) for request in requests]
    return found


def _row(label: str, subject, numerics, speed) -> str:
    verdict = (speed or {}).get("entry", {}) or {}
    v = verdict.get("verdict", {})
    passed = numerics.get("verdict", {}).get("passed") if numerics else None
    numbers = "passed" if passed else ("FAILED" if passed is False else "-")
    if passed is False:
        decision = "XLA (numerics)"
    elif v:
        decision = "kernels" if v["rewrite"] else "XLA"
    else:
        decision = f"not measured: {(speed or {}).get('why', '')}"[:80]
    figures = (f"{v['ratio']:.2f}x | {v['spread']:.2f} | {v['xla_ms']:.4g} | {v['kernels_ms']:.4g}"
               if v else "- | - | - | -")
    shape = "x".join(map(str, v.get("shape", subject.shape))) if v else "x".join(map(str, subject.shape))
    return (f"| {label} | {subject.describe().split(', ', 1)[0]} | {subject.job} ({subject.calls}) | {numbers} | "
            f"{decision} | {figures} | {shape} |")


HEADER = ("| program | class | job (calls) | numerics | decision | XLA / kernels | spread | XLA ms | kernels ms | "
          "shape timed |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    from pool3d_pass.bindings.registry import binding_for, platforms
    from pool3d_pass.calibration import ahead
    from pool3d_pass.options import binding_settings

    binding = binding_for(args.platform)
    if binding is None:
        print(f"python -m pool3d_pass calibrate: no binding for platform {args.platform!r}; the platforms are "
              f"{', '.join(platforms())}", file=sys.stderr)
        return 2
    try:
        binding.require()
    except ImportError as error:
        print(f"python -m pool3d_pass calibrate: the {args.platform} binding cannot run here: {error}", file=sys.stderr)
        return 2
    settings = binding_settings()
    labelled = subjects(args, binding, settings)
    if not labelled:
        print("python -m pool3d_pass calibrate: the pass rewrites nothing in those programs", file=sys.stderr)
        return 2
    store = Store()
    unique = list(dict.fromkeys(s for s, _ in labelled))  # one measurement per class (programs may share one)
    device, measured = ahead.measure(binding, settings, unique, args.budget_s, store=store, rounds=args.rounds)
    if device is None:
        print(f"python -m pool3d_pass calibrate: nothing measured: {measured[0].why}", file=sys.stderr)
        return 1
    by_subject = {m.subject: m for m in measured}  # (the shape timed is no part of a subject's equality)
    print(f"pool3d_pass calibration on {device.platform} {device.model} ({device.runtime}; {device.kernels}; "
          f"{device.versions})")
    print(HEADER)
    for subject, label in labelled:
        numerics, speed = by_subject.get(subject.numerics()), by_subject.get(subject)
        print(_row(label, subject, numerics and {"verdict": (numerics.entry or {}).get("verdict")},
                   speed and {"entry": speed.entry, "why": speed.why}))
    print(f"stored in {store.folder} (decision: the kernels where XLA time / kernel time minus its spread exceeds 1; "
          f"compiles under calibration {modes.FIRST_USE!r} or {modes.CACHED!r} read these)")
    return 0


def cache_lines(limit: int = 40) -> list[str]:
    """What `python -m pool3d_pass` says about the verdict cache: where, how many, and the latest verdicts."""
    store = Store()
    entries = store.entries()
    lines = [f"Calibration cache: {store.folder} ({len(entries)} verdict(s); ${environment.CACHE_DIR} moves it; "
             f"calibration mode {modes.mode()!r})"]
    for entry in entries[-limit:]:
        if entry.get("unreadable"):
            lines.append(f"  unreadable (redone when needed): {entry['path']}")
            continue
        subject, device, verdict = entry["subject"], entry["device"], entry["verdict"]
        window = (f"{subject['layout']} {subject['dtype']} kernel {subject['kernel']} stride {subject['stride']} "
                  f"padding {subject['padding']}")
        if subject["kind"] == NUMERICS:
            what = "numerics passed" if verdict["passed"] else f"numerics FAILED: {verdict.get('failed', '')[:120]}"
        else:
            what = (f"{subject['job']} ({subject['calls']}): {'kernels' if verdict['rewrite'] else 'XLA'}, "
                    f"{verdict['ratio']:.2f}x +- {verdict['spread']:.2f}")
        lines.append(f"  {device['platform']} {device['model']}: {window}: {what} ({entry.get('stored', '?')})")
    if len(entries) > limit:
        lines.insert(1, f"  (the latest {limit} shown)")
    return lines
