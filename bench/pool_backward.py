"""Section 1: max-pool backward per shape, five ways side by side.

For each case (shape, window, layout, dtype):

* xla        the original program: `jax.jit(lambda x, g: vjp(pool, x)[1](g)[0])`,
             pool = `lax.reduce_window` max; XLA runs `select_and_scatter`.
* rewritten  the same function through `pool3d_pass.jit`: the kernel call
             plus the forward `reduce_window` the pass inserts for its
             `output` operand.
* kernel     the kernel alone, `jax.jit` of `bindings.cpu.max_pooling_3d_backward`
             given the precomputed forward output y.
* torch      `aten.max_pool{2,3}d_with_indices_backward` given the forward's
             indices (torch threads = the machine's cores); absent without torch.
* floor      the fewest bytes the kernel-alone job must move (read x, y, g;
             write dx) divided by the copy bandwidth measured in the same run.
* negate     `jax.jit(jnp.negative)(x)`: the cheapest XLA program that reads x
             and writes a fresh result of dx's size. XLA allocates every
             result anew, and first-touch page faults on it cost as much as
             the copy itself: this is the floor as seen from inside XLA.

2-D cases (NCHW) run the kernel on a unit depth axis (B, C, 1, H, W).
All variants are timed interleaved (see timing.py); their results are compared
against XLA's, so a fast wrong answer shows up in the JSON.
"""

from __future__ import annotations

import dataclasses
import os
from functools import partial

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from jax import lax

from pool3d_pass.bindings import cpu as cpu_binding

import rewritten
from timing import blocking, measure

try:
    import torch
except ImportError:  # torch is optional: its columns are skipped
    torch = None


