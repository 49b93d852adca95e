"""pool3d-opt over hostile inputs: the check of what it did with each, and the long run over them.

    .venv/bin/python -m checks.fuzz_cli                 # 560 inputs, seed 1, 2 at a time
    .venv/bin/python -m checks.fuzz_cli --seed 7 --count 1000 --jobs 4 --keep /tmp/fuzz

The long run: >= 500 inputs, each run as `python -c main() INPUT -o OUTPUT` in its
own subprocess with OUTPUT already present and a 60 s timeout. Counted per input:
crash (killed by a signal), timeout, traceback, partial output (OUTPUT changed on
error, or a temporary file left), other broken promises (not exactly one error
line, an exit status other than 0/1, output that does not parse again). Exit
status 1 if any count is non-zero. Not part of the test suite (minutes); the
seeded subset is tests/checks/test_fuzz_cli.py, which runs and judges a short
draw with the functions here.

The promise checked (README, "Using it"): every input gives either exit 0 with
output that parses again, or exit 1 with exactly one line
`FILE:LINE:COL: error: ...` (or `FILE: error: ...` / `pool3d-opt: error: ...`
where no place is known); never a traceback or a signal; never a partial
output file (with `-o` into a folder, a file already there is left unchanged
on error and no temporary file is left behind).

The inputs (`Case`: seeds, syntactic and semantic mutations, crash-class
inputs) are cases/hostile_mlir.py's.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import contextlib
import dataclasses
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cases.hostile_mlir import Case, draw_cases, gradient_seeds

SENTINEL = "the user's file, which must survive an error\n"
ERROR_LINE = re.compile(r"^(?P<where>.+?)(?::(?P<line>\d+):(?P<col>\d+))?: error: \S.*$")


@dataclasses.dataclass
class Outcome:
    status: int | None  # None: timed out; negative: killed by that signal
    stdout: str
    stderr: str
    output: str | None  # the -o file afterwards (None: absent)
    leftovers: list[str]  # other files in the output folder


# --------------------------------------------------------------------------
# Running and checking
# --------------------------------------------------------------------------


def _prepare(case: Case, folder: Path) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    source, output = folder / "input.mlir", folder / "output.mlir"
    source.write_bytes(case.text.encode("utf-8", errors="surrogateescape"))
    output.write_text(SENTINEL)
    return source, output


def _finish(folder: Path, output: Path, status, stdout, stderr) -> Outcome:
    text = output.read_text(errors="replace") if output.exists() else None
    leftovers = sorted(p.name for p in folder.iterdir() if p.name not in ("input.mlir", "output.mlir"))
    return Outcome(status, stdout, stderr, text, leftovers)


def run_in_process(case: Case, folder: Path) -> Outcome:
    """pool3d-opt's `main(argv)` in this process (stdout/stderr captured, SystemExit caught)."""
    from pool3d_pass.cli.pool3d_opt import main

    source, output = _prepare(case, folder)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main([str(source), "-o", str(output), *case.args])
        except SystemExit as exit_:
            status = exit_.code if isinstance(exit_.code, int) else 1
    return _finish(folder, output, status, out.getvalue(), err.getvalue())


CHILD = "import sys; from pool3d_pass.cli.pool3d_opt import main; sys.exit(main())"


def run_subprocess(case: Case, folder: Path, timeout: float = 60.0) -> Outcome:
    source, output = _prepare(case, folder)
    try:
        done = subprocess.run([sys.executable, "-c", CHILD, str(source), "-o", str(output), *case.args],
                              capture_output=True, timeout=timeout, cwd=folder,
                              env={**os.environ, "PYTHONFAULTHANDLER": ""})
        status, stdout, stderr = done.returncode, done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")
    except subprocess.TimeoutExpired as expired:
        status = None
        stdout = (expired.stdout or b"").decode(errors="replace")
        stderr = (expired.stderr or b"").decode(errors="replace")
    return _finish(folder, output, status, stdout, stderr)


