"""The parent's side of a calibration: start the child, read its results, survive its faults.

`run(binding_spec, platform, tasks, seconds)` starts `python -m
pool3d_pass.calibration.child` in a new session with this process's module
path, `JAX_PLATFORMS` set to the device's platform,
`XLA_PYTHON_CLIENT_PREALLOCATE=false` (the program's own process may hold
most of the device's memory; the child takes what it uses) and calibration
off (nothing the child compiles is calibrated again). It reads the child's
lines until every task is answered, the child exits, or `seconds` pass:

* a task the child finished: its verdict;
* a task whose Python code raised (the binding's functions): a refusal;
* the task running when the child died of a signal (segfault, abort, bus
  error) or exited: a refusal naming the signal and the child's last error
  line; the tasks after it run in a new child while time is left;
* a task that runs past `task_seconds`, or is running when the whole time
  runs out: killed with its child (the whole process group),
  `Outcome.timed_out`: the class is left to the platform's compiler in this
  process and not remembered (slow and hung look alike); the tasks after it
  run in a new child while time is left;
* a child that cannot start (no device for it: a GPU in exclusive-process
  mode, NeuronCores another process holds): `Outcome.fatal`, nothing decided.

Never raises for anything the child does.
"""

from __future__ import annotations

import dataclasses
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time

from pool3d_pass import environment
from pool3d_pass.calibration.device import JAX_PLATFORMS

MARK = "POOL3D-CALIBRATION"  # the prefix of the child's result lines (child.py)
CRASH_SIGNALS = {signal.SIGSEGV: "segmentation fault", signal.SIGABRT: "abort", signal.SIGBUS: "bus error",
                 signal.SIGFPE: "floating-point exception", signal.SIGILL: "illegal instruction"}


TASK_SECONDS = 90.0  # one task (a class's battery, or its timing: compiles included) never needs more


@dataclasses.dataclass
class Outcome:
    """What one calibration run gave: per task id a verdict, or a refusal; what was not decided, and why."""

    verdicts: dict = dataclasses.field(default_factory=dict)  # task id -> the child's verdict
    refusals: dict = dataclasses.field(default_factory=dict)  # task id -> why (a fault, an error of the kernels)
    timed_out: dict = dataclasses.field(default_factory=dict)  # task id -> why (not remembered)
    fatal: str | None = None  # the child could not start: nothing was decided
    device: tuple[str, str] | None = None  # (model, runtime) the child found
    children: int = 0
    seconds: float = 0.0


def child_environment(platform: str) -> dict:
    env = dict(os.environ)
    env["JAX_PLATFORMS"] = JAX_PLATFORMS.get(platform, platform)
    env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    env[environment.CALIBRATION] = "off"
    paths = [p for p in sys.path if p and os.path.isdir(p)]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return env


def _reader(stream, lines: queue.Queue) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


