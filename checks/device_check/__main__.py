"""The device check of the gpu binding, in one shot within a fixed time budget (`make gpu-check`).

    python3 -m checks.device_check [--out DIR] [--budget-s 450]     (from the repository root)
    python3 -m checks.device_check --platform cpu                    (dry run, no GPU)

On a machine with an NVIDIA GPU and JAX's CUDA plugin (no internet, no pip
needed), these stages in this order, each in its own process with its share
of the budget; the first two are the kernels' correctness and always get at
least their floor (REQUIRED_S), whatever the budget:

  numerics     every call of the gpu binding vs the contract's pure-JAX reference
               and (CUDA kernels) the CPU kernels bit for bit; every call's result
               buffers poisoned before it runs, twice with two patterns: unwritten
               elements and nondeterminism fail (tie-heavy, NaN/inf/-0, subnormal inputs)
  int64        more than 2^31 elements (64-bit offsets): forward, forward_output,
               backward_from_indices, poisoned, checked on the device
  sanitizer    the calls on small shapes under compute-sanitizer memcheck and racecheck
  jobs         each pooling job through pool3d_pass.jit vs jax.jit (both strategies)
  partitioned  a NamedSharding over a 1-device mesh and shard_map: pool3d_pass.jit vs jax.jit
  timing       XLA:GPU vs pool3d_pass.jit (indices, recompute) vs PyTorch CUDA, four
               jobs, both layouts, f32 and bf16, 32 MiB to 2 GiB inputs, C3D's own
               pools, copy floor
  variants     the CUDA kernels' launch variants (threads per block, vector or
               scalar paths) on the 1 GiB rows, one child process per variant
  model        a Flax C3D train step, jax.jit vs pool3d_pass.jit, and each program's
               device time split by kernel class (jax.profiler)

The stages that compile through the pass (jobs, partitioned, timing,
variants, model) verify each class as a user's first compile does (a
first-use calibration child runs its numerics battery before any kernel of
it runs in the stage; verdicts kept in DIR/calibration-cache for the later
stages): a class that fails stays XLA's there, and the stage says so.

Every result is appended to DIR/gpu_check.jsonl and DIR/gpu_check.md as it is
produced (DIR: --out, else $OUT, else build/gpu_check), so a run
killed part-way keeps what finished. A stage that would overrun its share
skips what does not fit and records it as skipped. A summary of at most
11,000 characters is printed last and written to DIR/gpu_check.log's end.
Exit status: 1 if a numerics, int64, sanitizer, jobs or partitioned check
failed, 0 otherwise.

`--platform cpu` is the dry run: the kernels run in Pallas interpret mode on
CPU, compiles for "cpu" are pointed at the gpu binding, the shapes are tiny;
its timings mean nothing.
"""

from __future__ import annotations

import argparse
import os
import platform as platform_module
import subprocess
import sys
import threading
import time
from pathlib import Path

from checks.device_check import summary
from checks.device_check.record import Budget, Recorder, read_records

ROOT = Path(__file__).resolve().parents[2]

# Each stage's share of the budget (what one leaves unused goes to the next), in running order.
STAGES = {"numerics": 0.15, "int64": 0.06, "sanitizer": 0.17, "jobs": 0.04, "partitioned": 0.03,
          "timing": 0.24, "variants": 0.16, "model": 0.15}
# The kernels' correctness runs first and is never cut below these seconds (the others share what is left).
REQUIRED_S = {"numerics": 60.0, "int64": 40.0}
CHECK_FAILED = 3  # a stage's exit status when a check failed (1 is Python's, for an uncaught exception)
GRACE_S = 20.0  # a stage may overrun its share by one item; past this it is killed


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m checks.device_check", description=__doc__.split("\n\n")[0])
    parser.add_argument("--platform", choices=("gpu", "cpu"), default="gpu",
                        help="gpu: the device check; cpu: a dry run in interpret mode (no GPU)")
    parser.add_argument("--out", type=Path, default=None,
                        help="results folder (default: $OUT, else build/gpu_check)")
    parser.add_argument("--budget-s", type=float, default=450.0, help="the whole run's time budget")
    parser.add_argument("--stages", default=",".join(STAGES), help="comma-separated subset of " + ",".join(STAGES))
    parser.add_argument("--rounds", type=int, default=None, help="timed rounds per variant (default 5; dry run 2)")
    parser.add_argument("--no-torch", action="store_true", help="skip the PyTorch column")
    parser.add_argument("--implementation", choices=("auto", "cuda", "pallas"), default=None,
                        help="the gpu binding's kernels (POOL3D_GPU_IMPL; default: the binding's own choice)")
    parser.add_argument("--stage", choices=tuple(STAGES), help=argparse.SUPPRESS)  # a stage's own process
    parser.add_argument("--variant", default=None, help=argparse.SUPPRESS)  # a launch variant's own process
    return parser.parse_args(argv)


