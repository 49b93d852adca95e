#!/usr/bin/env python
"""Run >= 500 hostile inputs through `pool3d-opt`, each in its own subprocess; print the counts.

    .venv/bin/python scripts/fuzz_cli.py                 # 560 inputs, seed 1, 2 at a time
    .venv/bin/python scripts/fuzz_cli.py --seed 7 --count 1000 --jobs 4 --keep /tmp/fuzz

Inputs: tests/support/cli_fuzz.py (syntactic and semantic mutations of the lit tests,
fixtures and generated gradients, plus crash-class inputs: deep nesting of
every kind at and past the limit, long literals, wide integers, alias bombs,
huge shapes). Each runs as `python -c main() INPUT -o OUTPUT` with OUTPUT
already present, with a 60 s timeout. Counted per input: crash (killed by a
signal), timeout, traceback, partial output (OUTPUT changed on error, or a
temporary file left), other broken promises (not exactly one error line, an
exit status other than 0/1, output that does not parse again). Exit status 1
if any count is non-zero. Not part of the test suite (minutes); the seeded
pytest subset is tests/cli/test_fuzz_cli.py.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))

import cli_fuzz as cf  # noqa: E402


def classify(case: cf.Case, outcome: cf.Outcome, source: str) -> list[str]:
    found = cf.problems(case, outcome, source)
    kinds = []
    for problem in found:
        if problem.startswith("signal"):
            kinds.append("crashes")
        elif problem == "timeout":
            kinds.append("timeouts")
        elif problem == "traceback":
            kinds.append("tracebacks")
        elif problem.startswith(("partial output", "left files behind")):
            kinds.append("partial files")
        else:
            kinds.append("other")
    if not found and outcome.status == 0 and cf.reparses(outcome.output) is not None:
        kinds.append("other")
        found.append("output does not parse again: " + cf.reparses(outcome.output))
    return sorted(set(kinds)), found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--count", type=int, default=560, help="number of inputs (>= 500 for the issue's run)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--keep", type=Path, help="keep every input/output folder here")
    args = parser.parse_args()

    crash = max(60, args.count // 8)
    semantic = (args.count - crash) // 2
    cases = cf.draw_cases(args.seed, syntactic=args.count - crash - semantic - len(cf.gradient_seeds()),
                          semantic=semantic, crash=crash)
    root = args.keep or Path(tempfile.mkdtemp(prefix="pool3d-fuzz-"))
    counts = collections.Counter()
    failures = []
    slowest = (0.0, "")
    start = time.monotonic()

    def one(index_case):
        index, case = index_case
        folder = root / f"{index:04d}"
        began = time.monotonic()
        outcome = cf.run_subprocess(case, folder, timeout=args.timeout)
        return index, case, folder, outcome, time.monotonic() - began

    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for index, case, folder, outcome, seconds in pool.map(one, enumerate(cases)):
            kinds, found = classify(case, outcome, str(folder / "input.mlir"))
            counts["inputs"] += 1
            counts["exit 0" if outcome.status == 0 else "exit 1" if outcome.status == 1 else "exit other"] += 1
            for kind in kinds:
                counts[kind] += 1
            if found:
                failures.append(f"{folder}: {case.name}: {'; '.join(found)}")
            slowest = max(slowest, (seconds, case.name))
            if not args.keep and not found:
                shutil.rmtree(folder, ignore_errors=True)
    print(f"{counts['inputs']} inputs in {time.monotonic() - start:.0f} s ({args.jobs} at a time), seed {args.seed}: "
          f"{counts['exit 0']} exit 0, {counts['exit 1']} exit 1, {counts['exit other']} other exit")
    for kind in ("crashes", "timeouts", "tracebacks", "partial files", "other"):
        print(f"  {kind}: {counts[kind]}")
    print(f"  slowest: {slowest[0]:.1f} s ({slowest[1]})")
    for line in failures:
        print("FAIL", line)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