def _last_error(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            text = file.read()[-4000:]
    except OSError:
        return ""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    wanted = [line for line in lines if "Fatal Python error" in line] or [
        line for line in lines if "Error" in line and "Warning" not in line]
    return (wanted or lines or [""])[-1][:300]


def _describe_exit(returncode: int, stderr_path: str) -> str:
    if returncode < 0:
        number = -returncode
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        what = CRASH_SIGNALS.get(number, name)
        text = f"the calibration child died of {name} ({what})"
    else:
        text = f"the calibration child exited with status {returncode}"
    last = _last_error(stderr_path)
    return text + (f": {last}" if last else "")


def _one_child(request: dict, platform: str, seconds: float, task_seconds: float, outcome: Outcome) -> list[dict]:
    """Run one child on `request`'s tasks; returns the tasks it never started (to run in a new child)."""
    tasks = {task["id"]: task for task in request["tasks"]}
    answered: set[str] = set()
    running: str | None = None
    started_at = time.monotonic()
    with tempfile.TemporaryFile("w+b") as stdin, tempfile.NamedTemporaryFile(
            "w+", prefix="pool3d_calibration_", suffix=".log", delete=False) as stderr:
        stdin.write(json.dumps(request).encode())
        stdin.seek(0)
        process = subprocess.Popen([sys.executable, "-m", "pool3d_pass.calibration.child"], stdin=stdin,
                                   stdout=subprocess.PIPE, stderr=stderr, text=True, env=child_environment(platform),
                                   start_new_session=True)
        outcome.children += 1
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=_reader, args=(process.stdout, lines), daemon=True).start()
        deadline = started_at + seconds
        task_deadline = deadline
        finished = False
        while not finished:
            try:
                line = lines.get(timeout=max(0.0, min(deadline, task_deadline) - time.monotonic()))
            except queue.Empty:
                break  # out of time
            if line is None:
                finished = True
                break
            if not line.startswith(MARK):
                continue
            kind, _, rest = line[len(MARK):].strip().partition(" ")
            task_id, _, payload = rest.partition(" ")
            if kind == "FATAL":
                try:
                    outcome.fatal = str(json.loads(rest.strip()))
                except ValueError:
                    outcome.fatal = rest.strip() or "no reason given"
            elif kind == "DEVICE":
                found = json.loads(rest.strip())
                outcome.device = tuple(found) if found else None
            elif kind == "START":
                running = task_id
                task_deadline = time.monotonic() + task_seconds
            elif kind == "DONE":
                outcome.verdicts[task_id] = json.loads(payload)
                answered.add(task_id)
                running, task_deadline = None, deadline
            elif kind in ("FAILED", "SKIPPED"):
                message = json.loads(payload)
                outcome.refusals[task_id] = (f"the binding's functions raised in the calibration child: {message}"
                                             if kind == "FAILED" else message)
                answered.add(task_id)
                running, task_deadline = None, deadline
        if not finished:
            _kill(process)
            out_of_time = time.monotonic() >= deadline
            if running is not None:
                limit = min(seconds, task_seconds) if out_of_time else task_seconds
                outcome.timed_out[running] = (f"did not finish within {limit:.0f} s (hung, or slower than the "
                                              "calibration's time); killed with its child")
                answered.add(running)
            process.wait()
            os.unlink(stderr.name)
            if out_of_time:
                for task_id in tasks:
                    if task_id not in answered:
                        outcome.timed_out[task_id] = "not reached within the calibration's time"
                return []
            return _after_failures([task for task_id, task in tasks.items() if task_id not in answered], outcome)
        returncode = process.wait()
        if outcome.fatal is not None:
            os.unlink(stderr.name)
            return []
        if running is not None:
            outcome.refusals[running] = _describe_exit(returncode, stderr.name)
            answered.add(running)
        elif returncode != 0 and len(answered) < len(tasks):
            outcome.fatal = _describe_exit(returncode, stderr.name)
            os.unlink(stderr.name)
            return []
        os.unlink(stderr.name)
    return _after_failures([task for task_id, task in tasks.items() if task_id not in answered], outcome)


def _after_failures(remaining: list[dict], outcome: Outcome) -> list[dict]:
    """`remaining` less the timings of classes whose battery did not pass here (refused with that reason)."""
    failed = set(outcome.refusals) | set(outcome.timed_out)
    kept = []
    for task in remaining:
        if task.get("numerics_id") in failed:
            outcome.refusals[task["id"]] = "its numerics battery failed in this run"
        else:
            kept.append(task)
    return kept


def _kill(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, AttributeError):
        process.kill()


def run(binding_spec: dict, platform: str, tasks: list[dict], seconds: float,
        task_seconds: float = TASK_SECONDS) -> Outcome:
    """Run `tasks` (dicts with "id", "kind", "subject") for the binding on `platform`'s device within `seconds`,
    none of them longer than `task_seconds`."""
    outcome = Outcome()
    start = time.monotonic()
    remaining = list(tasks)
    while remaining:
        left = seconds - (time.monotonic() - start)
        if left <= 0:
            for task in remaining:
                outcome.timed_out[task["id"]] = "not reached within the calibration's time"
            break
        request = {"binding": binding_spec, "device_platform": platform, "tasks": remaining}
        remaining = _one_child(request, platform, left, task_seconds, outcome)
        if outcome.fatal is not None:
            break
    outcome.seconds = time.monotonic() - start
    return outcome
