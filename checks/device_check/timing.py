"""Stage "timing": XLA:GPU, pool3d_pass.jit (indices, recompute) and PyTorch CUDA doing the same job.

Timed on the device, not the host: each variant is called `n` times back to
back on rotated input sets (enough sets that they do not fit in L2 together)
and waited for once at the end, so the figure is device time per call as long
as dispatch keeps ahead of the GPU (the shapes make every call tens of
microseconds or more); PyTorch is timed with CUDA events. Rounds interleave
the variants, so drift hits all alike. Beside each row: the copy floor, the
fewest bytes the job must move over the device-to-device copy bandwidth
measured at the start of the stage.

Configuration classes (what `auto` keys on): layout x element type x
overlapping windows or not x size (input below or above 256 MiB). After the
class rows, C3D's own pools: the shapes of every max pool of the Flax C3D
model the model stage runs (its (1,2,2) first pool, 2x2x2 after), read from
the model's own trace, in bf16 and f32; they are marked `c3d` and stay out of
the measured table (speed_table.py), whose classes are the class
rows'.
"""

from __future__ import annotations

import dataclasses
import math
import time

import numpy as np

from cases import pooling
from checks.device_check.jobs import job_function, kernel_calls, not_rewritten
from pool3d_pass.calibration import timing as calibration_timing

JOBS = ("gradient only", "inference", "forward + gradient", "forward alone")
# pool3d_pass.jit's strategies timed per job: recompute only where it differs most (no forward to reuse).
STRATEGIES = {"gradient only": ("indices", "recompute"), "forward + gradient": ("indices",), "inference": ("indices",)}
LARGE_BYTES = 256 * 2**20  # the size classes' border (the H200's L2 is 50-60 MB)
ROTATE_BYTES = 256 * 2**20  # input sets rotated per variant: together at least this many bytes


@dataclasses.dataclass(frozen=True)
class Timed:
    case: pooling.Case
    c3d: str | None = None  # which C3D pool (e.g. "pool1"); None: a class row

    @property
    def overlap(self) -> bool:
        return any(s < k for k, s in zip(self.case.kernel, self.case.stride))

    @property
    def itemsize(self) -> int:
        return 2 if self.case.dtype == "bfloat16" else 4

    @property
    def input_bytes(self) -> int:
        return math.prod(self.case.shape) * self.itemsize

    @property
    def size_class(self) -> str:
        return "large" if self.input_bytes >= LARGE_BYTES else "small"

    def floor_bytes(self, job: str) -> int:
        """Each input read once, each result written once (indices as int16)."""
        n, m, s = math.prod(self.case.shape), math.prod(self.case.out_shape()), self.itemsize
        return {"gradient only": (2 * n + m) * s, "forward + gradient": (2 * n + 2 * m) * s,
                "inference": (n + m) * s, "forward alone": (n + m) * s + 2 * m}[job]


def device_cases(dry_run: bool) -> list[Timed]:
    """Large (>= 1 GiB of f32 input) then small (32 MiB) shapes, every class, C3D-like pools."""
    out = []
    sizes = ((64, 128), (2, 4)) if not dry_run else ((1, 1),)
    spatial = (16, 64, 64) if not dry_run else (4, 8, 8)
    channels = 64 if not dry_run else 4
    for batch_f32, batch_bf16 in sizes:
        for layout in ("NDHWC", "NCDHW"):
            for dtype, batch in (("bfloat16", batch_bf16), ("float32", batch_f32)):
                for kernel, stride, padding in (((2, 2, 2), (2, 2, 2), (0, 0, 0)), ((3, 3, 3), (2, 2, 2), (1, 1, 1))):
                    shape = (batch, *spatial, channels) if layout == "NDHWC" else (batch, channels, *spatial)
                    out.append(Timed(pooling.Case(shape, kernel, stride, padding, layout=layout, dtype=dtype)))
    return out


def model_pools(net, batch_shape) -> list[tuple]:
    """(input shape, window, strides, padding pairs, dtype name) of every max pool in `net.apply`, in order.

    Read from the model's jaxpr (`reduce_window_max`), so the shapes are the model's own, not restated.
    """
    import jax
    import jax.numpy as jnp

    x = jax.ShapeDtypeStruct(batch_shape, jnp.float32)
    params = jax.eval_shape(net.init, jax.random.PRNGKey(0), x)
    found = []

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            if eqn.primitive.name == "reduce_window_max":
                aval = eqn.invars[0].aval
                found.append((tuple(aval.shape), tuple(eqn.params["window_dimensions"]),
                              tuple(eqn.params["window_strides"]), tuple(eqn.params["padding"]), aval.dtype.name))
            for value in eqn.params.values():
                for sub in value if isinstance(value, (list, tuple)) else (value,):
                    if hasattr(sub, "jaxpr") and hasattr(sub.jaxpr, "eqns"):
                        walk(sub.jaxpr)
                    elif hasattr(sub, "eqns"):
                        walk(sub)

    walk(jax.make_jaxpr(net.apply)(params, x).jaxpr)
    return found


