"""The device check of the gpu binding's CUDA kernels: numerics, determinism, wide offsets, timing.

    PYTHONPATH=. python3 scripts/cuda_check.py [--json PATH] [--budget-s 150] [--no-large]
    PYTHONPATH=. python3 scripts/cuda_check.py --dry-run       (no GPU: the script's own logic, on CPU)

Needs a machine with an NVIDIA GPU, JAX's CUDA plugin and the CUDA kernels'
library (`pool3d_pass/bindings/gpu/_cuda_kernels.so`, built by setup.py where
nvcc is found; carried with the working tree to a lent machine). In one run:

1. numerics: every call of the contract by the CUDA kernels (`cuda_calls.py`)
   on the GPU, against the CPU kernels on the same inputs run on the host
   (both layouts and a mixed pair, f32/bf16/f16, overlapping and padded
   windows, tie-heavy inputs and inputs full of NaN, +-inf and -0/+0): bit
   for bit (NaN payloads aside; the gather sums in the CPU scatter's order);
2. determinism: each gradient call three times, the same bits;
3. wide offsets: a bf16 tensor of more than 2^31 elements (int64 offsets),
   forward and fused gradient, their last windows checked against the CPU
   kernels (`--no-large` skips it; it needs ~10 GB of GPU memory);
4. timing, interleaved rounds: for each bench case (bench/cases.py FULL_CASES)
   and job, XLA:GPU (`jax.jit`) vs `pool3d_pass.jit(strategy="indices")`
   with the CUDA kernels vs the same with the Pallas kernels
   (`implementation.use(...)` switches between them), min and median ms.
   `--budget-s` stops starting new timing cases past that many seconds.

Prints a table, writes JSON (default bench/results/cuda_check.json); exit
status 1 if a numerics or determinism check failed, 2 if the CUDA kernels
cannot serve here (the reason is printed).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
os.environ.setdefault("POOL3D_GPU_IMPL", "cuda")

import numpy as np  # noqa: E402

# (NCDHW input shape, kernel, stride, padding)
GEOMETRIES = [
    ((2, 3, 9, 8, 7), (2, 2, 2), (2, 2, 2), (0, 0, 0)),
    ((2, 4, 9, 10, 11), (3, 3, 3), (2, 2, 2), (1, 1, 1)),
    ((1, 5, 8, 8, 8), (3, 3, 3), (1, 1, 1), (1, 1, 1)),
    ((2, 3, 7, 9, 6), (1, 2, 3), (1, 2, 2), (0, 1, 1)),
]
LAYOUTS = [("NCDHW", "NCDHW"), ("NDHWC", "NDHWC"), ("NDHWC", "NCDHW")]
DTYPES = ("float32", "bfloat16", "float16")


def np_dtype(name):
    import ml_dtypes

    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def to_layout(a, layout):
    return np.ascontiguousarray(a.transpose(0, 2, 3, 4, 1)) if layout == "NDHWC" else a


def make_inputs(rng, shape, out_shape, dtype, special, layout, out_layout):
    x = rng.integers(-3, 4, size=shape).astype(np.float32)
    if special:
        pick = rng.random(shape)
        x[pick < 0.04] = np.nan
        x[(pick >= 0.04) & (pick < 0.10)] = -np.inf
        x[(pick >= 0.10) & (pick < 0.13)] = np.inf
        x[(pick >= 0.13) & (pick < 0.30)] = -0.0
        x[(pick >= 0.30) & (pick < 0.45)] = 0.0
    g = rng.standard_normal(out_shape).astype(np.float32)
    return to_layout(x.astype(np_dtype(dtype)), layout), to_layout(g.astype(np_dtype(dtype)), out_layout)


def bits(a):
    a = np.asarray(a)
    return a.view({4: np.uint32, 2: np.uint16}[a.dtype.itemsize])


def same(a, b) -> bool:
    """Bit-identical, NaN payloads aside."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind == "i":
        return bool(np.array_equal(a, b))
    nan_a, nan_b = np.isnan(a.astype(np.float32)), np.isnan(b.astype(np.float32))
    return bool(np.array_equal(nan_a, nan_b) and np.array_equal(bits(a)[~nan_a], bits(b)[~nan_b]))


def calls_on(module, device, attrs, input_shape):
    """The five calls of `module` (a binding), jitted, their inputs placed on `device`."""
    import jax

    def put(*arrays):
        return [jax.device_put(a, device) for a in arrays]

    fwd = jax.jit(lambda x: module.max_pooling_3d_forward(x, **attrs))
    fwd_out = jax.jit(lambda x: module.max_pooling_3d_forward_output(x, **attrs))
    from_idx = jax.jit(lambda g, i: module.max_pooling_3d_backward_from_indices(g, i, input_shape=input_shape, **attrs))
    recompute = jax.jit(lambda g, x, y: module.max_pooling_3d_backward(g, x, y, **attrs))
    from_in = jax.jit(lambda g, x: module.max_pooling_3d_backward_from_input(g, x, **attrs))
    return {
        "forward": lambda x: [np.asarray(r) for r in fwd(*put(x))],
        "forward_output": lambda x: np.asarray(fwd_out(*put(x))),
        "backward_from_indices": lambda g, i: np.asarray(from_idx(*put(g, i))),
        "backward": lambda g, x, y: np.asarray(recompute(*put(g, x, y))),
        "backward_from_input": lambda g, x: np.asarray(from_in(*put(g, x))),
    }


