"""Device time of a program by kernel class, from a `jax.profiler` trace (no TensorBoard needed).

`jax.profiler.trace(dir)` writes `plugins/profile/<run>/<host>.trace.json.gz`,
a Chrome trace-event file: "M" events name processes and threads, "X"
events are timed spans (`ts`, `dur` in microseconds). On a GPU the device
is a process named "/device:GPU:<n>..."; its CUDA-stream threads ("Stream
#<id>(...)") hold one span per kernel, memcpy or memset, while other threads
of the same process ("XLA Ops", "XLA Modules", ...) are spans derived from
the same kernels and would count them twice. So only stream threads are
summed; where a device process names no stream thread, all its threads but
the derived ones are. A trace with no device process (a CPU run) gives
"no device events", not an error.

Classes, by kernel name (and the `hlo_op` argument where the trace has it),
first match wins:

  pool3d        the pass's kernels: CUDA (WindowKernel, GatherKernel,
                FusedKernel, SelectKernel, or the older pool3d_*) and Pallas
                Triton (pool3d_gpu_*)
  xla_pool      XLA's own max-pool pieces: select-and-scatter, scatter,
                reduce-window (the gradient XLA builds)
  convolution   convolutions and matrix products (cuDNN, cuBLAS, CUTLASS,
                XLA's Triton GEMMs)
  transpose_copy transposes, copies, memcpy, memset
  other         everything else (elementwise and reduction fusions, ...)
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

CLASSES = ("pool3d", "xla_pool", "convolution", "transpose_copy", "other")
RULES = (
    ("pool3d", re.compile(r"pool3d|WindowKernel|GatherKernel|FusedKernel|SelectKernel", re.I)),
    ("xla_pool", re.compile(r"select[-_.]?and[-_.]?scatter|scatter|reduce[-_.]?window", re.I)),
    ("convolution", re.compile(r"conv(?!ert)|fprop|dgrad|wgrad|implicit_gemm|xmma|cudnn|cutlass|gemm|cublas|"
                               r"sm\d+_\w*(mma|gemm)|dot", re.I)),
    ("transpose_copy", re.compile(r"transpose|copy|memcpy|memset", re.I)),
)
DERIVED_THREADS = re.compile(r"^(XLA Ops|XLA Modules|Steps|Framework|TensorFlow|Source|Launch Stats|"
                             r"XLA TraceMe|Host|python)", re.I)


def classify(name: str, hlo_op: str = "") -> str:
    text = f"{name} {hlo_op}"
    for cls, pattern in RULES:
        if pattern.search(text):
            return cls
    return "other"


def trace_files(log_dir) -> list[Path]:
    """The trace-event files a `jax.profiler.trace(log_dir)` wrote (newest run)."""
    runs = sorted(Path(log_dir).glob("plugins/profile/*"))
    if not runs:
        return []
    return sorted(p for p in runs[-1].glob("*.trace.json.gz"))


def load_events(path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        data = json.load(f)
    return data.get("traceEvents", []) if isinstance(data, dict) else list(data)


def device_split(events: list[dict]) -> dict:
    """{"device_events": n, "ms": {class: total ms}, "top": [(ms, class, name) of the 12 longest kernels]}.

    `device_events` 0 (and "note": "no device events") where the trace has no device process.
    """
    processes, threads = {}, {}
    for e in events:
        if e.get("ph") != "M":
            continue
        name = (e.get("args") or {}).get("name", "")
        if e.get("name") == "process_name":
            processes[e.get("pid")] = name
        elif e.get("name") == "thread_name":
            threads[(e.get("pid"), e.get("tid"))] = name
    devices = {pid for pid, name in processes.items() if name.startswith("/device:")}
    streams = {key for key, name in threads.items() if key[0] in devices and name.startswith("Stream")}
    with_streams = {pid for pid, _ in streams}
    totals = dict.fromkeys(CLASSES, 0.0)
    per_kernel: dict = {}
    count = 0
    for e in events:
        if e.get("ph") != "X" or e.get("pid") not in devices:
            continue
        key = (e.get("pid"), e.get("tid"))
        if e.get("pid") in with_streams:
            if key not in streams:
                continue
        elif DERIVED_THREADS.match(threads.get(key, "")):
            continue
        args = e.get("args") or {}
        cls = classify(str(e.get("name", "")), str(args.get("hlo_op", "")))
        ms = float(e.get("dur", 0.0)) / 1e3
        totals[cls] += ms
        per_kernel[(cls, e.get("name", ""))] = per_kernel.get((cls, e.get("name", "")), 0.0) + ms
        count += 1
    top = sorted(((ms, cls, name[:120]) for (cls, name), ms in per_kernel.items()), reverse=True)[:12]
    result = {"device_events": count, "ms": totals, "top": top}
    if count == 0:
        result["note"] = "no device events" + (" (host events only)" if events else " (empty trace)")
    return result


def profile(fn, args, steps: int, log_dir) -> dict:
    """Run `fn(*args)` `steps` times under `jax.profiler.trace`; the device split per step (ms)."""
    import jax

    jax.block_until_ready(fn(*args))  # compiled and warm before the trace starts
    with jax.profiler.trace(str(log_dir)):
        for _ in range(steps):
            out = fn(*args)
        jax.block_until_ready(out)
    files = trace_files(log_dir)
    events = [e for path in files for e in load_events(path)]
    split = device_split(events)
    split["per_step_ms"] = {cls: ms / steps for cls, ms in split.pop("ms").items()}
    split["steps"] = steps
    split["trace_files"] = [p.name for p in files]
    return split
