"""Benchmarks of pool3d_pass: the kernel, a training step, and the pass itself.

    python -m bench.run            # full run (make bench)
    python -m bench.run --quick    # make bench-quick: one speed table, four layers and a training step
    python -m bench.run --json out.json --only user,forward,pool,train,pass,flax
    python -m bench.run --wait-load 1.0     # first wait (up to 10 min) for a quieter machine
    python -m bench.run --table-from bench/results/latest.json   # reprint a stored run

Prints Markdown tables (a quick run: one speed table, a row per layer and
job and one for the training step, against XLA and PyTorch where installed,
with whether the results equal XLA's; no target verdicts) and writes every
figure, with the machine it ran on, to JSON (default
bench/results/latest.json). A quick run's sections are user (four of the
full run's shapes) and train; others asked for with --only run at smoke
sizes. Sections (one module each):

1. user_view.py      the user's view per shape: "gradient only" and "forward +
                     gradient", XLA vs pool3d_pass.jit vs PyTorch doing the same
                     job, and which calls the rewritten program runs;
2. forward.py        the forward alone: the pool3d forward call vs XLA's
                     reduce_window vs torch's max_pool (with/without indices);
3. pool_backward.py  the backward kernels alone per shape: XLA, rewritten
                     program, each kernel, torch, the memory-bandwidth floor;
4. train_step.py     a 3-D CNN training step, jax.jit vs pool3d_pass.jit (and
                     per strategy);
5. pass_speed.py     the pass's run time against canonicalize, JAX lowering
                     and XLA compile, and its growth with module size;
6. flax_c3d.py       a C3D-style Flax model (NDHWC, f32 and bf16): its Adam
                     train step and its inference step, jax.jit vs
                     pool3d_pass.jit.

Timing (timing.py): warm-up, then interleaved repeats; min and median are
kept. The machines are shared and noisy, so read the RATIOS, which compare
figures measured side by side in the same run. What each column means:
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time

DEFAULT_JSON = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "latest.json")
# Each section, in the order they run: the bench module that runs it (its key in the JSON), and whether
# its layers are timed against the machine's copy floor (measured once, for all of them).
SECTIONS = {"user": ("user_view", True), "forward": ("forward", True), "pool": ("pool_backward", True),
            "train": ("train_step", False), "pass": ("pass_speed", False), "flax": ("flax_c3d", False)}
QUICK_SECTIONS = ("user", "train")


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help=f"a speed table of {','.join(QUICK_SECTIONS)} alone, few shapes and repeats, no verdicts")
    parser.add_argument("--json", default=DEFAULT_JSON, help=f"where to write the JSON (default {DEFAULT_JSON})")
    parser.add_argument("--only", default=None,
                        help=f"comma-separated sections to run, out of {','.join(SECTIONS)} (default: all; "
                             f"with --quick {','.join(QUICK_SECTIONS)})")
    parser.add_argument("--wait-load", type=float, metavar="LOAD",
                        help="before starting, wait (at most --wait-max-s) until the 1-minute load average is below LOAD")
    parser.add_argument("--wait-max-s", type=float, default=600.0)
    parser.add_argument("--table-from", metavar="PATH", help="print the tables of a stored JSON run and exit")
    args = parser.parse_args(argv)

    from bench import tables

    if args.table_from:
        with open(args.table_from) as f:
            print(tables.render(json.load(f)))
        return 0

    default = QUICK_SECTIONS if args.quick else SECTIONS
    only = [s.strip() for s in (args.only or ",".join(default)).split(",") if s.strip()]
    unknown = set(only) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)}; choose from {tuple(SECTIONS)}")

    if args.wait_load is not None:
        deadline = time.monotonic() + args.wait_max_s
        while os.getloadavg()[0] >= args.wait_load and time.monotonic() < deadline:
            _log(f"load average {os.getloadavg()[0]:.2f} >= {args.wait_load}: waiting")
            time.sleep(15)

    started = time.perf_counter()
    from bench import machine, timing

    result: dict = {"mode": "quick" if args.quick else "full", "machine": machine.describe(), "sections": only,
                    "load_average": {"start": [round(v, 2) for v in os.getloadavg()]}}
    _log(f"pool3d_pass benchmarks ({result['mode']}) on {result['machine']['cpu_model']}, "
         f"{result['machine']['cpus_usable']} cpus")

    section_s = result["section_wall_s"] = {}
    progress = _log  # every case as it goes (stderr); the tables come at the end (stdout)
    bandwidth = None
    if any(SECTIONS[section][1] for section in only):  # the floor, measured once
        bandwidth = result["copy_bandwidth"] = timing.copy_bandwidth(repeats=3 if args.quick else 5)
    for section, (module, against_the_floor) in SECTIONS.items():  # each module imported when it runs
        if section in only:
            t0 = time.perf_counter()
            floor = (bandwidth["gb_per_s"],) if against_the_floor else ()
            result[module] = importlib.import_module(f"bench.{module}").run(args.quick, *floor, log=progress)
            section_s[section] = time.perf_counter() - t0

    result["wall_s"] = time.perf_counter() - started
    result["load_average"]["end"] = [round(v, 2) for v in os.getloadavg()]
    # A quick run's few shapes and repeats judge nothing: its JSON and its tables carry no verdicts.
    result["targets"] = [] if args.quick else tables.targets(result)
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    print(tables.render(result))
    _log(f"\nwrote {args.json} ({result['wall_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
