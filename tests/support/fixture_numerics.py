"""Judging a fixture's results: its inputs full of ties, and the rewritten outputs against the spec's.

Shared by the fixture numerics on the CPU kernels (tests/numerics/test_numerics_fixtures.py)
and on the gpu binding in interpret mode (tests/bindings/gpu/test_gpu_fixtures.py):
f32 without overlapping windows bit-exact; with overlap within ``RTOL_OVERLAP``
of the output's magnitude; bf16/f16 within ``LOW_PRECISION_ULPS`` ulps; single-gradient
fixtures also against the float64 reference of their gradient.
"""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np

from oracles.contract_numpy import (
    assert_bit_exact,
    assert_within,
    check_pool_gradient,
    max_pool_grad_reference,
    output_shape,
    ulp,
)

LOW_PRECISION_ULPS = 4  # bf16/f16 outputs compared with each other, no reference
RTOL_OVERLAP = 1e-6  # of max |value| of an output, f32 fixtures with overlapping windows
NUMPY_DTYPES = {
    "float32": np.dtype(np.float32),
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float64": np.dtype(np.float64),
    "int64": np.dtype(np.int64),
    "int32": np.dtype(np.int32),
}




def element_types(entry) -> set[str]:
    types = set()
    for sas in entry["select_and_scatter"]:
        m = re.fullmatch(r"tensor<(?:\d+x)*(\w+)>", sas["operand_type"])
        types.add(m.group(1))
    return types


def overlapping(entry) -> bool:
    return any(
        s < k
        for sas in entry["select_and_scatter"]
        for k, s in zip(sas["window_dimensions"], sas["window_strides"])
    )


def window_of(entry):
    """(window, strides, padding pairs) of the fixture's single pool gradient."""
    (sas,) = entry["select_and_scatter"]
    pad = sas.get("pad") or {"low": [0] * len(sas["window_dimensions"]), "high": [0] * len(sas["window_dimensions"])}
    padding = [
        (lo + a_lo, hi + a_hi) for lo, hi, (a_lo, a_hi) in zip(pad["low"], pad["high"], sas["padding"])
    ]
    return sas["window_dimensions"], sas["window_strides"], padding


def reference_recipe(entry):
    """How to recompute the fixture's pool gradient from (args, results), or None.

    Returns ``fn(args, results) -> (x, g, grad_result)`` for fixtures whose
    pooled operand is ``args[0]`` itself (padded by JAX, no layers around it).
    """
    desc = entry["description"]
    if entry["negative"] or len(entry["select_and_scatter"]) != 1:
        return None
    (sas,) = entry["select_and_scatter"]
    explicit_pad_of_argument = (sas.get("pad") or {}).get("input_defined_by") == "block_argument"
    attribute_padded_argument = sas["operand_defined_by"] == "block_argument"  # JAX's TPU form
    if not (explicit_pad_of_argument or attribute_padded_argument):
        return None
    window, strides, padding = window_of(entry)

    def forward_max(x):
        g0 = np.zeros(output_shape(x.shape, window, strides, padding))
        return max_pool_grad_reference(x, g0, window, strides, padding).y.astype(x.dtype)

    if desc.startswith("grad(sum(pool(x)**2))"):
        # d/dy sum(y**2) = 2*y, exact in the element type (y is an input value).
        return lambda args, results: (args[0], (2 * forward_max(args[0]).astype(np.float64)).astype(args[0].dtype), results[0])
    if desc.startswith("grad(sum(pool(x)))"):
        return lambda args, results: (args[0], np.ones(output_shape(args[0].shape, window, strides, padding), args[0].dtype), results[0])
    if desc.startswith("jax.vjp(pool, x), return only vjp_fn(g)"):
        return lambda args, results: (args[0], args[1], results[0])
    if desc.startswith("jax.vjp(pool, x), return (y, vjp_fn(g))"):
        return lambda args, results: (args[0], args[1], results[1])
    return None


def make_args(entry, kind: str, seed: int) -> list[np.ndarray]:
    """Inputs full of ties, exactly representable in each argument's dtype."""
    rng = np.random.default_rng(seed)
    args = []
    for spec in entry["args"]:
        shape, dtype = tuple(spec["shape"]), NUMPY_DTYPES[spec["dtype"]]
        if np.issubdtype(dtype, np.integer):  # step counters, seeds
            a = rng.integers(0, 4, size=shape)
        elif kind == "smallint":
            a = rng.integers(-2, 3, size=shape).astype(np.float64)
        elif kind == "relu":
            a = np.maximum(rng.standard_normal(shape), 0.0)
        elif kind == "constant":
            a = np.full(shape, 1.0)
        else:  # pragma: no cover
            raise ValueError(kind)
        args.append(a.astype(dtype))
    return args


def check_against_the_spec(entry, args, judge, rewritten) -> None:
    """The rewritten outputs against the spec oracle's (`judge`); single-gradient fixtures also against
    the float64 reference of their gradient."""
    recipe = reference_recipe(entry)
    if recipe is not None:
        window, strides, padding = window_of(entry)
        x, g, grad_spec = recipe(args, judge)
        _, _, grad = recipe(args, rewritten)
        check_pool_gradient(x, g, window, strides, padding, grad_spec, grad)
    compare_outputs(entry, judge, rewritten)


def compare_outputs(entry, original: list[np.ndarray], rewritten: list[np.ndarray]) -> None:
    low_precision = bool(element_types(entry) & {"bf16", "f16"})
    overlap = overlapping(entry)
    assert len(original) == len(rewritten)
    for i, (a, b) in enumerate(zip(original, rewritten)):
        what = f"{entry['name']} result {i}"
        assert a.dtype == b.dtype and a.shape == b.shape, what
        if not overlap:
            assert_bit_exact(b, a, f"{what} (no overlapping windows)")
        elif low_precision and a.dtype in (np.dtype(ml_dtypes.bfloat16), np.dtype(np.float16)):
            tol = LOW_PRECISION_ULPS * ulp(np.maximum(np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64))), a.dtype)
            assert_within(b, a, tol, f"{what} ({a.dtype.name}, {LOW_PRECISION_ULPS} ulps)")
        else:
            scale = float(np.max(np.abs(a.astype(np.float64)), initial=0.0))
            assert_within(b, a, RTOL_OVERLAP * scale, f"{what} (overlap, rtol {RTOL_OVERLAP} of max |value|={scale})")


def elements_off(entry, judge: list[np.ndarray], got: list[np.ndarray]) -> int:
    """How many result elements of `got` fall outside the comparison's tolerance of `judge`."""
    low_precision = bool(element_types(entry) & {"bf16", "f16"})
    overlap = overlapping(entry)
    off = 0
    for a, b in zip(judge, got):
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        if not overlap:
            tol = 0.0
        elif low_precision and a.dtype in (np.dtype(ml_dtypes.bfloat16), np.dtype(np.float16)):
            tol = LOW_PRECISION_ULPS * ulp(np.maximum(np.abs(a64), np.abs(b64)), a.dtype)
        else:
            tol = RTOL_OVERLAP * float(np.max(np.abs(a64), initial=0.0))
        off += int(np.sum(~((np.abs(a64 - b64) <= tol) | (np.isnan(a64) & np.isnan(b64)))))
    return off
