"""The numerics battery: every call kind of a binding against the reference binding, on the same device.

Plain data first, so the device check (checks/device_check/numerics.py) and
first-use calibration run the same cases: the configurations (`CONFIGS`),
element types (`DTYPES`), layouts (`LAYOUTS`) and input kinds (`KINDS`, each
a generator in `GENERATORS`):

* `ties`: small integers, so most windows hold several equal maxima (the
  first in row-major tap order must win);
* `specials`: +-0 mixed (the maximum of a window holding both is +0, and a
  -0 or +0 may be selected), +-inf, NaN (a window whose maximum is NaN
  selects nothing), and a whole plane of -inf (windows of -inf only select
  their first real -inf);
* `subnormals`: the element type's subnormal numbers, in the input and in
  the gradient (a kernel that flushes them to zero loses them);
* `explicit_pad`: the input's first plane along every pooled axis is -inf,
  which is what the explicit-pad form (JAX's `pad(x, -inf)` remainder the
  pass keeps in front of the kernel) hands the kernel as real elements;
* `zeros`: only +0, -0 and -1, so many windows' maximum is a zero of
  either sign (+0 where some tap holds +0);
* `rounding`: ties in the input, and gradients whose f32 sums fall halfway
  between two bf16/f16 values (rounded to even, as the contract says).

`DEVICE_BRANCH_CASES` reach the CUDA kernels' device-only code (the
`__CUDA_ARCH__` branches: packed 16-bit compares and maxima, `max.NaN`,
the f16 conversions, 128-bit accesses; docs/gpu.md "What only a device
runs"), which no host build executes: rows of whole 128-bit vectors, with
the values that tell a right branch from a near miss. The device check runs
them; first use runs its own window on a shape of the same width.

The rules (`compare`), from docs/contract.md: forward maxima bit for bit
(any NaN equals any NaN), indices exactly, every gradient call equal to the
others bit for bit and to the reference's bit for bit where windows do not
overlap, else within 4 f32 rounding steps of the largest gradient (the
summation order is the binding's). A binding's documented departures from
the contract (`DEPARTURES`: the NKI kernel's signed zeros) are allowed and
named. The reference computes its maxima on integer keys of the values'
bits, so it is the contract's result on every backend; where a device's
compiler cannot carry an input kind through plain XLA ops (`REFERENCE_LIMITS`:
XLA:CPU flushes subnormal floats, which a binding lowered to XLA ops there
loses), that kind is left out there and the verdict names why. Offsets past 2^31 elements (the other offset width) take 4 GiB: the
device check's int64 stage covers them, first-use calibration does not.

`first_use_cases(pool)` is what calibration runs for one class: its own
window, both of two small shapes (an odd channel count with cells after the
last window; sixteen channels, which the vectorised GPU paths take), and
for channels-last 16-bit overlapping windows a third of twelve channels
(the GPU's half-vector units), every input kind. `run` runs them (imports JAX).
"""

from __future__ import annotations

import numpy as np

from pool3d_pass.contract import BACKWARD, BACKWARD_FROM_INDICES, BACKWARD_FROM_INPUT, FORWARD, FORWARD_OUTPUT