def out_dir(args) -> Path:
    if args.out is not None:
        return args.out
    if os.environ.get("OUT"):
        return Path(os.environ["OUT"])
    return ROOT / "build" / "gpu_check"


# --- one stage, in its own process -----------------------------------------------


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def _torch(args):
    if args.no_torch:
        return None
    try:
        import torch
    except ImportError:
        return None
    if args.platform == "gpu" and not torch.cuda.is_available():
        return None
    return torch


def _dry_run_setup() -> None:
    """Compiles for "cpu" go through the gpu binding, its kernels in interpret mode."""
    from pool3d_pass.integration import module_rewrite

    original = module_rewrite.rewrite_for_platform

    def rewrite_for_platform(module, platform, **kwargs):
        return original(module, "gpu" if platform == "cpu" else platform, **kwargs)

    module_rewrite.rewrite_for_platform = rewrite_for_platform


def run_stage(args, seconds: float) -> int:
    dry_run = args.platform == "cpu"
    if dry_run:
        os.environ["POOL3D_GPU_INTERPRET"] = "1"
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax
    import jaxlib

    rec = Recorder(out_dir(args), args.stage)
    budget = Budget(seconds)
    if not dry_run and jax.default_backend() != "gpu":
        rec.record("stage_error", error=f"JAX's default backend is {jax.default_backend()!r}, not 'gpu' "
                                        "(is the CUDA plugin installed? --platform cpu is the dry run)")
        return 2
    if dry_run:
        _dry_run_setup()
    torch = _torch(args)
    rounds = args.rounds or (2 if dry_run else 5)
    if args.stage == "numerics":
        from pool3d_pass.bindings.gpu.binding import implementation

        rec.record("machine", device_kind=jax.devices()[0].device_kind, jax=jax.__version__, jaxlib=jaxlib.__version__,
                   implementation=implementation(),
                   python=platform_module.python_version(), dry_run=dry_run,
                   torch=None if torch is None else torch.__version__,
                   torch_device=torch.cuda.get_device_name(0) if torch is not None and not dry_run else None)
        from checks.device_check import numerics
        from pool3d_pass.bindings import reference
        from pool3d_pass.bindings.gpu import calls

        if dry_run:  # interpret-mode compiles are slow
            numerics.CONFIGS = numerics.CONFIGS[:1]
            numerics.DEVICE_BRANCH_CASES = ()  # (their point is the device's own code)
        cpu = numerics.cpu_kernels() if implementation() == "cuda" else None
        return CHECK_FAILED if numerics.run(rec, budget, calls, reference, _log, cpu, dry_run) else 0
    if args.stage == "int64":
        from checks.device_check import numerics
        from pool3d_pass.bindings.gpu import calls

        return CHECK_FAILED if numerics.run_int64(rec, budget, calls, _log, dry_run) else 0
    if args.stage == "sanitizer":
        from checks.device_check import sanitizer

        return CHECK_FAILED if sanitizer.run(rec, budget, dry_run, _log) else 0
    if args.stage == "partitioned":
        from checks.device_check import partitioned

        return CHECK_FAILED if partitioned.run(rec, budget, _log, dry_run) else 0
    if args.stage == "variants":
        from checks.device_check import variants

        if args.variant is not None:
            variants.child(rec, budget, dry_run, _log, rounds, args.variant)
            return 0
        variants.run(rec, budget, lambda name, env, seconds: _run_child(args, "variants", seconds, env, name), _log)
        return 0
    if args.stage == "jobs":
        from cases import pooling
        from checks.device_check import jobs

        case_list = [pooling.QUICK_CASES[i] for i in ((0, 1) if dry_run else (0, 1, 3, 6))]
        return CHECK_FAILED if jobs.run(rec, budget, case_list, _log, dry_run) else 0
    if args.stage == "timing":
        from checks.device_check import timing

        timing.run(rec, budget, torch, dry_run, _log, rounds)
        return 0
    from checks.device_check import model

    model.run(rec, budget, dry_run, _log, rounds)
    return 0


