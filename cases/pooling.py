"""The pooling problems every per-shape section runs (sections 1, 2 and 3), and their inputs.

A `Case` is one max pool: input shape (in its layout), kernel, stride,
symmetric padding (spatial axes only), layout ("NCDHW", "NDHWC" or "NCHW")
and dtype. Helpers give the JAX pool (`lax.reduce_window` max, which JAX
lowers to an explicit -inf `pad` plus an unpadded reduce_window when p > 0:
the "explicit-pad form" the numeric checks compare against), the kernel's
rank-5 view of the problem, the seeded inputs, and the same tensors in
PyTorch's layout.
"""

from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np
from jax import lax

from pool3d_pass.contract import pooled_extent

__all__ = ["Case", "FULL_CASES", "QUICK_CASES", "QUICK_TABLE_CASES", "np_dtype", "pool_fn", "kernel_attrs", "as_rank5",
           "inputs", "max_abs_diff"]


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

    @property
    def two_d(self) -> bool:
        return len(self.kernel) == 2

    def window(self, spatial: tuple[int, ...], fill: int = 1) -> tuple[int, ...]:
        """`spatial` extended to every axis of the layout with `fill` on N and C."""
        return (fill,) + spatial + (fill,) if self.channels_last else (fill, fill) + spatial

    def spatial_shape(self) -> tuple[int, ...]:
        return self.shape[1:-1] if self.channels_last else self.shape[2:]

    def out_spatial(self) -> tuple[int, ...]:
        return tuple(pooled_extent(n, k, s, p, p)
                     for n, k, s, p in zip(self.spatial_shape(), self.kernel, self.stride, self.padding))

    def out_shape(self) -> tuple[int, ...]:
        out_sp = self.out_spatial()
        if self.channels_last:
            return (self.shape[0],) + out_sp + (self.shape[-1],)
        return self.shape[:2] + out_sp


# More repeats for the channels-last cases: their calls take milliseconds, so a burst of another
# tenant's load moves one repeat a lot, and the min of more repeats is steadier.
NDHWC_REPEATS = 20

FULL_CASES = [
    Case((8, 32, 32, 64, 64), (2, 2, 2), (2, 2, 2), (0, 0, 0), repeats=7),
    Case((4, 32, 32, 64, 64), (3, 3, 3), (2, 2, 2), (1, 1, 1), repeats=7),
    Case((2, 64, 16, 56, 56), (3, 3, 3), (1, 1, 1), (1, 1, 1), repeats=7),
    Case((4, 16, 64, 64, 32), (3, 3, 3), (2, 2, 2), (1, 1, 1), layout="NDHWC", dtype="bfloat16", repeats=NDHWC_REPEATS),
    # The channels-last user's view (flax.linen.max_pool, most JAX models): f32 and bf16,
    # non-overlapping and overlapping windows, stride 1, a small channel count.
    Case((4, 16, 48, 48, 32), (2, 2, 2), (2, 2, 2), (0, 0, 0), layout="NDHWC", repeats=NDHWC_REPEATS),
    Case((2, 16, 40, 40, 64), (3, 3, 3), (2, 2, 2), (1, 1, 1), layout="NDHWC", repeats=NDHWC_REPEATS),
    Case((4, 16, 48, 48, 32), (2, 2, 2), (2, 2, 2), (0, 0, 0), layout="NDHWC", dtype="bfloat16", repeats=NDHWC_REPEATS),
    Case((2, 8, 32, 32, 64), (3, 3, 3), (1, 1, 1), (1, 1, 1), layout="NDHWC", dtype="bfloat16", repeats=NDHWC_REPEATS),
    Case((4, 16, 48, 48, 3), (2, 2, 2), (2, 2, 2), (0, 0, 0), layout="NDHWC", repeats=NDHWC_REPEATS),
    # A channel count that is no whole number of vectors, and a deep layer's (C3D's last
    # pools see 256-512 channels).
    Case((4, 8, 28, 28, 24), (3, 3, 3), (2, 2, 2), (1, 1, 1), layout="NDHWC", dtype="bfloat16", repeats=NDHWC_REPEATS),
    Case((4, 8, 28, 28, 256), (2, 2, 2), (2, 2, 2), (0, 0, 0), layout="NDHWC", repeats=NDHWC_REPEATS),
    Case((16, 64, 112, 112), (3, 3), (2, 2), (1, 1), layout="NCHW", repeats=10),
    Case((16, 64, 112, 112), (2, 2), (2, 2), (0, 0), layout="NCHW", repeats=10),
]

# `make bench-quick`'s layers (python -m bench.run --quick): four of the full run's shapes, 3-D, both layouts,
# f32 and bf16, k2 s2 and k3 s2 p1, so its figures read like the full run's rows.
QUICK_TABLE_CASES = [dataclasses.replace(FULL_CASES[i], repeats=5) for i in (1, 4, 5, 3)]

