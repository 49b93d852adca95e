"""A numpy transcription of the algorithm of nkilib's NKI kernel `max_pooling_3d_backward` (tests only).

Transcribed from `src/nkilib_src/nkilib/experimental/pooling/max_pooling_3d_backward.py`
of the public fork https://github.com/baonudesifeizhai/nki-library (commit 9f2490f), whose
signature and docstring match the kernel's API page (Neuron SDK 2.33,
https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/library/api/max-pooling-3d-backward.html)
word for word; the page itself links the same path on the `2.33` branch of
https://github.com/aws-neuron/nki-library. Not the kernel: what it computes,
step by step, so that its results can be held against the contract's
(docs/contract.md) here, without a Neuron device.

Kept, because the values depend on it:
- The mask sweep. Per tile, `ug` starts as the tile's `grad_output`, in the
  element type; for each window tap in row-major (td, th, tw) order, over the
  outputs whose tap lies in the real input: `eq = (input == output)` as 1/0 in
  the element type, `new = eq * ug`, `ug = ug - new`, and `new` goes into the
  f32 accumulator `gin`. So the first tap equal to the maximum takes the
  gradient, and `ug` is 0 after it (for a finite gradient).
- How `gin` is written: a tap none of whose cells an earlier tap of the tile
  touched COPIES `new` into `gin`; any other tap ADDS. `gin` is zero-filled
  first only if some tap adds or some cell of the tile's own box is touched by
  no tap.
- Tiles: each tile owns a box of the input, sweeps every output window that
  touches it (over the clipped input those windows cover), and stores only its
  box, converting f32 to the element type once. A tile's accumulator spans
  only the input its windows cover, yet the tile stores (and checks) its whole
  box: where cells at the box's edge lie in no window (after the last window,
  or in a gap between windows when stride > kernel_size and the axis is cut),
  the kernel reads past the accumulator, and this raises
  `OwnedBoxOutsideWindows`. The kernel cuts one axis
  (`tile=(axis, chunk)`: the axes before it into length 1, the axes after it
  whole) when the volume does not fit SBUF; the cut it picks depends on the
  chip's SBUF, so here it is a parameter (None: one tile, the kernel's choice
  whenever the volume fits).

Left out, as they move no value: the 128-lane partitioning of B*C, DMAs,
prefetching, the split of work items over logical NeuronCores, and the PE
transposes of channels-last data (taken as exact). Arithmetic is numpy's
IEEE 754 (0 * inf = NaN, -0 from 0 * negative, round-to-nearest-even
conversion), assumed to be the engines'; `make neuron-check` measures the
real kernel against this on a Trn2 host.
"""

from __future__ import annotations

import itertools

import numpy as np

SOURCE = (
    "https://github.com/baonudesifeizhai/nki-library/blob/9f2490f68c3ff0c222458095e169b83778fe59e5/"
    "src/nkilib_src/nkilib/experimental/pooling/max_pooling_3d_backward.py"
)


class OwnedBoxOutsideWindows(ValueError):
    """Input cells that no window covers at a tile's edge: the kernel indexes past its accumulator."""


def _triple(value) -> tuple[int, int, int]:
    return (int(value),) * 3 if np.isscalar(value) else tuple(int(v) for v in value)


def _to_ncdhw(a: np.ndarray, layout: str) -> np.ndarray:
    return np.moveaxis(a, -1, 1) if layout == "NDHWC" else a


def _from_ncdhw(a: np.ndarray, layout: str) -> np.ndarray:
    return np.moveaxis(a, 1, -1) if layout == "NDHWC" else a


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _boxes(extents, tile):
    """The owned boxes, as per-axis (lo, length), in input order."""
    if tile is None:
        lens = tuple(extents)
    else:
        axis, chunk = tile
        lens = tuple(1 if a < axis else (min(chunk, extents[a]) if a == axis else extents[a]) for a in range(3))
    starts = [range(0, extents[a], lens[a]) for a in range(3)]
    for lo in itertools.product(*starts):
        yield tuple((lo[a], min(lens[a], extents[a] - lo[a])) for a in range(3))