# (shape NCDHW, kernel, stride, padding), most telling first: the device check's configurations.
CONFIGS = [
    ((2, 3, 9, 8, 7), (3, 3, 3), (2, 2, 2), (1, 1, 1)),
    ((2, 3, 9, 8, 7), (2, 2, 2), (2, 2, 2), (0, 0, 0)),
    ((1, 4, 6, 7, 5), (3, 3, 3), (1, 1, 1), (1, 1, 1)),
    ((2, 2, 5, 6, 7), (3, 2, 1), (1, 2, 3), (1, 0, 0)),
]
DTYPES = ("float32", "bfloat16", "float16")
ELEMENT_TYPES = {"f32": "float32", "bf16": "bfloat16", "f16": "float16"}  # the contract's names -> numpy's
LAYOUTS = ("NCDHW", "NDHWC")
KINDS = ("ties", "specials", "subnormals", "explicit_pad", "zeros", "rounding")
# Shapes given NCDHW (NDHWC takes the same numbers with C last); see the module docstring.
DEVICE_BRANCH_CASES = (
    {"name": "specialised k3 s2 p1", "shape": (1, 16, 6, 8, 32), "kernel": (3, 3, 3), "stride": (2, 2, 2),
     "padding": (1, 1, 1), "dtypes": ("bfloat16", "float16", "float32"),
     "kinds": ("ties", "specials", "zeros", "rounding"),
     "branches": ("GeMask2 (__hge2_mask)", "EqMask2 (__heq2_mask)", "MaxNan2 (__hmax2_nan)", "MaxS2 (__vmaxs2)",
                  "MaxNan (max.NaN.f32)", "Wide/Narrow f16 (cvt)", "NarrowPair (cvt.rn.bf16x2/f16x2)",
                  "LoadVec/StoreVec (128-bit)")},
    {"name": "specialised k2 s2", "shape": (1, 16, 4, 8, 32), "kernel": (2, 2, 2), "stride": (2, 2, 2),
     "padding": (0, 0, 0), "dtypes": ("bfloat16", "float16"), "kinds": ("ties", "specials", "zeros"),
     "branches": ("GeMask2 (__hge2_mask)", "EqMask2 (__heq2_mask)", "MaxNan2 (__hmax2_nan)", "MaxS2 (__vmaxs2)",
                  "LoadVec/StoreVec (128-bit)")},
    {"name": "specialised k3 s2 p1, half vectors (NDHWC)", "shape": (1, 12, 6, 8, 32), "kernel": (3, 3, 3),
     "stride": (2, 2, 2), "padding": (1, 1, 1), "dtypes": ("bfloat16", "float16"),
     "kinds": ("ties", "specials", "zeros", "rounding"),
     "branches": ("GeMask2 (__hge2_mask)", "EqMask2 (__heq2_mask)", "MaxNan2 (__hmax2_nan)", "MaxS2 (__vmaxs2)",
                  "NarrowPair (cvt.rn.bf16x2/f16x2)", "LoadVec/StoreVec (64-bit)")},
)
# A binding's documented departures from the contract, allowed by `compare` and named in its verdict.
SIGNED_ZERO_GRADIENT = "signed_zero_gradient"
DEPARTURES = {
    "neuron": (SIGNED_ZERO_GRADIENT,),  # docs/contract.md, "The neuron binding's deviations": -0.0 cells
}
DEPARTURE_TEXT = {SIGNED_ZERO_GRADIENT: "a gradient cell -0.0 where the contract has +0 (docs/contract.md)"}
# Input kinds the reference binding cannot judge on a platform, and why (measured: jaxlib 0.12.1).
REFERENCE_LIMITS = {
    "cpu": {"subnormals": "XLA:CPU flushes subnormal floats to zero in its float arithmetic, so a binding "
                          "lowered to XLA ops there (the Pallas kernels in interpret mode) loses them; the CPU "
                          "kernels keep them, as IEEE 754 and the contract say (tests/bindings/cpu checks)"},
}


def kinds_for(platform: str) -> tuple[tuple[str, ...], dict[str, str]]:
    """(input kinds the battery runs on `platform`'s device, {kind left out: why})."""
    left_out = REFERENCE_LIMITS.get(platform, {})
    return tuple(k for k in KINDS if k not in left_out), dict(left_out)


def np_dtype(name: str):
    import ml_dtypes

    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def finfo(name: str):
    """Float limits of an element type; numpy's finfo does not know bfloat16, ml_dtypes' does."""
    import ml_dtypes

    return ml_dtypes.finfo(np_dtype(name))


