"""Stage "sanitizer": the gpu binding's calls on small shapes under compute-sanitizer memcheck and racecheck.

`sanitize_calls.py` (`python -m checks.device_check.sanitize_calls`) runs every call kind of the gpu
binding on a handful of small shapes (non-overlapping, C3D's (1,2,2),
k3 s2 p1, a generic window; both layouts; f32 and bf16; an odd channel
count so vector and scalar paths both run) and prints "calls ok: N" at its
end. This stage runs it under `compute-sanitizer --tool memcheck` and then
`--tool racecheck`, each with half of the stage's budget, and records per
tool: "pass", "fail" (errors reported, with the report's error lines),
"error" (the script did not finish: its output's tail), "timeout" or
"absent" (no compute-sanitizer on the machine).

Choices that keep the report about these kernels:
- `XLA_PYTHON_CLIENT_ALLOCATOR=platform`, `XLA_PYTHON_CLIENT_PREALLOCATE=false`:
  every buffer is its own cudaMalloc. With JAX's default pool allocator an
  out-of-bounds access usually lands inside the pool, which memcheck cannot
  tell from a legal one.
- the script's programs hold only the kernel calls (inputs are placed with
  `device_put`, which launches no kernel), so XLA's own kernels add no noise;
- `--target-processes application-only`: the Python process alone (XLA's
  compiler subprocesses run no CUDA kernels);
- `--error-exitcode`: a reported error is a non-zero exit even if the
  script itself succeeded; leak checking stays off (JAX frees at exit in
  its own time).

In the dry run (no GPU) the script runs without the sanitizer, in interpret
mode on the CPU, on its first shape only (`--quick`), so the script itself is checked; the tools are recorded as
"absent" or "not run (dry run)".
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import signal
import subprocess
import sys

TOOLS = ("memcheck", "racecheck")
ERROR_EXIT = 86
ENV = {"XLA_PYTHON_CLIENT_ALLOCATOR": "platform", "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
OK_LINE = re.compile(r"^calls ok: (\d+)$", re.M)


def find_sanitizer() -> str | None:
    """compute-sanitizer on PATH, else under a CUDA installation's bin/ (None: absent)."""
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    roots = [os.environ.get("CUDA_HOME", ""), os.environ.get("CUDA_PATH", ""), "/usr/local/cuda"]
    candidates = [os.path.join(r, "bin", "compute-sanitizer") for r in roots if r]
    candidates += sorted(glob.glob("/usr/local/cuda-*/bin/compute-sanitizer"))
    candidates += sorted(glob.glob("/opt/nvidia/*/compute-sanitizer/compute-sanitizer"))
    return next((c for c in candidates if os.path.isfile(c) and os.access(c, os.X_OK)), None)


def command(sanitizer: str | None, tool: str | None) -> list[str]:
    script = [sys.executable, "-m", "checks.device_check.sanitize_calls"]  # the stage's PYTHONPATH holds the root
    if sanitizer is None or tool is None:
        return script + ["--quick"]
    return [sanitizer, "--tool", tool, "--error-exitcode", str(ERROR_EXIT), "--print-limit", "30",
            "--target-processes", "application-only", *script]


def _run(argv, env, seconds: float):
    """(exit status or "timeout", stdout + stderr); on timeout the whole process group is killed, so the
    Python process under the sanitizer does not outlive it holding the GPU."""
    process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               start_new_session=True)
    try:
        output, _ = process.communicate(timeout=seconds)
        return process.returncode, output
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        return "timeout", output or ""


def verdict(returncode, output: str, sanitized: bool) -> dict:
    """{"status", "calls", "errors", "report"} of one run from its exit status and output."""
    calls = OK_LINE.search(output)
    summary = re.search(r"ERROR SUMMARY: (\d+) error", output) or re.search(r"\((\d+) errors?, \d+ warnings?\)", output)
    errors = int(summary.group(1)) if summary else None
    error_lines = [line for line in output.splitlines() if line.startswith("=========") and
                   re.search(r"Invalid|error|hazard|Race|out of bounds|misaligned", line, re.I)][:12]
    if returncode == "timeout":
        status = "fail" if sanitized and error_lines else "timeout"  # what it reported before the kill counts
    elif sanitized and (returncode == ERROR_EXIT or (errors or 0) > 0):
        status = "fail"
    elif returncode != 0 or calls is None:
        status = "error"
    else:
        status = "pass"
    return {"status": status, "calls": int(calls.group(1)) if calls else 0, "errors": errors,
            "report": error_lines if status == "fail" else output.strip().splitlines()[-8:] if status != "pass" else []}


def run(rec, budget, dry_run: bool, log) -> int:
    """Returns the number of failed tools (a "fail" or "error" verdict; absent and timeout are not failures)."""
    env = dict(os.environ, **ENV)
    sanitizer = None if dry_run else find_sanitizer()
    failures = 0
    plan = [(None, "plain (dry run: no GPU, interpret mode)")] if dry_run else [(t, t) for t in TOOLS]
    if dry_run or sanitizer is None:
        for tool in TOOLS:
            status = "not run (dry run)" if dry_run else "absent"
            rec.record("sanitizer", tool=tool, status=status, path=sanitizer)
            rec.table(f"| sanitizer | {tool} | {status} |")
        if not dry_run:
            return 0
    for i, (tool, label) in enumerate(plan):
        seconds = budget.left() / (len(plan) - i)
        if seconds < 10:
            rec.record("skipped", item=f"sanitizer {label}", reason=f"budget: {budget.left():.0f} s left")
            continue
        returncode, output = _run(command(sanitizer, tool), env, seconds)
        found = verdict(returncode, output, sanitized=tool is not None)
        failures += found["status"] in ("fail", "error")
        rec.record("sanitizer", tool=label, path=sanitizer, seconds_allowed=round(seconds), **found)
        rec.table(f"| sanitizer | {label} | {found['status']} | {found['calls']} calls | errors {found['errors']} |")
        log(f"sanitizer {label}: {found['status']} ({found['calls']} calls, errors {found['errors']})")
    return failures