def c3d_cases(dry_run: bool) -> list[Timed]:
    """C3D's pools (NDHWC) at the model stage's batch and channels, bf16 and f32 activations."""
    from cases import c3d

    cfg = c3d.DRY_RUN if dry_run else c3d.DEVICE  # the model stage's sizes (model.py)
    out = []
    for dtype_name in ("bf16", "f32"):
        net = c3d.model(cfg["channels"], c3d.PRECISIONS[dtype_name])
        for level, (shape, window, strides, padding, dtype) in enumerate(model_pools(net, cfg["batch"])):
            if any(lo != hi for lo, hi in padding) or window[0] != 1 or window[-1] != 1:
                raise ValueError(f"C3D pool {level + 1}: not an NDHWC pool over D, H, W ({window}, {padding})")
            case = pooling.Case(shape, tuple(window[1:4]), tuple(strides[1:4]), tuple(lo for lo, _ in padding[1:4]),
                              layout="NDHWC", dtype=dtype)
            out.append(Timed(case, c3d=f"pool{level + 1}"))
    return out


def copy_bandwidth(torch, dry_run: bool) -> dict:
    """Device-to-device copy: bytes read + written per second, best of 10 (CUDA events)."""
    if torch is None or dry_run or not torch.cuda.is_available():
        return {"bytes_per_s": None, "note": "no CUDA torch" if not dry_run else "dry run"}
    n = 2**30
    src = torch.empty(n, dtype=torch.uint8, device="cuda").random_(0, 255)
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    best = math.inf
    for _ in range(10):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / 1e3)
    del src, dst
    torch.cuda.empty_cache()
    return {"bytes_per_s": 2 * n / best, "copy_bytes": 2 * n}


def _jax_sets(t: Timed, count: int, key: int):
    import jax
    import jax.numpy as jnp

    dtype = jnp.bfloat16 if t.case.dtype == "bfloat16" else jnp.float32
    sets = []
    for i in range(count):
        kx, kg = jax.random.split(jax.random.PRNGKey(key + i))
        sets.append((jax.random.normal(kx, t.case.shape, dtype), jax.random.normal(kg, t.case.out_shape(), dtype)))
    return jax.block_until_ready(sets)


def _jax_timer(compiled, arg_sets):
    import jax

    def run(n: int) -> float:
        start = time.perf_counter()
        out = None
        for i in range(n):
            out = compiled(*arg_sets[i % len(arg_sets)])
        jax.block_until_ready(out)
        return (time.perf_counter() - start) / n
    return run


def _torch_timer(torch, fn, arg_sets, cuda: bool):
    def run(n: int) -> float:
        if not cuda:
            start = time.perf_counter()
            for i in range(n):
                fn(*arg_sets[i % len(arg_sets)])
            return (time.perf_counter() - start) / n
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for i in range(n):
            fn(*arg_sets[i % len(arg_sets)])
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3 / n
    return run


def measure(timers: dict, rounds: int, target_s: float = 0.02) -> dict:
    """{name: {"min_ms", "median_ms", "calls_per_round", "samples_ms"}}: first-use calibration's timing
    (pool3d_pass/calibration/timing.py): warm-up, then interleaved rounds."""
    return calibration_timing.measure(timers, rounds, target_s)


def _torch_variants(torch, t: Timed, jax_sets, job: str, cuda: bool):
    """PyTorch doing the same job on the same data (dlpack views; NDHWC as channels_last_3d)."""
    tp = pooling.TorchPool(t.case, torch)

    def view(a):
        tensor = torch.from_dlpack(a) if cuda else torch.from_numpy(np.asarray(a, np.float32)).to(tp.dtype)
        return tensor.permute(0, 4, 1, 2, 3) if t.case.channels_last else tensor

    sets = [(view(x), view(g)) for x, g in jax_sets]
    if job == "gradient only":
        fn = lambda x, g: tp.grad_from_indices(g, x, tp.pool_with_indices(x)[1])
    elif job == "forward + gradient":
        def fn(x, g):
            y, index = tp.pool_with_indices(x)
            return y, tp.grad_from_indices(g, x, index)
    elif job == "inference":
        fn = lambda x, g: tp.pool(x)
    else:
        fn = lambda x, g: tp.pool_with_indices(x)
    return _torch_timer(torch, fn, sets, cuda)


