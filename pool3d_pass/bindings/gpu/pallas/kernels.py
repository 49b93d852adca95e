"""Pallas kernels (Triton backend) for the pool3d contract: one window kernel, one gather kernel.

Every tensor is handed to a kernel flattened (a free reshape), and every
program of the 1-D launch grid handles BLOCK consecutive elements of one
result, in that result's layout order, so neighbouring threads touch
neighbouring elements (channels in NDHWC, output columns in NCDHW).

* `window_kernel` walks each output window's taps in row-major (td, th, tw)
  order and keeps the window's maximum `m` and its first tap equal to `m`.
  It returns `m` (the forward), the tap (the indices), or, given the forward's
  output `y`, the first real tap equal to `y` (the recompute backward's
  selection).
* `gather_kernel` is the gradient: each INPUT element visits, in a fixed
  order, the windows that can cover it (at most ceil(k/s) per axis), and adds
  the window's gradient where the window's index names this element's tap.
  No atomics, no two programs write one element, f32 sums in a fixed order.

The NaN rule is written with compares and selects only: Triton lowers
`lax.max` to `maxnumf`, which drops NaN (interpret mode would not show it).
Padding is masked out of every load, so it is never selected; a corrupt
index outside [0, K) names no element's tap and selects nothing.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

from pool3d_pass.contract.pool_config import HoldsPool, PoolConfig

# Elements per program (a power of 2, as Triton requires): one per thread. With
# 2 or 4 per thread ptxas spilled the k3 window kernels (gpu_compile_check.py).
BLOCK = 128
NUM_WARPS = 4
NUM_STAGES = 1
UNROLL_LIMIT = 64  # taps (or covering windows) unrolled; more run in a loop
# Interpret mode loops always: the same body, but XLA:CPU compiles a loop several
# times faster than 27 unrolled gathers (tests/bindings/gpu/test_pallas_kernels.py checks both).
INTERPRET_UNROLL_LIMIT = 0
MAX_GRID_X = 2**31 - 1  # CUDA's limit on gridDim.x
INT32_LIMIT = 2**31 - 1


@dataclasses.dataclass(frozen=True)
class Geometry(HoldsPool):
    """One call's shapes and attributes (`pool`, read as g.kernel_size etc.), as static Python ints."""

    batch: int
    channels: int
    in_spatial: tuple[int, int, int]
    out_spatial: tuple[int, int, int]
    pool: PoolConfig
    wide: bool = False  # int64 offsets (some tensor has 2^31 elements or more)

    @property
    def in_size(self) -> int:
        return self.batch * self.channels * math.prod(self.in_spatial)

    @property
    def out_size(self) -> int:
        return self.batch * self.channels * math.prod(self.out_spatial)

    @property
    def taps(self) -> int:
        return math.prod(self.kernel_size)

    @property
    def covering(self) -> tuple[int, int, int]:
        """How many windows can cover one input element, per axis (consecutive ones)."""
        return tuple(min(-(-k // s), o) for k, s, o in zip(self.kernel_size, self.stride, self.out_spatial))

    @property
    def index_dtype(self):
        return jnp.int64 if self.wide else jnp.int32


def needs_wide_offsets(in_size: int, out_size: int) -> bool:
    """int64 offsets where some flat index (plus one block of slack) reaches 2^31."""
    return max(in_size, out_size) + BLOCK > INT32_LIMIT


def grid_size(size: int) -> int:
    return pl.cdiv(size, BLOCK)


def launch_refusal(geometry: Geometry) -> str | None:
    """Why these kernels cannot be launched for `geometry` (None: they can)."""
    for size in (geometry.in_size, geometry.out_size):
        if grid_size(size) > MAX_GRID_X:
            return f"a launch grid of {grid_size(size)} blocks exceeds CUDA's {MAX_GRID_X}"
    return None


# --- flat offsets ----------------------------------------------------------
# Every operand of a division here is non-negative: truncating division
# (`lax.div`, `lax.rem`) is floor division, without jnp's sign fix-ups.


def _div(a, b: int):
    return a // b if isinstance(a, int) else lax.div(a, lax.full_like(a, b))


def _rem(a, b: int):
    return a % b if isinstance(a, int) else lax.rem(a, lax.full_like(a, b))


def _decode(flat, layout: str, channels: int, spatial):
    """(n, c, d, h, w) of flat positions `flat` in a `layout` tensor."""
    d_, h_, w_ = spatial
    if layout == "NDHWC":
        c, rest = _rem(flat, channels), _div(flat, channels)
        w, rest = _rem(rest, w_), _div(rest, w_)
        h, rest = _rem(rest, h_), _div(rest, h_)
        return _div(rest, d_), c, _rem(rest, d_), h, w
    w, rest = _rem(flat, w_), _div(flat, w_)
    h, rest = _rem(rest, h_), _div(rest, h_)
    d, rest = _rem(rest, d_), _div(rest, d_)
    return _div(rest, channels), _rem(rest, channels), d, h, w


def _encode(n, c, d, h, w, layout: str, channels: int, spatial):
    """Flat positions of (n, c, d, h, w) in a `layout` tensor."""
    d_, h_, w_ = spatial
    if layout == "NDHWC":
        return (((n * d_ + d) * h_ + h) * w_ + w) * channels + c
    return (((n * channels + c) * d_ + d) * h_ + h) * w_ + w


def _block_positions(size: int, itype):
    """This program's block (a contiguous slice), its flat positions, and which of them exist.

    Loads and stores at the block's own positions go through the slice, not a
    gather: a masked scatter with repeated indices is ill-defined in interpret
    mode, and a slice is one contiguous range on the GPU.
    """
    start = pl.program_id(0).astype(itype) * BLOCK
    flat = start + lax.iota(itype, BLOCK)
    return pl.ds(start, BLOCK), flat, flat < size


def _taps_loop(count: int, body, carry, unroll_limit: int):
    """body(t, carry) for t in range(count): unrolled when short, else a loop."""
    if count <= unroll_limit:
        for t in range(count):
            carry = body(t, carry)
        return carry
    return lax.fori_loop(0, count, body, carry)


def _unravel(t, sizes):
    """Row-major (a, b, c) of flat `t` over `sizes` (Python ints stay Python ints)."""
    _, b_, c_ = sizes
    return _div(t, b_ * c_), _rem(_div(t, c_), b_), _rem(t, c_)


# --- the window kernel: forward maxima, indices, or the selection of a given y ---


def _window_kernel(*refs, g: Geometry, given_y: bool, store_y: bool, store_index: bool, unroll_limit: int):
    refs = list(refs)
    x_ref = refs.pop(0)
    y_in_ref = refs.pop(0) if given_y else None
    y_ref = refs.pop(0) if store_y else None
    index_ref = refs.pop(0) if store_index else None
    itype = g.index_dtype

    block, flat, live = _block_positions(g.out_size, itype)
    n, c, od, oh, ow = _decode(flat, g.output_format, g.channels, g.out_spatial)
    origin = [o * s - p for o, s, p in zip((od, oh, ow), g.stride, g.padding)]
    if given_y:
        y = plgpu.load(y_in_ref.at[block], mask=live, other=0).astype(jnp.float32)

    def tap(t, carry):
        best, index = carry
        td, th, tw = _unravel(t, g.kernel_size)
        at = [o + k for o, k in zip(origin, (td, th, tw))]
        real = live
        for a, size in zip(at, g.in_spatial):
            real = real & (a >= 0) & (a < size)
        offset = _encode(n, c, *at, g.data_format, g.channels, g.in_spatial)
        v = plgpu.load(x_ref.at[jnp.where(real, offset, 0)], mask=real, other=0).astype(jnp.float32)
        t32 = jnp.asarray(t, jnp.int32)
        if given_y:
            # The first real tap equal to y (as floats: +0 == -0, NaN equals nothing).
            take = real & (v == y) & (index < 0)
            return best, jnp.where(take, t32, index)
        # IEEE maximum with NaN propagation, by compares and selects only.
        best_nan = best != best
        v_nan = real & (v != v)
        greater = real & (v > best)
        equal = real & (v == best)
        take = ~best_nan & (greater | (equal & (index < 0)))
        index = jnp.where(best_nan, index, jnp.where(v_nan, -1, jnp.where(take, t32, index)))
        # +0 beats -0: where equal zeros meet, their sum is -0 only if both are -0.
        zeros = equal & (best == 0)
        best = jnp.where(best_nan, best, jnp.where(v_nan | greater, v, jnp.where(zeros, best + v, best)))
        return best, index

    init = (jnp.full((BLOCK,), -jnp.inf, jnp.float32), jnp.full((BLOCK,), -1, jnp.int32))
    best, index = _taps_loop(g.taps, tap, init, unroll_limit)
    if store_y:
        plgpu.store(y_ref.at[block], best.astype(y_ref.dtype), mask=live)
    if store_index:
        plgpu.store(index_ref.at[block], index.astype(jnp.int16), mask=live)


# --- the gather kernel: the gradient from indices ----------------------------


def _gather_kernel(g_ref, index_ref, dx_ref, *, g: Geometry, unroll_limit: int):
    itype = g.index_dtype
    block, flat, live = _block_positions(g.in_size, itype)
    n, c, d, h, w = _decode(flat, g.data_format, g.channels, g.in_spatial)
    # The last window that can cover each element along each axis; the
    # covering windows are the (at most `g.covering`) ones just before it.
    shifted = [a + p for a, p in zip((d, h, w), g.padding)]
    last = [jnp.minimum(_div(q, s), size - 1) for q, s, size in zip(shifted, g.stride, g.out_spatial)]
    kd, kh, kw = g.kernel_size

    def window(j, acc):
        jd, jh, jw = _unravel(j, g.covering)
        o = [lo - jj for lo, jj in zip(last, (jd, jh, jw))]
        t = [q - oo * s for q, oo, s in zip(shifted, o, g.stride)]  # this element's tap in window o
        covers = live
        for oo, tt, k, size in zip(o, t, g.kernel_size, g.out_spatial):
            covers = covers & (oo >= 0) & (oo < size) & (tt < k)
        at = jnp.where(covers, _encode(n, c, *o, g.output_format, g.channels, g.out_spatial), 0)
        selected = plgpu.load(index_ref.at[at], mask=covers, other=-1).astype(jnp.int32)
        tap = ((t[0] * kh + t[1]) * kw + t[2]).astype(jnp.int32)
        hit = covers & (selected == tap)
        grad = plgpu.load(g_ref.at[at], mask=hit, other=0).astype(jnp.float32)
        return acc + jnp.where(hit, grad, 0.0)

    acc = _taps_loop(math.prod(g.covering), window, jnp.zeros((BLOCK,), jnp.float32), unroll_limit)
    # The sum started at +0, so a zero sum is +0 (IEEE); said explicitly, since
    # XLA folds the first `+0 + x` to `x` in interpret mode (x = -0 stays -0).
    acc = jnp.where(acc == 0, 0.0, acc)
    plgpu.store(dx_ref.at[block], acc.astype(dx_ref.dtype), mask=live)


# --- launching ---------------------------------------------------------------


def _unroll_limit(interpret: bool) -> int:
    return INTERPRET_UNROLL_LIMIT if interpret else UNROLL_LIMIT


def _compiler_params():
    return plgpu.CompilerParams(num_warps=NUM_WARPS, num_stages=NUM_STAGES)


def _x64(g: Geometry):
    """int64 values inside a kernel need x64 while it is traced."""
    return jax.enable_x64(True) if g.wide else _null()


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def window(x_flat, y_flat, g: Geometry, *, store_y: bool, store_index: bool, interpret: bool, name: str):
    """Run the window kernel on flat operands; returns the flat results asked for."""
    out_shape = []
    if store_y:
        out_shape.append(jax.ShapeDtypeStruct((g.out_size,), x_flat.dtype))
    if store_index:
        out_shape.append(jax.ShapeDtypeStruct((g.out_size,), jnp.int16))
    operands = (x_flat,) if y_flat is None else (x_flat, y_flat)
    kernel = functools.partial(
        _window_kernel, g=g, given_y=y_flat is not None, store_y=store_y, store_index=store_index,
        unroll_limit=_unroll_limit(interpret),
    )
    with _x64(g):
        results = pl.pallas_call(
            kernel,
            out_shape=tuple(out_shape),
            grid=(grid_size(g.out_size),),
            compiler_params=_compiler_params(),
            interpret=interpret,
            name=name,
        )(*operands)
    return tuple(results)


def gather(g_flat, index_flat, g: Geometry, *, dtype, interpret: bool, name: str):
    """Run the gather kernel: the flat gradient w.r.t. the input."""
    with _x64(g):
        return pl.pallas_call(
            functools.partial(_gather_kernel, g=g, unroll_limit=_unroll_limit(interpret)),
            out_shape=jax.ShapeDtypeStruct((g.in_size,), dtype),
            grid=(grid_size(g.in_size),),
            compiler_params=_compiler_params(),
            interpret=interpret,
            name=name,
        )(g_flat, index_flat)
