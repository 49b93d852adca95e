"""Window geometry: from a select_and_scatter window of any rank to the kernel's 3-D one.

Pure arithmetic on shapes and attributes, no MLIR. A dimension with window 1,
stride 1 and no padding is *parallel*; the others are *pooled*. Pooled
dimensions within a span of at most three adjacent dimensions map onto the
kernel's (D, H, W) (a parallel dimension inside the span becomes a unit
window), padded in front with unit dimensions; parallel dimensions before them fold into the kernel's
batch and channels (NCDHW), those after them into channels-last C (NDHWC).
Folding is a row-major reshape, so no data moves. `fold_to_kernel` is pure, so
its results are cached (`caches.bounded`): a model repeats a few geometries.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pool3d_pass import caches
from pool3d_pass.contract import MAX_WINDOW_ELEMENTS, SPATIAL_RANK, pooled_extent
from pool3d_pass.contract.pool_config import PoolConfig


class GeometryMismatch(ValueError):
    """The window cannot be mapped onto the kernel; the message says why."""


@dataclass(frozen=True)
class Window:
    """A select_and_scatter / reduce_window window with its effective padding."""

    dimensions: tuple[int, ...]
    strides: tuple[int, ...]
    padding: tuple[tuple[int, int], ...]  # (low, high) per dimension

    def is_parallel(self, dim: int) -> bool:
        return self.dimensions[dim] == 1 and self.strides[dim] == 1 and self.padding[dim] == (0, 0)


@dataclass(frozen=True)
class KernelGeometry:
    """How one pool gradient is expressed as a call of the 3-D kernel."""

    pool: PoolConfig  # the call's attributes; its padding is the symmetric part, folded into the kernel
    input_shape: tuple[int, ...]  # kernel view of the (remainder-padded) input, rank 5
    output_shape: tuple[int, ...]  # kernel view of grad_output and output, rank 5
    remainder_low: tuple[int, ...]  # explicit -inf padding left outside the kernel,
    remainder_high: tuple[int, ...]  # per dimension of the original operand

    @property
    def has_remainder(self) -> bool:
        return any(self.remainder_low) or any(self.remainder_high)


def _pooled_span(window: Window) -> tuple[int, int]:
    """[begin, end) of the dimensions the kernel pools: from the first pooled one to the last.

    A parallel dimension between two pooled ones joins them as a unit window
    (kernel 1, stride 1, no padding), so (1, 1, k, 1, k) still maps onto the kernel.
    """
    pooled = [d for d in range(len(window.dimensions)) if not window.is_parallel(d)]
    if not pooled:
        raise GeometryMismatch("window pools no dimension (every window is 1x1x...)")
    if len(pooled) > SPATIAL_RANK:
        raise GeometryMismatch(
            f"{len(pooled)} pooled dimensions {pooled}; the kernel pools at most {SPATIAL_RANK}"
        )
    begin, end = pooled[0], pooled[-1] + 1
    if end - begin > SPATIAL_RANK:
        raise GeometryMismatch(
            f"pooled dimensions {pooled} are not contiguous: they span {end - begin} dimensions, "
            f"the kernel pools {SPATIAL_RANK} adjacent ones"
        )
    return begin, end


@caches.bounded(1024)
def fold_to_kernel(
    input_shape: tuple[int, ...],
    output_shape: tuple[int, ...],
    window: Window,
    *,
    allow_low_remainder: bool = True,
) -> KernelGeometry:
    """Map `window` over `input_shape` (unpadded) onto the kernel, or raise GeometryMismatch.

    `allow_low_remainder=False` refuses padding whose low side exceeds its high
    side: the explicit pad that would carry the excess comes first in every
    window and could be selected where the original never selects padding.
    """
    rank = len(input_shape)
    if not (len(output_shape) == len(window.dimensions) == len(window.strides) == len(window.padding) == rank):
        raise GeometryMismatch("window attributes do not match the operand rank")
    if any(size == 0 for size in input_shape + output_shape):
        raise GeometryMismatch("zero-sized tensor")
    if any(lo < 0 or hi < 0 for lo, hi in window.padding):
        raise GeometryMismatch(f"negative padding {list(window.padding)}")
    begin, end = _pooled_span(window)
    pooled = range(begin, end)

    padding = list(window.padding)
    for d in pooled:
        low, high = padding[d]
        k, s, n = window.dimensions[d], window.strides[d], input_shape[d]
        n_out = pooled_extent(n, k, s, low, high)
        if n_out != output_shape[d] or n_out < 1:
            raise GeometryMismatch(
                f"gradient shape {list(output_shape)} does not match window over {list(input_shape)}"
            )
        last_start = (n_out - 1) * s - low
        if low >= k or last_start >= n:
            raise GeometryMismatch(
                f"padding {list(window.padding[d])} of dimension {d} puts a whole window of {k} in padding"
            )
        # High padding beyond the last window's reach is never read: drop it (not
        # below the low side's, which keeps the symmetric part), so that no
        # explicit pad grows with an absurd padding attribute.
        padding[d] = (low, min(high, max(last_start + k - n, low)))
    window_elements = math.prod(window.dimensions[d] for d in pooled)
    if window_elements > MAX_WINDOW_ELEMENTS:
        raise GeometryMismatch(
            f"window has {window_elements} elements; the kernel allows at most {MAX_WINDOW_ELEMENTS}"
        )

    symmetric = [min(padding[d]) for d in range(rank)]
    remainder_low = tuple(padding[d][0] - symmetric[d] for d in range(rank))
    remainder_high = tuple(padding[d][1] - symmetric[d] for d in range(rank))
    if not allow_low_remainder and any(remainder_low):
        raise GeometryMismatch(
            f"padding {list(window.padding)} is larger on the low side than the high side"
        )
    kernel_input = [input_shape[d] + remainder_low[d] + remainder_high[d] for d in range(rank)]

    for d in range(rank):
        if d in pooled:
            expected = pooled_extent(kernel_input[d], window.dimensions[d], window.strides[d], symmetric[d], symmetric[d])
        else:
            expected = input_shape[d]
        if expected != output_shape[d] or expected < 1:
            raise GeometryMismatch(
                f"gradient shape {list(output_shape)} does not match window over {list(input_shape)}"
            )

    unit = SPATIAL_RANK - len(pooled)
    kernel_size = (1,) * unit + tuple(window.dimensions[d] for d in pooled)
    stride = (1,) * unit + tuple(window.strides[d] for d in pooled)
    padding = (0,) * unit + tuple(symmetric[d] for d in pooled)
    spatial_in = (1,) * unit + tuple(kernel_input[d] for d in pooled)
    spatial_out = (1,) * unit + tuple(output_shape[d] for d in pooled)

    leading = input_shape[:begin]
    trailing = input_shape[end:]
    if trailing:
        data_format = "NDHWC"
        batch, channels = math.prod(leading), math.prod(trailing)
        in5 = (batch, *spatial_in, channels)
        out5 = (batch, *spatial_out, channels)
    else:
        data_format = "NCDHW"
        batch = math.prod(leading[:-1]) if leading else 1
        channels = leading[-1] if leading else 1
        in5 = (batch, channels, *spatial_in)
        out5 = (batch, channels, *spatial_out)

    return KernelGeometry(
        pool=PoolConfig(kernel_size, stride, padding, data_format),
        input_shape=in5,
        output_shape=out5,
        remainder_low=remainder_low,
        remainder_high=remainder_high,
    )