# Tiny shapes: the harness's and the device and compile checks' quick runs (checks/), not timings.
QUICK_CASES = [
    Case((2, 4, 8, 16, 16), (2, 2, 2), (2, 2, 2), (0, 0, 0), repeats=2),
    Case((2, 4, 8, 16, 16), (3, 3, 3), (2, 2, 2), (1, 1, 1), repeats=2),
    Case((1, 8, 8, 14, 14), (3, 3, 3), (1, 1, 1), (1, 1, 1), repeats=2),
    Case((2, 8, 16, 16, 8), (3, 3, 3), (2, 2, 2), (1, 1, 1), layout="NDHWC", dtype="bfloat16", repeats=2),
    Case((2, 8, 16, 16, 32), (2, 2, 2), (2, 2, 2), (0, 0, 0), layout="NDHWC", repeats=2),
    Case((1, 4, 8, 8, 3), (3, 3, 3), (1, 1, 1), (1, 1, 1), layout="NDHWC", repeats=2),
    Case((4, 8, 28, 28), (3, 3), (2, 2), (1, 1), layout="NCHW", repeats=2),
]


def describe(case: Case, repeats: int) -> dict:
    """The fields every section's JSON row starts with: which case, and how often it was timed."""
    return {
        "case": case.name,
        "shape": list(case.shape),
        "layout": case.layout,
        "dtype": case.dtype,
        "kernel_size": list(case.kernel),
        "stride": list(case.stride),
        "padding": list(case.padding),
        "repeats": repeats,
    }


def np_dtype(name: str):
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


# One pooling layer's two jobs (docs/benchmarks.md, section 1).
JOBS = ("gradient only", "forward + gradient")


def jax_job(job: str, pool):
    """The JAX function of a job: x, g -> dx ("gradient only", the primal unused) or x, g -> (y, dx)."""
    import jax

    if job == "gradient only":
        def grad_only(x, g):
            return jax.vjp(pool, x)[1](g)[0]
        return grad_only

    def forward_and_grad(x, g):
        y, vjp = jax.vjp(pool, x)
        return y, vjp(g)[0]
    return forward_and_grad


def pool_fn(case: Case):
    """The JAX max pool of the case: `lax.reduce_window` max with -inf init."""
    window = case.window(case.kernel)
    strides = case.window(case.stride)
    pads = tuple((p, p) for p in case.window(case.padding, 0))
    init = np.array(-np.inf, np_dtype(case.dtype))

    def pool(x):
        return lax.reduce_window(x, init, lax.max, window, strides, pads)

    return pool


def kernel_attrs(case: Case) -> dict:
    """Keyword attributes of the contract's calls for the case (2-D cases: a unit depth axis)."""
    if case.two_d:
        k, s, p = (1,) + case.kernel, (1,) + case.stride, (0,) + case.padding
    else:
        k, s, p = case.kernel, case.stride, case.padding
    return {"kernel_size": k, "stride": s, "padding": p,
            "data_format": "NDHWC" if case.channels_last else "NCDHW"}


def as_rank5(a, case: Case):
    """A 2-D case's NCHW array as (B, C, 1, H, W); 3-D arrays unchanged."""
    return a.reshape(a.shape[:2] + (1,) + a.shape[2:]) if case.two_d else a


def inputs(case: Case, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(x, g): standard normal input and pool-output cotangent in the case's dtype and layout."""
    rng = np.random.default_rng(seed)
    dtype = np_dtype(case.dtype)
    x = rng.standard_normal(case.shape, np.float32).astype(dtype)
    g = rng.standard_normal(case.out_shape(), np.float32).astype(dtype)
    return x, g


def max_abs_diff(a, b) -> float:
    return float(np.max(np.abs(np.asarray(a, np.float32) - np.asarray(b, np.float32))))


def tree_max_abs_diff(a, b) -> float:
    """The largest max_abs_diff over the leaves of two pytrees of the same structure (parameters)."""
    import jax

    return max(max_abs_diff(u, v) for u, v in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)))


class TorchPool:
    """The case in PyTorch: tensors in torch's layout and the aten max-pool ops.

    NDHWC data is handed to torch as an NCDHW tensor in `channels_last_3d`
    memory format (same bytes, no copy); results are turned back into the
    case's layout by `to_numpy`.
    """

    def __init__(self, case: Case, torch):
        self.case, self.torch = case, torch
        self.dtype = torch.bfloat16 if case.dtype == "bfloat16" else torch.float32
        self.k, self.s, self.p = list(case.kernel), list(case.stride), list(case.padding)
        self.dil = [1] * len(self.k)
        aten = torch.ops.aten
        if case.two_d:
            self.forward_with_indices = aten.max_pool2d_with_indices
            self.backward = aten.max_pool2d_with_indices_backward
            self.forward_plain = torch.nn.functional.max_pool2d
        else:
            self.forward_with_indices = aten.max_pool3d_with_indices
            self.backward = aten.max_pool3d_with_indices_backward
            self.forward_plain = torch.nn.functional.max_pool3d

    def tensor(self, a: np.ndarray):
        t = self.torch.from_numpy(np.asarray(a, np.float32)).to(self.dtype)
        return t.permute(0, 4, 1, 2, 3) if self.case.channels_last else t

    def to_numpy(self, t) -> np.ndarray:
        if self.case.channels_last:
            t = t.permute(0, 2, 3, 4, 1)
        return t.float().contiguous().numpy()

    def pool_with_indices(self, x):
        return self.forward_with_indices(x, self.k, self.s, self.p, self.dil, False)

    def pool(self, x):
        return self.forward_plain(x, self.k, self.s, self.p)

    def grad_from_indices(self, g, x, idx):
        return self.backward(g, x, self.k, self.s, self.p, self.dil, False, idx)
