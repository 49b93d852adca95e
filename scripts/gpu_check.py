"""The device check of the gpu binding: numerics of the compiled kernels, then XLA:GPU vs pool3d_pass.jit vs PyTorch.

    PYTHONPATH=. python3 scripts/gpu_check.py [--json PATH] [--budget-s 270]     (make gpu-check)
    PYTHONPATH=. python3 scripts/gpu_check.py --platform cpu                      (a dry run, no GPU)

On a machine with an NVIDIA GPU and JAX's CUDA plugin (written for the lent
machine: Python 3.12, jax/jaxlib 0.11.2 + jax-cuda13-plugin, torch 2.11 CUDA;
needs nothing else: no internet, no pip), in one run:

1. numerics: every call of the gpu binding, compiled (Triton) on the GPU, on
   small tie-heavy inputs and on inputs full of NaN, +-inf and -0/+0, against
   the pure-JAX reference binding run by XLA:GPU (forward maxima and indices
   bit for bit, gradients bit for bit where windows do not overlap, else to
   the f32 summation bound); then each bench job through `pool3d_pass.jit`
   (strategies indices and recompute: the binding is opt-in) against
   `jax.jit` of the same job (XLA:GPU);
2. timing, interleaved rounds (each round runs every variant once, so noise
   hits all alike): for each bench case of bench/cases.py (3-D ones in both
   layouts and in f32 and bf16, the 2-D ones as they are) and each job
   ("forward + gradient": x, g -> (y, dx); "gradient only": x, g -> dx),
   XLA:GPU (`jax.jit`), `pool3d_pass.jit(strategy="indices")`, and PyTorch
   CUDA doing the same job (`max_pool3d_with_indices` + its backward,
   channels_last_3d tensors for NDHWC). Compiles and transfers are outside
   the timed calls; each call is waited for (block_until_ready /
   torch.cuda.synchronize).

Prints a table (min and median ms, ratios) and writes JSON. `--budget-s`
stops starting new timing cases past that many seconds (the rest are listed
as skipped), so the run stays under 5 minutes. Exit status 1 if a numerics
check failed.

`--platform cpu` is the dry run used to test this script without a GPU: the
kernels run in Pallas interpret mode (POOL3D_GPU_INTERPRET=1) on CPU, the
compile hook is pointed at the gpu binding, and the quick bench cases are
used. Its timings mean nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform as platform_module
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

JOBS = ("forward + gradient", "gradient only")
NUMERICS_STRATEGIES = ("indices", "recompute")
TIMED_STRATEGY = "indices"


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--platform", choices=("gpu", "cpu"), default="gpu",
                        help="gpu: the device check; cpu: a dry run in interpret mode (no GPU)")
    parser.add_argument("--json", type=Path, default=ROOT / "bench" / "results" / "gpu_check.json")
    parser.add_argument("--budget-s", type=float, default=270.0, help="start no timing case after this many seconds")
    parser.add_argument("--repeats", type=int, default=None, help="timed rounds per job (default: 20; dry run 2)")
    parser.add_argument("--no-torch", action="store_true", help="skip the PyTorch column")
    return parser.parse_args(argv)


ARGS = parse_args(sys.argv[1:] if __name__ == "__main__" else [])
if ARGS.platform == "cpu":
    os.environ["POOL3D_GPU_INTERPRET"] = "1"
    os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jaxlib  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import cases  # noqa: E402  (bench/cases.py)
import pool3d_pass  # noqa: E402
from pool3d_pass.bindings import reference as jax_reference  # noqa: E402
from pool3d_pass.bindings.gpu import calls  # noqa: E402

START = time.perf_counter()


def elapsed() -> float:
    return time.perf_counter() - START


def log(message: str) -> None:
    print(f"[{elapsed():6.1f}s] {message}", flush=True)


def point_the_hook_at_the_gpu_binding() -> None:
    """Dry run: compiles for "cpu" go through the gpu binding (its interpret-mode kernels run on CPU)."""
    from pool3d_pass.integration import module_rewrite

    original = module_rewrite.rewrite_for_platform

    def rewrite_for_platform(module, platform, **kwargs):
        return original(module, "gpu" if platform == "cpu" else platform, **kwargs)

    module_rewrite.rewrite_for_platform = rewrite_for_platform


# --- 1. numerics -----------------------------------------------------------------


def _bits_equal(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if np.issubdtype(a.dtype, np.integer):
        return bool(np.array_equal(a, b))
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    nan = np.isnan(a64)
    if not np.array_equal(nan, np.isnan(b64)):
        return False
    view = np.dtype(f"u{a.dtype.itemsize}")
    return bool(np.array_equal(np.where(nan, 0, a).astype(a.dtype).view(view), np.where(nan, 0, b).astype(b.dtype).view(view)))


def _max_diff(a, b) -> float:
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    finite = np.isfinite(a64) & np.isfinite(b64)
    return float(np.max(np.abs(a64[finite] - b64[finite]), initial=0.0))


NUMERIC_CONFIGS = [  # (shape NCDHW, kernel, stride, padding)
    ((2, 3, 9, 8, 7), (2, 2, 2), (2, 2, 2), (0, 0, 0)),
    ((2, 3, 9, 8, 7), (3, 3, 3), (2, 2, 2), (1, 1, 1)),
    ((1, 4, 6, 7, 5), (3, 3, 3), (1, 1, 1), (1, 1, 1)),
    ((2, 2, 5, 6, 7), (3, 2, 1), (1, 2, 3), (1, 0, 0)),
]


def _inputs(shape, kernel, stride, padding, layout, dtype, kind, seed):
    rng = np.random.default_rng(seed)
    out = tuple((n + 2 * p - k) // s + 1 for n, k, s, p in zip(shape[2:], kernel, stride, padding))
    if kind == "ties":
        x = rng.integers(-2, 3, shape).astype(np.float64)
    else:  # specials: NaN, +-inf, signed zeros, and a plane of -inf only
        x = rng.choice(np.array([0.0, -0.0, 1.0, -1.0, -np.inf, np.inf, np.nan]), size=shape,
                       p=[0.25, 0.25, 0.15, 0.1, 0.15, 0.05, 0.05])
        x[0, 0] = -np.inf
    g = rng.integers(-4, 5, (*shape[:2], *out)) / 4
    if layout == "NDHWC":
        x, g = np.moveaxis(x, 1, -1), np.moveaxis(g, 1, -1)
    return x.astype(dtype), g.astype(dtype)


# (dtype, inputs) per configuration and layout: ties and specials in f32, specials in bf16, ties in f16.
NUMERIC_VARIANTS = (("float32", "ties"), ("float32", "specials"), ("bfloat16", "specials"), ("float16", "ties"))


def check_calls(budget_s: float) -> tuple[list[dict], list[str]]:
    """Every call of the gpu binding vs the reference binding, both run by XLA on this device."""
    rows, skipped = [], []
    for shape, kernel, stride, padding in NUMERIC_CONFIGS:
        overlap = any(s < k for k, s in zip(kernel, stride))
        for layout in ("NCDHW", "NDHWC"):
            for dtype_name, kind in NUMERIC_VARIANTS:
                attrs = dict(kernel_size=kernel, stride=stride, padding=padding, data_format=layout)
                if elapsed() > budget_s:
                    skipped.append(f"{shape} {attrs} {dtype_name} {kind}")
                    continue
                dtype = np.dtype(np.float16) if dtype_name == "float16" else cases.np_dtype(dtype_name)
                x, g = _inputs(shape, kernel, stride, padding, layout, dtype, kind, seed=len(rows))
                rows.append(_check_one(x, g, attrs, overlap, kind, dtype_name))
    return rows, skipped


def check_calls_first() -> list[dict]:
    shape, kernel, stride, padding = NUMERIC_CONFIGS[1]
    rows = []
    for layout, (dtype_name, kind) in (("NCDHW", NUMERIC_VARIANTS[1]), ("NDHWC", NUMERIC_VARIANTS[2])):
        dtype = cases.np_dtype(dtype_name)
        x, g = _inputs(shape, kernel, stride, padding, layout, dtype, kind, seed=len(rows))
        attrs = dict(kernel_size=kernel, stride=stride, padding=padding, data_format=layout)
        rows.append(_check_one(x, g, attrs, True, kind, dtype_name))
    return rows


def _program(module, attrs, x_shape):
    def run(x, g):
        y, index = module.max_pooling_3d_forward(x, **attrs)
        out = {"y": y, "index": index,
               "from_indices": module.max_pooling_3d_backward_from_indices(g, index, input_shape=x_shape, **attrs),
               "backward": module.max_pooling_3d_backward(g, x, y, **attrs),
               "from_input": module.max_pooling_3d_backward_from_input(g, x, **attrs)}
        if hasattr(module, "max_pooling_3d_forward_output"):
            out["y_only"] = module.max_pooling_3d_forward_output(x, **attrs)
        return out
    return jax.jit(run)


def _check_one(x, g, attrs, overlap, kind, dtype_name) -> dict:
    got = {k: np.asarray(v) for k, v in _program(calls, attrs, x.shape)(x, g).items()}
    ref = {k: np.asarray(v) for k, v in _program(jax_reference, attrs, x.shape)(x, g).items()}
    problems = []
    if not _bits_equal(got["y"], ref["y"]) or not _bits_equal(got["y_only"], ref["y"]):
        problems.append("forward maxima differ from XLA's reduce_window")
    if not _bits_equal(got["index"], ref["index"]):
        problems.append("indices differ")
    for name in ("backward", "from_input"):
        if not _bits_equal(got[name], got["from_indices"]):
            problems.append(f"{name} differs from from_indices")
    diff = _max_diff(got["from_indices"], ref["from_indices"])
    scale = float(np.max(np.abs(np.asarray(ref["from_indices"], np.float64)), initial=1.0))
    exact = _bits_equal(got["from_indices"], ref["from_indices"])
    if not overlap and not exact:
        problems.append(f"gradient not bit-exact without overlap (max diff {diff})")
    tolerance = 1e-6 * scale if dtype_name == "float32" else float(np.finfo(np.float16).eps) * scale
    if overlap and diff > tolerance:
        problems.append(f"gradient max diff {diff} > {tolerance}")
    return {"attrs": {k: list(v) if isinstance(v, tuple) else v for k, v in attrs.items()}, "shape": list(x.shape),
            "dtype": dtype_name, "inputs": kind, "gradient_bit_exact": exact, "gradient_max_diff": diff,
            "problems": problems}


def _as_tuple(r):
    return r if isinstance(r, tuple) else (r,)


def _triton_calls(compiled) -> int:
    return compiled.as_text().count("__gpu$xla.gpu.triton") if ARGS.platform == "gpu" else -1


def _not_rewritten(compiled) -> str | None:
    """Why the compiled program is not the rewritten one (None: it is)."""
    text = compiled.as_text()
    if re.search(r"\s(scatter|select-and-scatter)\(", text):  # XLA's own max-pool gradient
        return "a scatter is left in the compiled program: not rewritten"
    if ARGS.platform == "gpu" and text.count("__gpu$xla.gpu.triton") < 2:
        return "fewer than 2 Triton calls in the compiled program: not rewritten"
    return None


def check_jobs(case_list) -> list[dict]:
    """pool3d_pass.jit of each job vs jax.jit of it (XLA's own program), on the bench cases' quick shapes."""
    rows = []
    for case in case_list:
        x_np, g_np = cases.inputs(case)
        x, g = jnp.asarray(x_np), jnp.asarray(g_np)
        overlap = any(s < k for k, s in zip(case.kernel, case.stride))
        for job in JOBS:
            fun = cases.jax_job(job, cases.pool_fn(case))
            expected = [np.asarray(a) for a in _as_tuple(jax.jit(fun)(x, g))]
            for strategy in NUMERICS_STRATEGIES:
                jitted = pool3d_pass.jit(fun, strategy=strategy)
                got = [np.asarray(a) for a in _as_tuple(jitted(x, g))]
                diffs = [_max_diff(a, b) for a, b in zip(got, expected)]
                exact = all(_bits_equal(a, b) for a, b in zip(got, expected))
                problems = []
                if not overlap and case.dtype == "float32" and not exact:
                    problems.append(f"not bit-exact vs XLA without overlap (max diffs {diffs})")
                bound = 1e-5 if case.dtype == "float32" else 2e-2
                if max(diffs) > bound * max(1.0, float(np.max(np.abs(expected[-1].astype(np.float32))))):
                    problems.append(f"max diffs {diffs} vs XLA above {bound} relative")
                compiled = jitted.lower(x, g).compile()
                calls_n = _triton_calls(compiled)
                if (reason := _not_rewritten(compiled)) is not None:
                    problems.append(reason)
                rows.append({"case": case.name, "job": job, "strategy": strategy, "bit_exact_vs_xla": exact,
                             "max_abs_diff_vs_xla": diffs, "triton_calls": calls_n, "problems": problems})
    return rows


# --- 2. timing ----------------------------------------------------------------------


def timing_cases(quick: bool) -> list:
    if quick:
        return list(cases.QUICK_CASES)
    out = []
    for case in cases.FULL_CASES:
        if case.two_d:
            out.append(case)
            continue
        spatial = case.spatial_shape()
        batch, channels = case.shape[0], case.shape[-1] if case.channels_last else case.shape[1]
        for layout in ("NCDHW", "NDHWC"):
            for dtype in ("float32", "bfloat16"):
                shape = (batch, *spatial, channels) if layout == "NDHWC" else (batch, channels, *spatial)
                variant = dataclasses.replace(case, shape=shape, layout=layout, dtype=dtype)
                if variant not in out:
                    out.append(variant)
    return out


def _blocking_jax(fn, *args):
    def run():
        return jax.block_until_ready(fn(*args))
    return run


def measure(variants: dict, repeats: int, warmup: int = 3) -> dict:
    for fn in variants.values():
        for _ in range(warmup):
            fn()
    times = {name: [] for name in variants}
    names = list(variants)
    for r in range(repeats):
        for name in names[r % len(names):] + names[:r % len(names)]:
            start = time.perf_counter()
            variants[name]()
            times[name].append((time.perf_counter() - start) * 1e3)
    return {name: {"min_ms": min(t), "median_ms": statistics.median(t)} for name, t in times.items()}


def _torch():
    if ARGS.no_torch:
        return None, "--no-torch"
    try:
        import torch
    except ImportError as error:
        return None, f"torch not importable: {error}"
    if ARGS.platform == "gpu" and not torch.cuda.is_available():
        return None, "torch has no CUDA device"
    return torch, None


def time_case(case, torch, repeats: int) -> dict:
    x_np, g_np = cases.inputs(case)
    x, g = jax.block_until_ready((jnp.asarray(x_np), jnp.asarray(g_np)))
    rows = []
    for job in JOBS:
        fun = cases.jax_job(job, cases.pool_fn(case))
        xla = jax.jit(fun).lower(x, g).compile()
        pool3d = pool3d_pass.jit(fun, strategy=TIMED_STRATEGY).lower(x, g).compile()
        variants = {"xla": _blocking_jax(xla, x, g), "pool3d": _blocking_jax(pool3d, x, g)}
        if torch is not None:
            tp = cases.TorchPool(case, torch)
            device = "cuda" if ARGS.platform == "gpu" else "cpu"
            tx, tg = tp.tensor(x_np).to(device), tp.tensor(g_np).to(device)

            def torch_run(tp=tp, tx=tx, tg=tg, job=job):
                y, index = tp.pool_with_indices(tx)
                dx = tp.grad_from_indices(tg, tx, index)
                if device == "cuda":
                    torch.cuda.synchronize()
                return (y, dx) if job != "gradient only" else dx
            variants["torch"] = torch_run
        stats = measure(variants, repeats)
        ms = {k: v["min_ms"] for k, v in stats.items()}
        row = {"job": job, "ms": stats, "xla_vs_pool3d": ms["xla"] / ms["pool3d"],
               "triton_calls": _triton_calls(pool3d), "not_rewritten": _not_rewritten(pool3d)}
        if "torch" in ms:
            row["torch_vs_pool3d"] = ms["torch"] / ms["pool3d"]
        rows.append(row)
    return {**cases.describe(case, repeats), "jobs": rows}


def print_table(timed: list[dict]) -> None:
    xla = "XLA:GPU" if ARGS.platform == "gpu" else "XLA:CPU (dry run)"
    print(f"\n| case | job | {xla} ms | pool3d_pass.jit ms | PyTorch ms | XLA / pool3d | torch / pool3d |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for case in timed:
        for row in case["jobs"]:
            ms = row["ms"]
            torch_ms = f"{ms['torch']['min_ms']:.3f}" if "torch" in ms else "-"
            torch_ratio = f"{row['torch_vs_pool3d']:.2f}x" if "torch_vs_pool3d" in row else "-"
            print(f"| {case['case']} | {row['job']} | {ms['xla']['min_ms']:.3f} | {ms['pool3d']['min_ms']:.3f} | "
                  f"{torch_ms} | {row['xla_vs_pool3d']:.2f}x | {torch_ratio} |")
    print("(min of the interleaved rounds; ratios above 1: pool3d_pass.jit is faster)")


def describe_machine(torch) -> dict:
    device = jax.devices()[0]
    return {"platform": ARGS.platform, "device_kind": device.device_kind, "python": platform_module.python_version(),
            "jax": jax.__version__, "jaxlib": jaxlib.__version__,
            "torch": None if torch is None else torch.__version__,
            "torch_device": None if torch is None or ARGS.platform != "gpu" else torch.cuda.get_device_name(0),
            "dry_run": ARGS.platform == "cpu"}


def main() -> int:
    if ARGS.platform == "gpu":
        if jax.default_backend() != "gpu":
            print(f"gpu_check: JAX's default backend is {jax.default_backend()!r}, not 'gpu' (is the CUDA plugin "
                  "installed?); `--platform cpu` is the dry run", file=sys.stderr)
            return 2
    else:
        point_the_hook_at_the_gpu_binding()
    torch, torch_note = _torch()
    repeats = ARGS.repeats or (2 if ARGS.platform == "cpu" else 20)
    log(f"machine: {describe_machine(torch)}")

    log("numerics 1/2: every call of the gpu binding vs the reference binding")
    if ARGS.platform == "gpu":
        call_rows, calls_skipped = check_calls(ARGS.budget_s * 0.5)
    else:  # the dry run: one configuration (interpret-mode compiles are slow)
        call_rows, calls_skipped = check_calls_first(), ["dry run: one configuration, two layouts"]
    log("numerics 2/2: pool3d_pass.jit vs jax.jit, each job and strategy")
    job_rows = check_jobs(cases.QUICK_CASES if ARGS.platform == "gpu" else cases.QUICK_CASES[:2])
    failures = [r for r in call_rows + job_rows if r["problems"]]
    for r in failures:
        log(f"  FAIL {r}")
    log(f"numerics: {len(call_rows) + len(job_rows) - len(failures)} passed, {len(failures)} failed")

    timed, skipped = [], []
    for case in timing_cases(quick=ARGS.platform == "cpu"):
        if elapsed() > ARGS.budget_s:
            skipped.append(case.name)
            continue
        log(f"timing {case.name}")
        timed.append(time_case(case, torch, repeats))
    print_table(timed)
    if skipped:
        print(f"skipped (time budget {ARGS.budget_s:.0f} s): {', '.join(skipped)}")
    result = {"machine": describe_machine(torch), "torch_note": torch_note, "elapsed_s": elapsed(),
              "numerics": {"calls": call_rows, "jobs": job_rows, "failed": len(failures),
                           "calls_skipped": calls_skipped},
              "timing": timed, "skipped": skipped, "timed_strategy": TIMED_STRATEGY}
    ARGS.json.parent.mkdir(parents=True, exist_ok=True)
    ARGS.json.write_text(json.dumps(result, indent=1, default=str))
    log(f"JSON: {ARGS.json}; {len(call_rows) + len(job_rows) - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