def problems(case: Case, outcome: Outcome, source_name: str) -> list[str]:
    """What broke the promise (empty: kept). `source_name`: the input path as passed to pool3d-opt."""
    found = []
    if outcome.status is None:
        return ["timeout"]
    if outcome.status < 0:
        return [f"signal {-outcome.status}"]
    if "Traceback" in outcome.stderr or "Traceback" in outcome.stdout:
        found.append("traceback")
    if outcome.leftovers:
        found.append(f"left files behind: {outcome.leftovers}")
    if outcome.stdout:
        found.append(f"wrote to stdout with -o: {outcome.stdout[:80]!r}")
    lines = outcome.stderr.splitlines()
    if outcome.status == 0:
        if outcome.output is None or outcome.output == SENTINEL:
            found.append("exit 0 but no output file written")
        expected = 1 if "--stats" in case.args else 0  # the --stats line
        if len(lines) != expected or not all(line.startswith("pool3d: ") for line in lines):
            found.append(f"unexpected stderr on success: {outcome.stderr[:200]!r}")
    elif outcome.status == 1:
        if outcome.output != SENTINEL:
            found.append("partial output: the existing output file changed on error")
        split = "--split-input-file" in case.args
        errors = [line for line in lines if ERROR_LINE.match(line)]
        others = [line for line in lines if not ERROR_LINE.match(line) and not line.startswith("pool3d: ")]
        if others or not errors or (len(errors) != 1 and not split):
            found.append(f"not exactly one error line: {outcome.stderr[:300]!r}")
        for line in errors:
            match = ERROR_LINE.match(line)
            # The place is in the input, or (a located op) in the program's own source.
            if match.group("where") not in (source_name, "pool3d-opt") and match.group("line") is None:
                where = match.group("where")
                found.append(f"error names {where!r}, not the input: {line[:200]!r}")
    else:
        found.append(f"exit status {outcome.status}: {outcome.stderr[-300:]!r}")
    return found


def reparses(text: str) -> str | None:
    """None if `text` parses (under the input limits); else the error."""
    from jaxlib.mlir import ir

    from pool3d_pass import safe_parse
    from pool3d_pass.ir.context import make_context

    with make_context():
        try:
            safe_parse.parse_module(text)
        except (ir.MLIRError, safe_parse.InputLimitError) as error:
            return str(error).splitlines()[0]
    return None


def pool3d_calls(text: str | None) -> int:
    """The pool3d calls a module's text holds (neutral calls, as pool3d-opt writes them by default)."""
    return len(re.findall(r"custom_call @pool3d\.", text or ""))


def rewritten_count(stderr: str) -> int:
    m = re.search(r"pool3d: \d+ select_and_scatter found, (\d+) rewritten", stderr)
    return int(m.group(1)) if m else 0


# --- the long run -------------------------------------------------------------------------------


def classify(case: Case, outcome: Outcome, source: str) -> tuple[list[str], list[str]]:
    """(the counts an input adds to, the problems found)."""
    found = problems(case, outcome, source)
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
    if not found and outcome.status == 0 and reparses(outcome.output) is not None:
        kinds.append("other")
        found.append("output does not parse again: " + reparses(outcome.output))
    return sorted(set(kinds)), found


def main(argv=None) -> int:
    """The >= 500-input run, each input in its own subprocess; exit status 1 on any broken promise."""
    parser = argparse.ArgumentParser(prog="python -m checks.fuzz_cli", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--count", type=int, default=560, help="number of inputs (>= 500 for the issue's run)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--keep", type=Path, help="keep every input/output folder here")
    args = parser.parse_args(argv)

    crash = max(60, args.count // 8)
    semantic = (args.count - crash) // 2
    cases = draw_cases(args.seed, syntactic=args.count - crash - semantic - len(gradient_seeds()),
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
        outcome = run_subprocess(case, folder, timeout=args.timeout)
        return index, case, folder, outcome, time.monotonic() - began

    with concurrent.futures.ThreadPoolExecutor(args.jobs) as executor:
        for _index, case, folder, outcome, seconds in executor.map(one, enumerate(cases)):
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