def time_job(t: Timed, job: str, torch, rounds: int, dry_run: bool, bandwidth: float | None, rec, log) -> None:
    """One job of one case: every variant compiled, timed interleaved, recorded as one row."""
    import jax

    import pool3d_pass
    from pool3d_pass.bindings.registry import binding_for

    start = time.monotonic()
    sets_n = min(8, max(2, math.ceil(ROTATE_BYTES / max(t.input_bytes, 1)))) if not dry_run else 2
    jax_sets = _jax_sets(t, sets_n, key=len(t.case.name))
    timers, calls, problems = {}, {}, []
    if job == "forward alone":  # the binding's forward call (y, indices), what a training forward runs
        attrs = pooling.kernel_attrs(t.case)
        forward = binding_for("gpu").function("forward")
        compiled = jax.jit(lambda x: forward(x, **attrs)).lower(jax_sets[0][0]).compile()
        timers["pool3d indices"] = _jax_timer(compiled, [(x,) for x, _ in jax_sets])
    else:
        fun = job_function(job, pooling.pool_fn(t.case))
        arg_sets = [(x,) if job == "inference" else (x, g) for x, g in jax_sets]
        timers["xla"] = _jax_timer(jax.jit(fun).lower(*arg_sets[0]).compile(), arg_sets)
        for strategy in STRATEGIES[job]:
            compiled = pool3d_pass.jit(fun, strategy=strategy).lower(*arg_sets[0]).compile()
            text = compiled.as_text()
            calls[strategy] = kernel_calls(text)
            if (reason := not_rewritten(text, job, dry_run)) is not None:
                problems.append(f"{strategy}: {reason}")
            timers[f"pool3d {strategy}"] = _jax_timer(compiled, arg_sets)
    torch_note = None
    if torch is not None:
        try:
            timers["torch"] = _torch_variants(torch, t, jax_sets, job, not dry_run)
        except Exception as error:  # noqa: BLE001 - the other columns still count
            torch_note = f"{type(error).__name__}: {str(error)[:200]}"
    ms = measure(timers, rounds)
    ours = min(v["min_ms"] for k, v in ms.items() if k.startswith("pool3d"))
    # what first-use calibration would decide from the same samples (ratio of medians, spread, kernels or XLA)
    verdicts = {k: calibration_timing.verdict(ms["xla"]["samples_ms"], v["samples_ms"])
                for k, v in ms.items() if k.startswith("pool3d") and "xla" in ms}
    floor_ms = t.floor_bytes(job) / bandwidth * 1e3 if bandwidth else None
    row = rec.record(
        "timing", case=t.case.name + (f" (C3D {t.c3d})" if t.c3d else ""), c3d=t.c3d, job=job,
        layout=t.case.layout, dtype=t.case.dtype, overlap=t.overlap,
        size_class=t.size_class, input_bytes=t.input_bytes, ms=ms, kernel_calls=calls, problems=problems,
        floor_ms=floor_ms, input_sets=len(jax_sets), torch_note=torch_note, calibration=verdicts,
        xla_over_pool3d=(ms["xla"]["min_ms"] / ours) if "xla" in ms else None,
        torch_over_pool3d=(ms["torch"]["min_ms"] / ours) if "torch" in ms else None)
    rec.table(table_row(row))
    log(f"timing {t.case.name} / {job}: {time.monotonic() - start:.1f} s")


def _ms(ms: dict, name: str) -> str:
    return f"{ms[name]['min_ms']:.3f}" if name in ms else "-"


def _ratio(value) -> str:
    return f"{value:.2f}x" if isinstance(value, (int, float)) else "-"


TABLE_HEADER = ("| case | job | XLA ms | pool3d indices ms | pool3d recompute ms | torch ms | floor ms | "
                "XLA / pool3d | torch / pool3d |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |")


def table_row(row: dict) -> str:
    ms = row["ms"]
    floor = f"{row['floor_ms']:.3f}" if isinstance(row.get("floor_ms"), (int, float)) else "-"
    flag = " (not rewritten!)" if row.get("problems") else ""
    return (f"| {row['case']} | {row['job']}{flag} | {_ms(ms, 'xla')} | {_ms(ms, 'pool3d indices')} | "
            f"{_ms(ms, 'pool3d recompute')} | {_ms(ms, 'torch')} | {floor} | {_ratio(row.get('xla_over_pool3d'))} | "
            f"{_ratio(row.get('torch_over_pool3d'))} |")


def run(rec, budget, torch, dry_run: bool, log, rounds: int) -> None:
    """Every job over every case, job by job (so a short budget still covers every class for the first jobs)."""
    import jax

    bandwidth = copy_bandwidth(torch, dry_run)
    rec.record("bandwidth", **bandwidth)
    log(f"copy bandwidth: {bandwidth}")
    rec.table(TABLE_HEADER)
    per_item = 3.0
    rows = device_cases(dry_run) + c3d_cases(dry_run)
    for job in JOBS:
        for t in rows:
            if t.c3d and job == "forward alone":  # the model's jobs: what a train or inference step runs
                continue
            if not budget.fits(per_item):
                name = t.case.name + (f" (C3D {t.c3d})" if t.c3d else "")
                rec.record("skipped", item=f"{name} / {job}", reason=f"budget: {budget.left():.0f} s left")
                continue
            start = time.monotonic()
            try:
                time_job(t, job, torch, rounds, dry_run, bandwidth.get("bytes_per_s"), rec, log)
            except Exception as error:  # noqa: BLE001 - one item's failure is a result; the others still run
                rec.record("error", item=f"{t.case.name} / {job}", error=f"{type(error).__name__}: {str(error)[:500]}")
                log(f"timing {t.case.name} / {job}: {type(error).__name__}: {str(error)[:200]}")
            per_item = max(per_item * 0.5, time.monotonic() - start)
            jax.clear_caches()  # the compiled programs of an item are not used again