def pooled_spatial(spatial, kernel, stride, padding) -> tuple[int, ...]:
    return tuple((n + 2 * p - k) // s + 1 for n, k, s, p in zip(spatial, kernel, stride, padding))


def _ties(rng, shape, g_shape, dtype_name):
    return rng.integers(-2, 3, shape).astype(np.float64), rng.integers(-4, 5, g_shape) / 4


def _specials(rng, shape, g_shape, dtype_name):
    x = rng.choice(np.array([0.0, -0.0, 1.0, -1.0, -np.inf, np.inf, np.nan]), size=shape,
                   p=[0.25, 0.25, 0.15, 0.1, 0.15, 0.05, 0.05])
    x[0, 0] = -np.inf
    return x, rng.integers(-4, 5, g_shape) / 4


def _subnormals(rng, shape, g_shape, dtype_name):
    tiny = float(finfo(dtype_name).smallest_subnormal)
    x = rng.integers(-3, 4, shape) * tiny
    x[rng.random(shape) < 0.1] = -0.0
    return x, rng.integers(-3, 4, g_shape) * tiny


def _explicit_pad(rng, shape, g_shape, dtype_name):
    x, g = _ties(rng, shape, g_shape, dtype_name)
    x[:, :, 0], x[:, :, :, 0], x[:, :, :, :, 0] = -np.inf, -np.inf, -np.inf
    return x, g


def _zeros(rng, shape, g_shape, dtype_name):
    return rng.choice(np.array([0.0, -0.0, -1.0]), size=shape, p=[0.2, 0.6, 0.2]), rng.integers(-4, 5, g_shape) / 4


def _rounding(rng, shape, g_shape, dtype_name):
    # ties in x (overlapping windows share taps); g = 1 + k half-ulps: sums land halfway between two values
    half_ulp = 2.0 ** -(8 if dtype_name == "bfloat16" else 11)
    return rng.integers(-1, 2, shape).astype(np.float64), 1.0 + rng.integers(0, 4, g_shape) * half_ulp


GENERATORS = {"ties": _ties, "specials": _specials, "subnormals": _subnormals, "explicit_pad": _explicit_pad,
              "zeros": _zeros, "rounding": _rounding}


def inputs(shape, kernel, stride, padding, layout, dtype_name, kind, seed):
    """(x, g) of input kind `kind` for one configuration, in `layout` (shape given NCDHW)."""
    rng = np.random.default_rng(seed)
    g_shape = (*shape[:2], *pooled_spatial(shape[2:], kernel, stride, padding))
    x, g = GENERATORS[kind](rng, shape, g_shape, dtype_name)
    if layout == "NDHWC":
        x, g = np.moveaxis(x, 1, -1), np.moveaxis(g, 1, -1)
    dtype = np_dtype(dtype_name)
    return x.astype(dtype), g.astype(dtype)


def first_use_cases(kernel, stride, padding, *, half_vectors: bool = False) -> list[tuple[int, ...]]:
    """Small NCDHW shapes for one window: odd channels with a cell after the last window; rows of whole
    128-bit vectors of a 16-bit type (16 channels, W = 32: the vectorised GPU paths and their device-only
    branches, as DEVICE_BRANCH_CASES); with `half_vectors` (NDHWC 16-bit overlapping windows) 12 channels
    too, which the GPU runs 4 a unit (64-bit accesses)."""
    spatial = [max(k - 2 * p, 2 * s + k - 2 * p + 1) for k, s, p in zip(kernel, stride, padding)]
    wide = list(spatial)
    wide[-1] = max(spatial[-1], 32)
    return [(2, 3, *spatial), (1, 16, *wide)] + ([(1, 12, *wide)] if half_vectors else [])


# --- the rules -----------------------------------------------------------------


def same_bits(a, b, *, signed_zeros: bool = True) -> bool:
    """Equal bit for bit, except that any NaN equals any NaN (never +-0 or a number).

    `signed_zeros=False`: -0 and +0 are one (a documented departure).
    """
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind in "biu":
        return bool(np.array_equal(a, b))
    wide_a, wide_b = a.astype(np.float64), b.astype(np.float64)
    nan_a, nan_b = np.isnan(wide_a), np.isnan(wide_b)
    if not np.array_equal(nan_a, nan_b):
        return False
    if not signed_zeros:
        zero = (wide_a == 0) & (wide_b == 0)
        nan_a, nan_b = nan_a | zero, nan_b | zero
    view = np.dtype(f"u{a.dtype.itemsize}")
    return bool(np.array_equal(a.view(view)[~nan_a], b.view(view)[~nan_b]))


def max_diff(a, b) -> float:
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    finite = np.isfinite(a64) & np.isfinite(b64)
    return float(np.max(np.abs(a64[finite] - b64[finite]), initial=0.0))


GRADIENTS = ("from_indices", "backward", "from_input")


def compare(got: dict, ref: dict, overlap: bool, dtype_name: str, again: dict | None = None,
            cpu: dict | None = None, departures=()) -> tuple[list[str], dict]:
    """Problems of one run against the reference (empty: it passed), and its figures.

    `got`: the binding's results by name (`y`, `index` from forward; `y_only` from forward_output;
    `from_indices`, `backward`, `from_input`), those of the calls it has. `again`: a second run
    (determinism). `cpu`: the CPU kernels' results, which the CUDA kernels must equal bit for bit
    (same summation order). `departures`: names in DEPARTURES the binding may show.
    """
    problems = []
    signed = SIGNED_ZERO_GRADIENT not in departures
    if cpu is not None:
        differ = [k for k in got if k in cpu and not same_bits(got[k], cpu[k])]
        if differ:
            problems.append(f"differs from the CPU kernels bit for bit: {', '.join(differ)}")
    if any(k in got and not same_bits(got[k], ref["y"]) for k in ("y", "y_only")):
        problems.append("forward maxima differ from the reference")
    if "index" in got and not same_bits(got["index"], ref["index"]):
        problems.append("indices differ from the reference")
    present = [k for k in GRADIENTS if k in got]
    for name in present[1:]:
        if not same_bits(got[name], got[present[0]], signed_zeros=signed):
            problems.append(f"{name} differs from {present[0]}")
    if again is not None and any(not same_bits(got[k], again[k]) for k in got):
        problems.append("not deterministic: a second run gave other bits")
    figures = {}
    if present:
        mine, theirs = got[present[0]], ref["from_indices"]
        exact = same_bits(mine, theirs, signed_zeros=signed)
        diff = max_diff(mine, theirs)
        scale = float(np.max(np.abs(np.asarray(theirs, np.float64)), initial=0.0))
        nan_same = np.array_equal(np.isnan(np.asarray(mine, np.float64)), np.isnan(np.asarray(theirs, np.float64)))
        if not overlap and not exact:
            problems.append(f"gradient not bit-exact without overlap (max diff {diff:g})")
        eps = float(finfo("float32" if dtype_name == "float32" else "float16").eps)
        if overlap and (diff > 4 * eps * max(scale, float(finfo("float32").tiny)) or not nan_same):
            problems.append(f"gradient max diff {diff:g} above 4 eps x {scale:g}" if nan_same
                            else "gradient NaNs differ from the reference's")
        figures = {"gradient_bit_exact": exact, "gradient_max_diff": diff}
    return problems, figures


# --- running it (imports JAX) ------------------------------------------------------


def program(functions: dict, attrs: dict, x_shape, eager: bool = False):
    """The binding's calls on one case: run(x, g, y, index) -> {name: result}, y and index the reference's.

    Each call reads the reference's forward results where it needs a forward's, so each is tested on its
    own. `functions`: call kind -> the binding's function (those it has). `eager`: no `jax.jit`.
    """
    import jax

    def run(x, g, y, index):
        out = {}
        if FORWARD in functions:
            out["y"], out["index"] = functions[FORWARD](x, **attrs)
        if FORWARD_OUTPUT in functions:
            out["y_only"] = functions[FORWARD_OUTPUT](x, **attrs)
        if BACKWARD_FROM_INDICES in functions:
            out["from_indices"] = functions[BACKWARD_FROM_INDICES](g, index, input_shape=x_shape, **attrs)
        if BACKWARD in functions:
            out["backward"] = functions[BACKWARD](g, x, y, **attrs)
        if BACKWARD_FROM_INPUT in functions:
            out["from_input"] = functions[BACKWARD_FROM_INPUT](g, x, **attrs)
        return out

    return run if eager else jax.jit(run)


def reference_program(attrs: dict, x_shape):
    """The reference binding's forward and gradient from indices: run(x, g) -> {y, index, from_indices}."""
    import jax

    from pool3d_pass.bindings import reference

    def run(x, g):
        y, index = reference.max_pooling_3d_forward(x, **attrs)
        return {"y": y, "index": index,
                "from_indices": reference.max_pooling_3d_backward_from_indices(g, index, input_shape=x_shape, **attrs)}

    return jax.jit(run)


def run(functions: dict, pool, dtype: str, *, eager: bool = False, departures=(), device=None,
        shapes=None, kinds=KINDS) -> dict:
    """The battery for one class on the default (or given) device: a verdict {"passed", "failed", "cases", ...}.

    `pool`: a `PoolConfig` (its layout and window); `dtype`: "f32", "bf16" or "f16"; `shapes`: NCDHW
    shapes (default `first_use_cases`). Stops at the first failing case, which the verdict names.
    """
    import jax

    dtype_name = ELEMENT_TYPES[dtype]
    layout = pool.data_format
    attrs = pool.attributes()
    overlap = any(s < k for k, s in zip(pool.kernel_size, pool.stride))
    count = 0
    half_vectors = layout == "NDHWC" and dtype in ("bf16", "f16") and overlap
    for shape in shapes or first_use_cases(pool.kernel_size, pool.stride, pool.padding, half_vectors=half_vectors):
        x_shape = shape if layout == "NCDHW" else (shape[0], *shape[2:], shape[1])
        ours, theirs = program(functions, attrs, x_shape, eager), reference_program(attrs, x_shape)
        for seed, kind in enumerate(kinds):
            x, g = inputs(shape, pool.kernel_size, pool.stride, pool.padding, layout, dtype_name, kind, seed)
            x, g = jax.device_put(x, device), jax.device_put(g, device)  # arrays of the device (eager calls too)
            ref = {k: np.asarray(v) for k, v in theirs(x, g).items()}
            y, index = jax.device_put(ref["y"], device), jax.device_put(ref["index"], device)
            got = {k: np.asarray(v) for k, v in ours(x, g, y, index).items()}
            problems, _ = compare(got, ref, overlap, dtype_name, departures=departures)
            count += 1
            if problems:
                return {"passed": False, "cases": count, "departures": list(departures),
                        "failed": f"{layout} {dtype} shape {tuple(x_shape)}, {kind} inputs: {'; '.join(problems)}"}
    return {"passed": True, "cases": count, "departures": list(departures)}