# --- the whole run ------------------------------------------------------------------


def _run_child(args, stage: str, seconds: float, extra_env=None, variant: str | None = None):
    """Run `stage` (or one variant of it) in its own process with `seconds`; exit status or "killed"."""
    out = out_dir(args)
    command = [sys.executable, "-m", "checks.device_check", "--stage", stage, "--platform", args.platform,
               "--out", str(out)] + (["--no-torch"] if args.no_torch else []) + \
              (["--rounds", str(args.rounds)] if args.rounds else []) + (["--variant", variant] if variant else [])
    # Stages that compile through the pass meet the numerics rule as a user's program does: each class's
    # battery runs in a first-use child before its kernels are used (explicit strategies: numerics only,
    # never a timing), stored for the later stages in DIR/calibration-cache, within part of the stage's time.
    env = dict(os.environ, **(extra_env or {}), POOL3D_CHECK_STAGE_S=str(seconds), POOL3D_CALIBRATION="first-use",
               POOL3D_CACHE_DIR=str(out / "calibration-cache"),
               POOL3D_CALIBRATION_BUDGET_S=str(max(30.0, 0.4 * seconds)),
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    return run_logged(command, env, seconds + GRACE_S, out / "gpu_check.log")


def run_logged(command, env, timeout_s: float, log_path: Path):
    """Run a stage; its output goes to the terminal and to `log_path` line by line. Exit status or "killed"."""
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    killer = threading.Timer(timeout_s, process.kill)
    killer.start()
    try:
        with open(log_path, "a", encoding="utf-8") as log:
            for line in process.stdout:
                sys.stdout.write(line)
                sys.stdout.flush()
                log.write(line)
                log.flush()
        rc = process.wait()
    finally:
        timed_out = not killer.is_alive() and process.returncode is not None and process.returncode < 0
        killer.cancel()
    return "killed" if timed_out else rc


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.stage is not None:
        return run_stage(args, float(os.environ["POOL3D_CHECK_STAGE_S"]))
    if args.implementation:
        os.environ["POOL3D_GPU_IMPL"] = args.implementation  # the stages' processes inherit it
    out = out_dir(args)
    out.mkdir(parents=True, exist_ok=True)
    rec = Recorder(out, "main")
    budget = Budget(args.budget_s)
    wanted = [s for s in args.stages.split(",") if s]
    unknown = sorted(set(wanted) - set(STAGES))
    if unknown:
        print(f"gpu_check: unknown stage(s) {', '.join(unknown)}; stages are {', '.join(STAGES)}", file=sys.stderr)
        return 2
    rec.record("run", argv=sys.argv[1:], budget_s=args.budget_s, platform=args.platform, stages=wanted)
    status = 0
    shares = {s: STAGES[s] for s in wanted}
    for i, stage in enumerate(wanted):
        rest = sum(shares[s] for s in wanted[i:])
        seconds = max(budget.left() * shares[stage] / rest, REQUIRED_S.get(stage, 0.0))
        if seconds < 5:
            rec.record("skipped", item=f"stage {stage}", reason=f"budget: {budget.left():.0f} s left")
            continue
        _log(f"stage {stage}: {seconds:.0f} s")
        rc = _run_child(args, stage, seconds)
        if rc == "killed":
            rec.record("stage_error", item=f"stage {stage}", error=f"killed past its {seconds:.0f} s + {GRACE_S:.0f} s")
        if rc not in (0, CHECK_FAILED, "killed"):
            rec.record("stage_error", item=f"stage {stage}", error=f"exit status {rc} (its traceback is in gpu_check.log)")
        if rc != 0:
            status = 1
    text = summary.render(read_records(out))
    print(text, flush=True)
    with open(out / "gpu_check.log", "a", encoding="utf-8") as f:
        f.write(text + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