def _window_reach(lo, n, k, s, p, n_in, n_out):
    """Outputs [o_lo, o_hi] whose window meets input [lo, lo+n), and the real input [d_lo, d_hi) they cover."""
    o_lo = max(0, _ceil_div(lo + p - k + 1, s))
    o_hi = min(n_out - 1, (lo + n - 1 + p) // s)
    d_lo = max(0, o_lo * s - p)
    d_hi = min(n_in, o_hi * s - p + k)
    return o_lo, o_hi, d_lo, d_hi


def max_pooling_3d_backward(
    grad_output,
    input_tensor,
    output_tensor,
    kernel_size,
    stride=None,
    padding=0,
    data_format="NCDHW",
    output_format=None,
    *,
    tile=None,
):
    """grad_input in `data_format`, the element type of `input_tensor` (the kernel's result)."""
    output_format = output_format or data_format
    ks = _triple(kernel_size)
    st = _triple(kernel_size if stride is None else stride)
    pd = _triple(padding)
    x = _to_ncdhw(np.asarray(input_tensor), data_format)
    y = _to_ncdhw(np.asarray(output_tensor), output_format)
    g = _to_ncdhw(np.asarray(grad_output), output_format)
    dtype = x.dtype
    batch, channels = x.shape[:2]
    extents = x.shape[2:]
    out_extents = tuple((n + 2 * p - k) // s + 1 for n, k, s, p in zip(extents, ks, st, pd))
    planes = batch * channels
    x = x.reshape(planes, *extents)
    y = y.reshape(planes, *out_extents).astype(dtype)
    g = g.reshape(planes, *out_extents).astype(dtype)
    result = np.empty((planes, *extents), dtype)

    for box in _boxes(extents, tile):
        reach = [_window_reach(lo, n, k, s, p, n_in, n_out)
                 for (lo, n), k, s, p, n_in, n_out in zip(box, ks, st, pd, extents, out_extents)]
        for (lo, n), (o_lo, o_hi, d_lo, d_hi) in zip(box, reach):
            if o_lo > o_hi or lo < d_lo or lo + n > d_hi:
                # The kernel sizes a tile's accumulator by the input its windows cover and
                # then reads its whole owned box from it: past the end, at trace time.
                raise OwnedBoxOutsideWindows(
                    f"input cells [{lo}, {lo + n}) of an axis are owned by a tile whose windows cover [{d_lo}, {d_hi})"
                )
        outs = tuple(slice(o_lo, o_hi + 1) for o_lo, o_hi, _, _ in reach)
        data = tuple(slice(d_lo, d_hi) for _, _, d_lo, d_hi in reach)
        ug = g[(slice(None), *outs)].copy()
        omax = y[(slice(None), *outs)]
        window = x[(slice(None), *data)]
        data_shape = window.shape[1:]

        # The tap plan: per tap, the outputs (relative to the tile's) and input cells (relative to
        # its data window) where the tap lies in the real input; whether it is the first to touch them.
        taps, seen = [], np.zeros(data_shape, bool)
        for tap in itertools.product(*(range(k) for k in ks)):
            out_sel, in_sel = [], []
            for t, s, p, (o_lo, o_hi, d_lo, d_hi) in zip(tap, st, pd, reach):
                first = max(o_lo, _ceil_div(d_lo + p - t, s))
                last = min(o_hi, (d_hi - 1 + p - t) // s)
                if first > last:
                    break
                out_sel.append(slice(first - o_lo, last - o_lo + 1))
                start = first * s - p + t - d_lo
                in_sel.append(slice(start, start + (last - first) * s + 1, s))
            else:
                cells = tuple(in_sel)
                taps.append((tuple(out_sel), cells, not seen[cells].any()))
                seen[cells] = True
        own = tuple(slice(lo - d.start, lo - d.start + n) for (lo, n), d in zip(box, data))
        zero_fill = any(not first for _, _, first in taps) or not seen[own].all()

        gin = np.full((planes, *data_shape), np.nan, np.float32)  # unwritten cells would show
        if zero_fill:
            gin[...] = 0.0
        with np.errstate(invalid="ignore"):
            for out_sel, cells, first in taps:
                at_out = (slice(None), *out_sel)
                at_in = (slice(None), *cells)
                eq = (window[at_in] == omax[at_out]).astype(dtype)
                new = eq * ug[at_out]
                ug[at_out] = ug[at_out] - new
                if first:
                    gin[at_in] = new.astype(np.float32)
                else:
                    gin[at_in] = gin[at_in] + new.astype(np.float32)
        target = tuple(slice(lo, lo + n) for lo, n in box)
        result[(slice(None), *target)] = gin[(slice(None), *own)].astype(dtype)

    return _from_ncdhw(result.reshape(batch, channels, *extents), data_format)
