"""Section 2: the forward max pool alone: the pool3d forward call vs XLA's reduce_window vs torch.

Variants per case, timed interleaved (timing.py), compile excluded, inputs
already on the device, results waited for:

* pool3d          `jax.jit` of the cpu binding's `max_pooling_3d_forward(x)`:
                  (y, indices), indices int16 (the layer call the indices
                  strategy puts in place of the forward reduce_window).
                  2-D cases run on a unit depth axis. Absent (n/a) while the
                  cpu binding lacks the call.
* pool3d_output   `jax.jit` of the cpu binding's `max_pooling_3d_forward_output(x)`:
                  y only, the inference call (docs/contract.md); where it beats
                  XLA decides where the pass will put it.
* inference       `pool3d_pass.jit(pool)(x)`: the user's inference program
                  rewritten by the pass: the forward-output call where the CPU
                  binding accepts the configuration (bindings/cpu/speed.py),
                  else XLA's reduce_window, unchanged (the check says which).
* xla             `jax.jit(pool)(x)`: XLA's `reduce_window` max, y only.
* torch           `torch.nn.functional.max_pool3d(x, k, s, p)` (`max_pool2d`
                  for 2-D): y only.
* torch_indices   `aten.max_pool3d_with_indices(x, ...)`: (y, indices), int64
                  flat spatial indices (what torch's backward needs).

The floor of the forward's job is the fewest bytes it must move (read x; write
y and the int16 indices) at the copy bandwidth measured at the start of the
run. `torch with indices / floor` is about the largest `torch with indices /
pool3d` any program could show here, and `torch with indices / (JAX call +
floor)` the largest a call from JAX could: jax_call, `jax.jit(jnp.negative)`
of 4 elements timed like the rest, is what any call from JAX costs before
its kernel does anything.

Checks: y of pool3d and torch against XLA's (max abs diff; the contract makes
pool3d's y bit-identical to reduce_window's), and whether pool3d's window
offsets name the same input element as torch's flat indices.
"""

from __future__ import annotations

import os
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from bench.timing import blocking, jax_call, measure
from cases import pooling

try:
    import torch
except ImportError:
    torch = None


def _forward_call():
    from pool3d_pass.bindings import cpu as cpu_binding

    fn = getattr(cpu_binding, "max_pooling_3d_forward", None)
    if fn is None:
        return None
    try:
        cpu_binding.register()
    except Exception:  # noqa: BLE001 -- an unbuilt call: the column reads n/a
        return None
    return fn


def offsets_to_flat(case: pooling.Case, offsets: np.ndarray) -> np.ndarray:
    """pool3d window offsets (case layout, rank 5) -> torch's flat spatial input index (NC(D)HW order)."""
    attrs = pooling.kernel_attrs(case)
    k, s, p = attrs["kernel_size"], attrs["stride"], attrs["padding"]
    off = offsets.astype(np.int64)
    if case.channels_last:
        off = np.moveaxis(off, -1, 1)  # NDHWC -> NCDHW
    _, _, od, oh, ow = off.shape
    td, rest = np.divmod(off, k[1] * k[2])
    th, tw = np.divmod(rest, k[2])
    d = np.arange(od).reshape(-1, 1, 1) * s[0] - p[0] + td
    h = np.arange(oh).reshape(1, -1, 1) * s[1] - p[1] + th
    w = np.arange(ow).reshape(1, 1, -1) * s[2] - p[2] + tw
    sp = case.spatial_shape()
    D, H, W = (1,) + tuple(sp) if case.two_d else tuple(sp)
    flat = (d * H + h) * W + w
    flat = flat.reshape(flat.shape[:2] + flat.shape[3:]) if case.two_d else flat
    return np.where(off.reshape(flat.shape) < 0, -1, flat)


def floor_bytes(case: pooling.Case, x_size: int, y_size: int) -> int:
    """Read x; write y and its int16 indices."""
    itemsize = pooling.np_dtype(case.dtype).itemsize
    return x_size * itemsize + y_size * (itemsize + 2)