def check_numerics(tested_module, tested_device, cpu_module, cpu_device, failures: list) -> list[dict]:
    from pool3d_pass.contract import pooled_extent

    rows = []
    rng = np.random.default_rng(0)
    for shape, k, s, p in GEOMETRIES:
        out_ncdhw = shape[:2] + tuple(pooled_extent(n, kk, ss, pp, pp) for n, kk, ss, pp in zip(shape[2:], k, s, p))
        for layout, out_layout in LAYOUTS:
            for dtype in DTYPES:
                for special in (False, True):
                    x, g = make_inputs(rng, shape, out_ncdhw, dtype, special, layout, out_layout)
                    attrs = dict(kernel_size=k, stride=s, padding=p, data_format=layout, output_format=out_layout)
                    ours = calls_on(tested_module, tested_device, attrs, x.shape)
                    ref = calls_on(cpu_module, cpu_device, attrs, x.shape)
                    y_ref, i_ref = ref["forward"](x)
                    results = {}
                    y, i = ours["forward"](x)
                    results["forward"] = same(y, y_ref) and same(i, i_ref)
                    results["forward_output"] = same(ours["forward_output"](x), y_ref)
                    dx = ours["backward_from_indices"](g, i_ref)
                    results["backward_from_indices"] = same(dx, ref["backward_from_indices"](g, i_ref))
                    results["backward"] = same(ours["backward"](g, x, y_ref), ref["backward"](g, x, y_ref))
                    dx_in = ours["backward_from_input"](g, x)
                    results["backward_from_input"] = same(dx_in, ref["backward_from_input"](g, x))
                    results["deterministic"] = all(
                        same(ours["backward_from_indices"](g, i_ref), dx) and same(ours["backward_from_input"](g, x), dx_in)
                        for _ in range(2))
                    row = {"shape": list(x.shape), "k": k, "s": s, "p": p, "layouts": f"{layout}/{out_layout}",
                           "dtype": dtype, "special": special, **results}
                    rows.append(row)
                    bad = [name for name, ok in results.items() if not ok]
                    if bad:
                        failures.append(f"numerics {row['layouts']} {dtype} {shape} k{k} s{s} p{p} special={special}: {bad}")
    return rows


