"""Stage "numerics": every call of the gpu binding against the contract's pure-JAX reference, on the device.

Per configuration, layout and element type one program of each binding is
compiled (the five calls of the contract side by side) and run on several
kinds of input: tie-heavy integers; NaN, +-inf and -0/+0 with a plane of
-inf only; subnormal numbers (inputs and gradients). Rules: forward maxima
and indices bit for bit equal to the reference's; the three gradient calls
equal each other bit for bit; the gradient bit for bit where windows do not
overlap, else within the f32 summation bound. Each gpu program runs twice on
the same inputs and must give the same bits (determinism). Last, one case
with 2^31 elements (64-bit offsets), compared on the device (its own stage).
"""

from __future__ import annotations

import numpy as np

CONFIGS = [  # (shape NCDHW, kernel, stride, padding), most telling first
    ((2, 3, 9, 8, 7), (3, 3, 3), (2, 2, 2), (1, 1, 1)),
    ((2, 3, 9, 8, 7), (2, 2, 2), (2, 2, 2), (0, 0, 0)),
    ((1, 4, 6, 7, 5), (3, 3, 3), (1, 1, 1), (1, 1, 1)),
    ((2, 2, 5, 6, 7), (3, 2, 1), (1, 2, 3), (1, 0, 0)),
]
DTYPES = ("float32", "bfloat16", "float16")
KINDS = ("ties", "specials", "subnormals")
# 2^31 elements of bf16 (4 GiB): offsets past int32, k2 s2 NDHWC.
INT64_SHAPE = (1, 64, 256, 256, 512)


def np_dtype(name: str):
    import ml_dtypes

    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def finfo(name: str):
    """Float limits of an element type; numpy's finfo does not know bfloat16, ml_dtypes' does."""
    import ml_dtypes

    return ml_dtypes.finfo(np_dtype(name))