def run_case(case: pooling.Case, forward_call, *, repeats: int | None = None,
             bandwidth_gb_s: float | None = None) -> dict:
    x_np, _ = pooling.inputs(case)
    x = jax.block_until_ready(jnp.asarray(x_np))
    pool = pooling.pool_fn(case)
    xla = jax.jit(pool).lower(x).compile()
    variants = {"xla": blocking(xla, x), "jax_call": jax_call(x.dtype)}
    y_ref = np.asarray(xla(x))
    checks = {}
    import pool3d_pass

    inference = pool3d_pass.jit(pool).lower(x).compile()
    variants["inference"] = blocking(inference, x)
    checks["inference_rewritten"] = "pool3d.max_pooling_3d_forward_output" in inference.as_text()
    checks["inference_bit_identical_to_xla"] = bool(
        np.array_equal(np.asarray(inference(x)).view(np.uint8), y_ref.view(np.uint8)))
    pool3d_idx = None
    if forward_call is not None:
        x5 = pooling.as_rank5(x, case)
        p3 = jax.jit(partial(forward_call, **pooling.kernel_attrs(case))).lower(x5).compile()
        variants["pool3d"] = blocking(p3, x5)
        y3, idx3 = p3(x5)
        checks["pool3d_y_max_abs_diff_vs_xla"] = pooling.max_abs_diff(np.asarray(y3).reshape(y_ref.shape), y_ref)
        checks["pool3d_y_bit_identical_to_xla"] = bool(
            np.array_equal(np.asarray(y3).reshape(y_ref.shape).view(np.uint8), y_ref.view(np.uint8)))
        pool3d_idx = np.asarray(idx3)
        output_call = getattr(__import__("pool3d_pass.bindings.cpu", fromlist=["cpu"]), "max_pooling_3d_forward_output", None)
        if output_call is not None:
            po = jax.jit(partial(output_call, **pooling.kernel_attrs(case))).lower(x5).compile()
            variants["pool3d_output"] = blocking(po, x5)
            yo = np.asarray(po(x5)).reshape(y_ref.shape)
            checks["pool3d_output_bit_identical_to_xla"] = bool(np.array_equal(yo.view(np.uint8), y_ref.view(np.uint8)))
            checks["pool3d_output_bit_identical_to_forward"] = bool(
                np.array_equal(yo.view(np.uint8), np.asarray(y3).reshape(y_ref.shape).view(np.uint8)))
    if torch is not None:
        tp = pooling.TorchPool(case, torch)
        xt = tp.tensor(x_np)
        variants["torch"] = lambda: tp.pool(xt)
        variants["torch_indices"] = lambda: tp.pool_with_indices(xt)
        yt, it = tp.pool_with_indices(xt)
        checks["torch_y_max_abs_diff_vs_xla"] = pooling.max_abs_diff(tp.to_numpy(tp.pool(xt)), y_ref)
        checks["torch_indices_y_max_abs_diff_vs_xla"] = pooling.max_abs_diff(tp.to_numpy(yt), y_ref)
        if pool3d_idx is not None:
            torch_flat = it.contiguous().numpy()  # NC(D)HW order (channels_last only changes strides)
            checks["pool3d_indices_match_torch"] = bool(np.array_equal(offsets_to_flat(case, pool3d_idx),
                                                                      torch_flat))
    stats = measure(variants, repeats=repeats or case.repeats, warmup=1)
    floor_ms = None
    if bandwidth_gb_s:
        floor_ms = floor_bytes(case, x_np.size, y_ref.size) / (bandwidth_gb_s * 1e9) * 1e3

    def ratios(key: str) -> dict:
        ms = {name: s[key] for name, s in stats.items()}
        if "pool3d" not in ms:
            return {}
        out = {"xla_vs_pool3d": ms["xla"] / ms["pool3d"], "xla_vs_inference": ms["xla"] / ms["inference"]}
        if "pool3d_output" in ms:
            out["xla_vs_pool3d_output"] = ms["xla"] / ms["pool3d_output"]
        if floor_ms:
            out["floor_fraction"] = floor_ms / ms["pool3d"]
        if "torch" in ms:
            out["torch_vs_pool3d"] = ms["torch"] / ms["pool3d"]
            out["torch_indices_vs_pool3d"] = ms["torch_indices"] / ms["pool3d"]
            if floor_ms:
                out["torch_indices_vs_floor"] = ms["torch_indices"] / floor_ms
                out["torch_indices_vs_jax_call_and_floor"] = ms["torch_indices"] / (ms["jax_call"] + floor_ms)
        return out

    return {
        "case": case.name,
        "repeats": repeats or case.repeats,
        "ms": dict(stats),
        "floor_ms": floor_ms,
        "ratios_of_min": ratios("min_ms"),
        "ratios_of_median": ratios("median_ms"),
        "checks": checks,
    }


def run(quick: bool, bandwidth_gb_s: float | None = None, log=print) -> dict:
    if torch is not None:
        torch.set_num_threads(os.cpu_count() or 1)
    forward_call = _forward_call()
    results = []
    for case in pooling.QUICK_CASES if quick else pooling.FULL_CASES:
        log(f"  forward alone: {case.name}")
        results.append(run_case(case, forward_call, bandwidth_gb_s=bandwidth_gb_s))
    notes = []
    if forward_call is None:
        notes.append("the cpu binding has no max_pooling_3d_forward yet: pool3d column n/a")
    if torch is None:
        notes.append("torch not installed: torch columns skipped (pip install torch==2.13.0)")
    return {"cases": results, "note": "; ".join(notes) or None,
            "torch": None if torch is None else torch.__version__}