@dataclasses.dataclass(frozen=True)
class Case:
    """One pooling problem; `shape` is in `layout`, window triples/pairs are spatial only."""

    shape: tuple[int, ...]
    kernel: tuple[int, ...]
    stride: tuple[int, ...]
    padding: tuple[int, ...]
    layout: str = "NCDHW"  # NCDHW, NDHWC or NCHW
    dtype: str = "float32"  # float32 or bfloat16
    repeats: int = 5

    @property
    def name(self) -> str:
        k = "x".join(map(str, self.kernel)) if len(set(self.kernel)) > 1 else str(self.kernel[0])
        s = "x".join(map(str, self.stride)) if len(set(self.stride)) > 1 else str(self.stride[0])
        p = max(self.padding)
        dt = {"float32": "f32", "bfloat16": "bf16"}[self.dtype]
        return f"{self.layout} {dt} {tuple(self.shape)} k{k} s{s}" + (f" p{p}" if p else "")

    @property
    def channels_last(self) -> bool:
        return self.layout == "NDHWC"

    def window(self, spatial: tuple[int, ...], fill: int = 1) -> tuple[int, ...]:
        """`spatial` extended to every axis of the layout with `fill` on N and C."""
        return (fill,) + spatial + (fill,) if self.channels_last else (fill, fill) + spatial

    def out_shape(self) -> tuple[int, ...]:
        sp = self.spatial_shape()
        out_sp = tuple((n + 2 * p - k) // s + 1 for n, k, s, p in zip(sp, self.kernel, self.stride, self.padding))
        if self.channels_last:
            return (self.shape[0],) + out_sp + (self.shape[-1],)
        return self.shape[:2] + out_sp

    def spatial_shape(self) -> tuple[int, ...]:
        return self.shape[1:-1] if self.channels_last else self.shape[2:]


FULL_CASES = [
    Case((8, 32, 32, 64, 64), (2, 2, 2), (2, 2, 2), (0, 0, 0), repeats=7),
    Case((4, 32, 32, 64, 64), (3, 3, 3), (2, 2, 2), (1, 1, 1), repeats=7),
    Case((2, 64, 16, 56, 56), (3, 3, 3), (1, 1, 1), (1, 1, 1), repeats=7),
    Case((4, 16, 64, 64, 32), (3, 3, 3), (2, 2, 2), (1, 1, 1), layout="NDHWC", dtype="bfloat16", repeats=10),
    Case((16, 64, 112, 112), (3, 3), (2, 2), (1, 1), layout="NCHW", repeats=10),
    Case((16, 64, 112, 112), (2, 2), (2, 2), (0, 0), layout="NCHW", repeats=10),
]

QUICK_CASES = [
    Case((2, 4, 8, 16, 16), (2, 2, 2), (2, 2, 2), (0, 0, 0), repeats=2),
    Case((2, 4, 8, 16, 16), (3, 3, 3), (2, 2, 2), (1, 1, 1), repeats=2),
    Case((1, 8, 8, 14, 14), (3, 3, 3), (1, 1, 1), (1, 1, 1), repeats=2),
    Case((2, 8, 16, 16, 8), (3, 3, 3), (2, 2, 2), (1, 1, 1), layout="NDHWC", dtype="bfloat16", repeats=2),
    Case((4, 8, 28, 28), (3, 3), (2, 2), (1, 1), layout="NCHW", repeats=2),
]


def _np_dtype(name: str):
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def _pool_fn(case: Case):
    window = case.window(case.kernel)
    strides = case.window(case.stride)
    pads = tuple((p, p) for p in case.window(case.padding, 0))
    init = np.array(-np.inf, _np_dtype(case.dtype))

    def pool(x):
        return lax.reduce_window(x, init, lax.max, window, strides, pads)

    return pool


def _kernel_fn(case: Case):
    """The kernel alone, on rank-5 operands (2-D cases get a unit depth axis)."""
    two_d = len(case.kernel) == 2
    k, s, p = ((1,) + case.kernel, (1,) + case.stride, (0,) + case.padding) if two_d else \
        (case.kernel, case.stride, case.padding)
    fmt = "NDHWC" if case.channels_last else "NCDHW"
    return jax.jit(partial(cpu_binding.max_pooling_3d_backward,
                           kernel_size=k, stride=s, padding=p, data_format=fmt))


def _as_rank5(a, case: Case):
    return a.reshape(a.shape[:2] + (1,) + a.shape[2:]) if len(case.kernel) == 2 else a


def _torch_fn(case: Case, x_np: np.ndarray, g_np: np.ndarray):
    """A no-argument callable running torch's backward, and its result getter."""
    tdtype = torch.bfloat16 if case.dtype == "bfloat16" else torch.float32
    x = torch.from_numpy(x_np.astype(np.float32)).to(tdtype)
    g = torch.from_numpy(g_np.astype(np.float32)).to(tdtype)
    if case.channels_last:  # NDHWC data seen as an NCDHW tensor in channels_last_3d memory format
        x, g = x.permute(0, 4, 1, 2, 3), g.permute(0, 4, 1, 2, 3)
    k, s, p = list(case.kernel), list(case.stride), list(case.padding)
    dil = [1] * len(k)
    if len(k) == 3:
        _, idx = torch.ops.aten.max_pool3d_with_indices(x, k, s, p, dil, False)
        backward = torch.ops.aten.max_pool3d_with_indices_backward
    else:
        _, idx = torch.ops.aten.max_pool2d_with_indices(x, k, s, p, dil, False)
        backward = torch.ops.aten.max_pool2d_with_indices_backward

    def run():
        return backward(g, x, k, s, p, dil, False, idx)

    def to_numpy(dx):
        if case.channels_last:
            dx = dx.permute(0, 2, 3, 4, 1)
        return dx.float().contiguous().numpy()

    return run, to_numpy


def _max_abs_diff(a, b) -> float:
    return float(np.max(np.abs(np.asarray(a, np.float32) - np.asarray(b, np.float32))))


def run_case(case: Case, bandwidth_gb_s: float, *, repeats: int | None = None) -> dict:
    """Time one case every way and return its JSON record (ms figures and ratios)."""
    rng = np.random.default_rng(0)
    dtype = _np_dtype(case.dtype)
    x_np = rng.standard_normal(case.shape, np.float32).astype(dtype)
    g_np = rng.standard_normal(case.out_shape(), np.float32).astype(dtype)

    pool = _pool_fn(case)

    def grad(x, g):
        return jax.vjp(pool, x)[1](g)[0]

    x, g = jnp.asarray(x_np), jnp.asarray(g_np)
    y = jax.block_until_ready(jax.jit(pool)(x))

    xla, rew, kernel_calls = rewritten.compile_both(grad, x, g)
    kern = _kernel_fn(case)
    g5, x5, y5 = _as_rank5(g, case), _as_rank5(x, case), _as_rank5(y, case)

    variants = {
        "xla": blocking(xla, x, g),
        "rewritten": blocking(rew, x, g),
        "kernel": blocking(kern, g5, x5, y5),
        "negate": blocking(jax.jit(jnp.negative), x),
    }
    torch_run = None
    if torch is not None:
        torch_run, torch_to_numpy = _torch_fn(case, x_np, g_np)
        variants["torch"] = torch_run

    # Results first (this also compiles the kernel and warms torch), then the interleaved timing.
    dx_xla = np.asarray(xla(x, g))
    checks = {
        "rewritten_max_abs_diff_vs_xla": _max_abs_diff(rew(x, g), dx_xla),
        "kernel_max_abs_diff_vs_xla": _max_abs_diff(np.asarray(kern(g5, x5, y5)).reshape(dx_xla.shape), dx_xla),
    }
    if torch_run is not None:
        checks["torch_max_abs_diff_vs_xla"] = _max_abs_diff(torch_to_numpy(torch_run()), dx_xla)

    stats = measure(variants, repeats=repeats or case.repeats, warmup=1)

    itemsize = dtype.itemsize
    floor_bytes = (2 * x_np.size + 2 * g_np.size) * itemsize  # read x, y, g; write dx
    floor_ms = floor_bytes / (bandwidth_gb_s * 1e9) * 1e3

    def ratios(key: str) -> dict:
        ms = {name: s[key] for name, s in stats.items()}
        out = {
            "kernel_vs_xla_speedup": ms["xla"] / ms["kernel"],
            "rewritten_vs_xla_speedup": ms["xla"] / ms["rewritten"],
            "floor_fraction": floor_ms / ms["kernel"],
            "negate_fraction": ms["negate"] / ms["kernel"],
        }
        if "torch" in ms:
            out["kernel_vs_torch_speedup"] = ms["torch"] / ms["kernel"]
        return out

    return {
        "case": case.name,
        "shape": list(case.shape),
        "layout": case.layout,
        "dtype": case.dtype,
        "kernel_size": list(case.kernel),
        "stride": list(case.stride),
        "padding": list(case.padding),
        "repeats": repeats or case.repeats,
        "ms": dict(stats),
        "floor_bytes": int(floor_bytes),
        "floor_ms": floor_ms,
        "ratios_of_min": ratios("min_ms"),
        "ratios_of_median": ratios("median_ms"),
        "rewritten_kernel_calls": kernel_calls,
        "checks": checks,
        "torch_threads": torch.get_num_threads() if torch is not None else None,
    }


def run(quick: bool, bandwidth_gb_s: float, log=print) -> dict:
    """All cases of section 1."""
    if torch is not None:
        torch.set_num_threads(os.cpu_count() or 1)
    cases = QUICK_CASES if quick else FULL_CASES
    results = []
    for case in cases:
        log(f"  pool backward: {case.name}")
        results.append(run_case(case, bandwidth_gb_s))
    return {
        "cases": results,
        "torch": None if torch is None else torch.__version__,
        "note": None if torch is not None else "torch not installed: torch columns skipped "
                "(pip install torch==2.13.0)",
    }