def same_bits(a, b) -> bool:
    """Equal bit for bit, except that any NaN equals any NaN (never +-0 or a number)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind in "biu":
        return bool(np.array_equal(a, b))
    wide_a, wide_b = a.astype(np.float64), b.astype(np.float64)
    nan_a, nan_b = np.isnan(wide_a), np.isnan(wide_b)
    if not np.array_equal(nan_a, nan_b):
        return False
    view = np.dtype(f"u{a.dtype.itemsize}")
    return bool(np.array_equal(a.view(view)[~nan_a], b.view(view)[~nan_b]))


def max_diff(a, b) -> float:
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    finite = np.isfinite(a64) & np.isfinite(b64)
    return float(np.max(np.abs(a64[finite] - b64[finite]), initial=0.0))


def inputs(shape, kernel, stride, padding, layout, dtype_name, kind, seed):
    """(x, g) for one configuration in `layout` (shape given NCDHW)."""
    rng = np.random.default_rng(seed)
    dtype = np_dtype(dtype_name)
    out = tuple((n + 2 * p - k) // s + 1 for n, k, s, p in zip(shape[2:], kernel, stride, padding))
    g_shape = (*shape[:2], *out)
    if kind == "ties":
        x = rng.integers(-2, 3, shape).astype(np.float64)
        g = rng.integers(-4, 5, g_shape) / 4
    elif kind == "specials":
        x = rng.choice(np.array([0.0, -0.0, 1.0, -1.0, -np.inf, np.inf, np.nan]), size=shape,
                       p=[0.25, 0.25, 0.15, 0.1, 0.15, 0.05, 0.05])
        x[0, 0] = -np.inf
        g = rng.integers(-4, 5, g_shape) / 4
    else:  # subnormals of the element type (and a few zeros of both signs), in x and g
        tiny = float(finfo(dtype_name).smallest_subnormal)
        x = rng.integers(-3, 4, shape) * tiny
        x[rng.random(shape) < 0.1] = -0.0
        g = rng.integers(-3, 4, g_shape) * tiny
    if layout == "NDHWC":
        x, g = np.moveaxis(x, 1, -1), np.moveaxis(g, 1, -1)
    return x.astype(dtype), g.astype(dtype)


def program(module, attrs, x_shape):
    """The five calls of `module` (a binding's calls module) on (x, g), in one jitted function."""
    import jax

    def run(x, g):
        y, index = module.max_pooling_3d_forward(x, **attrs)
        return {"y": y, "index": index,
                "y_only": module.max_pooling_3d_forward_output(x, **attrs),
                "from_indices": module.max_pooling_3d_backward_from_indices(g, index, input_shape=x_shape, **attrs),
                "backward": module.max_pooling_3d_backward(g, x, y, **attrs),
                "from_input": module.max_pooling_3d_backward_from_input(g, x, **attrs)}
    return jax.jit(run)


def compare(got: dict, again: dict, ref: dict, overlap: bool, dtype_name: str) -> tuple[list[str], dict]:
    """Problems of one run against the reference (empty: it passed), and its figures."""
    problems = []
    if not same_bits(got["y"], ref["y"]) or not same_bits(got["y_only"], ref["y"]):
        problems.append("forward maxima differ from the reference")
    if not same_bits(got["index"], ref["index"]):
        problems.append("indices differ from the reference")
    for name in ("backward", "from_input"):
        if not same_bits(got[name], got["from_indices"]):
            problems.append(f"{name} differs from from_indices")
    if any(not same_bits(got[k], again[k]) for k in got):
        problems.append("not deterministic: a second run gave other bits")
    exact = same_bits(got["from_indices"], ref["from_indices"])
    diff = max_diff(got["from_indices"], ref["from_indices"])
    scale = float(np.max(np.abs(np.asarray(ref["from_indices"], np.float64)), initial=0.0))
    if not overlap and not exact:
        problems.append(f"gradient not bit-exact without overlap (max diff {diff:g})")
    eps = float(finfo("float32" if dtype_name == "float32" else "float16").eps)
    if overlap and diff > 4 * eps * max(scale, float(finfo("float32").tiny)):
        problems.append(f"gradient max diff {diff:g} above 4 eps x {scale:g}")
    return problems, {"gradient_bit_exact": exact, "gradient_max_diff": diff}


def run(rec, budget, calls_module, reference_module, log) -> int:
    """Records one row per (config, layout, dtype, inputs); returns the number of failures."""
    import time

    import jax

    failures, per_compile = 0, 20.0
    for shape, kernel, stride, padding in CONFIGS:
        overlap = any(s < k for k, s in zip(kernel, stride))
        for dtype_name in DTYPES:
            for layout in ("NCDHW", "NDHWC"):
                attrs = dict(kernel_size=kernel, stride=stride, padding=padding, data_format=layout)
                label = f"{layout} {dtype_name} {shape} k{kernel} s{stride} p{padding}"
                if not budget.fits(per_compile):
                    rec.record("skipped", item=label, reason=f"budget: {budget.left():.0f} s left")
                    continue
                start = time.monotonic()
                x_shape = shape if layout == "NCDHW" else (shape[0], *shape[2:], shape[1])
                ours, theirs = program(calls_module, attrs, x_shape), program(reference_module, attrs, x_shape)
                for seed, kind in enumerate(KINDS):
                    x, g = inputs(shape, kernel, stride, padding, layout, dtype_name, kind, seed)
                    got = {k: np.asarray(v) for k, v in ours(x, g).items()}
                    again = {k: np.asarray(v) for k, v in ours(x, g).items()}
                    ref = {k: np.asarray(v) for k, v in theirs(x, g).items()}
                    problems, figures = compare(got, again, ref, overlap, dtype_name)
                    failures += bool(problems)
                    rec.record("calls", item=label, inputs=kind, dtype=dtype_name, layout=layout, overlap=overlap,
                               problems=problems, **figures)
                    rec.table(f"| numerics | {label} | {kind} | {'ok' if not problems else 'FAIL: ' + '; '.join(problems)} |")
                per_compile = max(5.0, time.monotonic() - start)
                log(f"numerics {label}: {time.monotonic() - start:.1f} s")
    jax.clear_caches()
    return failures


def run_int64(rec, budget, calls_module, reference_module, log) -> int:
    """2^31 bf16 elements, NDHWC k2 s2: forward and gradient compared with the reference on the device."""
    import jax
    import jax.numpy as jnp

    label = f"NDHWC bfloat16 {INT64_SHAPE} k2 s2 (2^31 elements: 64-bit offsets)"
    if not budget.fits(5.0):
        rec.record("skipped", item=label, reason=f"budget: {budget.left():.0f} s left")
        return 0
    attrs = dict(kernel_size=(2, 2, 2), stride=(2, 2, 2), padding=(0, 0, 0), data_format="NDHWC")
    b, d, h, w, c = INT64_SHAPE
    kx, kg = jax.random.split(jax.random.PRNGKey(7))
    x = jax.random.normal(kx, INT64_SHAPE, jnp.bfloat16)
    g = jax.random.normal(kg, (b, d // 2, h // 2, w // 2, c), jnp.bfloat16)

    def both(x, g):
        out = {}
        for name, module in (("ours", calls_module), ("ref", reference_module)):
            y, index = module.max_pooling_3d_forward(x, **attrs)
            dx = module.max_pooling_3d_backward_from_indices(g, index, input_shape=INT64_SHAPE, **attrs)
            out[name] = (y, index, dx)
        bits = lambda a: jax.lax.bitcast_convert_type(a, jnp.uint16) if a.dtype == jnp.bfloat16 else a
        return {k: jnp.array_equal(bits(a), bits(r)) for k, a, r in zip(("y", "index", "dx"), out["ours"], out["ref"])}

    try:
        equal = {k: bool(v) for k, v in jax.jit(both)(x, g).items()}
        problems = [f"{k} differs from the reference" for k, ok in equal.items() if not ok]
    except Exception as error:  # noqa: BLE001 - recorded: an allocation or launch failure is a result
        problems = [f"{type(error).__name__}: {str(error).splitlines()[0][:300]}"]
    rec.record("calls", item=label, inputs="normal", dtype="bfloat16", layout="NDHWC", overlap=False,
               problems=problems, int64=True)
    rec.table(f"| numerics | {label} | normal | {'ok' if not problems else 'FAIL: ' + '; '.join(problems)} |")
    log(f"numerics int64: {problems or 'ok'}")
    return int(bool(problems))