def check_wide(tested_module, device, cpu_module, cpu_device, failures: list, small: bool) -> dict:
    """A bf16 input of more than 2^31 elements: the last windows of forward and fused gradient vs the CPU kernels."""
    import jax
    import jax.numpy as jnp

    n = 10 if small else 1292  # 1292^3 = 2.157e9 elements > 2^31
    attrs = dict(kernel_size=(2, 2, 2), stride=(2, 2, 2), padding=(0, 0, 0), data_format="NCDHW")
    start = time.perf_counter()
    key = jax.random.PRNGKey(0)
    with jax.default_device(device):
        x = jax.random.normal(key, (1, 1, n, n, n), jnp.bfloat16)
        g = jax.random.normal(key, (1, 1, n // 2, n // 2, n // 2), jnp.bfloat16)
        y, idx = jax.jit(lambda x: tested_module.max_pooling_3d_forward(x, **attrs))(x)
        dx = jax.jit(lambda g, x: tested_module.max_pooling_3d_backward_from_input(g, x, **attrs))(g, x)
        tail = (slice(None), slice(None), slice(-4, None), slice(-4, None), slice(-4, None))
        out_tail = (slice(None), slice(None), slice(-2, None), slice(-2, None), slice(-2, None))
        x_t, g_t = np.asarray(x[tail]), np.asarray(g[out_tail])
        y_t, idx_t, dx_t = np.asarray(y[out_tail]), np.asarray(idx[out_tail]), np.asarray(dx[tail])
        del x, g, y, idx, dx
    ref = calls_on(cpu_module, cpu_device, attrs, x_t.shape)
    y_ref, i_ref = ref["forward"](x_t)
    ok = same(y_t, y_ref) and same(idx_t, i_ref) and same(dx_t, ref["backward_from_input"](g_t, x_t))
    if not ok:
        failures.append(f"wide offsets ({n}^3 bf16): the last windows differ from the CPU kernels")
    return {"elements": n ** 3, "over_2_31": n ** 3 >= 2 ** 31, "ok": ok, "seconds": round(time.perf_counter() - start, 1)}


def time_variants(variants: dict, args_, rounds: int) -> dict:
    import jax

    times = {name: [] for name in variants}
    for fn in variants.values():
        jax.block_until_ready(fn(*args_))  # warm
    for _ in range(rounds):
        for name, fn in variants.items():
            t0 = time.perf_counter()
            jax.block_until_ready(fn(*args_))
            times[name].append((time.perf_counter() - t0) * 1e3)
    return {name: {"min_ms": round(min(t), 4), "median_ms": round(statistics.median(t), 4)} for name, t in times.items()}


def timing(device, budget_s: float, started: float, dry_run: bool) -> tuple[list, list]:
    import cases
    import jax

    import pool3d_pass
    from pool3d_pass.bindings.gpu import implementation

    rows, skipped = [], []
    for case in cases.QUICK_CASES if dry_run else cases.FULL_CASES:
        if time.perf_counter() - started > budget_s:
            skipped.append(case.name)
            continue
        x, g = (jax.device_put(a, device) for a in cases.inputs(case))
        for job in cases.JOBS:
            fn = cases.jax_job(job, cases.pool_fn(case))
            variants = {"xla": jax.jit(fn).lower(x, g).compile()}
            kinds = {}
            for impl in (("pallas",) if dry_run else ("cuda", "pallas")):
                implementation.use(impl)
                jax.clear_caches()
                compiled = pool3d_pass.jit(fn, strategy="indices").lower(x, g).compile()
                text = compiled.as_text()
                kinds[impl] = ("triton" if "__gpu$xla.gpu.triton" in text else
                               "contract calls" if "pool3d.max_pooling_3d" in text else "not rewritten")
                variants[impl] = compiled
            implementation.use("cuda")
            result = time_variants(variants, (x, g), rounds=2 if dry_run else 20)
            xla_ms = result["xla"]["min_ms"]
            row = {"case": case.name, "job": job, "compiled_as": kinds, **result}
            for impl in kinds:
                row[f"xla_over_{impl}"] = round(xla_ms / max(result[impl]["min_ms"], 1e-9), 3)
            rows.append(row)
            ratios = "  ".join(f"{impl} {result[impl]['min_ms']:.3f} ms ({row[f'xla_over_{impl}']:.2f}x)" for impl in kinds)
            print(f"{case.name:44s} {job:18s} xla {xla_ms:.3f} ms  {ratios}", flush=True)
    return rows, skipped


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, default=ROOT / "bench" / "results" / "cuda_check.json")
    parser.add_argument("--budget-s", type=float, default=150.0)
    parser.add_argument("--no-large", action="store_true", help="skip the > 2^31-element tensor")
    parser.add_argument("--dry-run", action="store_true",
                        help="no GPU: the CPU kernels stand in for the CUDA ones (checks the script, not the kernels)")
    args = parser.parse_args(argv)
    started = time.perf_counter()

    import jax

    from pool3d_pass.bindings import cpu
    from pool3d_pass.bindings.gpu import implementation

    cpu_device = jax.devices("cpu")[0]
    if args.dry_run:
        tested, device = cpu, cpu_device
        what = "dry run: CPU kernels on CPU (the CUDA kernels are not run)"
    else:
        if implementation.implementation() != "cuda":
            print(f"cuda_check: the CUDA kernels cannot serve here: {implementation.describe()}", file=sys.stderr)
            return 2
        try:
            device = jax.devices("cuda")[0]
        except RuntimeError as error:
            print(f"cuda_check: no CUDA device: {error}", file=sys.stderr)
            return 2
        from pool3d_pass.bindings.gpu import cuda_calls as tested
        what = f"{implementation.describe()} on {device.device_kind}"
    print(f"cuda_check: jax {jax.__version__}; {what}", flush=True)

    failures: list[str] = []
    numerics = check_numerics(tested, device, cpu, cpu_device, failures)
    print(f"numerics: {sum(all(v for k, v in r.items() if isinstance(v, bool) and k != 'special') for r in numerics)}"
          f" of {len(numerics)} configurations bit-exact and deterministic", flush=True)
    wide = None if args.no_large else check_wide(tested, device, cpu, cpu_device, failures, small=args.dry_run)
    if wide:
        print(f"wide offsets: {wide}", flush=True)
    rows, skipped = timing(device, args.budget_s, started, args.dry_run)
    for line in failures:
        print("FAIL:", line)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({
        "jax": jax.__version__, "what": what, "dry_run": args.dry_run, "failures": failures,
        "numerics": numerics, "wide": wide, "timing": rows, "skipped": skipped,
        "seconds": round(time.perf_counter() - started, 1)}, indent=1))
    print(f"{'FAILED' if failures else 'ok'}: {len(failures)} failure(s); JSON: {args.json}; "
          f"{time.perf_counter() - started:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
