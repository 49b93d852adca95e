"""Each device's part of a call whose pooled dimensions are split over devices: halos exchanged, then the kernel.

`per_shard_function(call, kernels, keywords, plans, topology)` is the
function XLA's partitioner lowers for every device (the `lower_fn` of
`custom_partitioning`'s partition callback, bindings/partitioned.py). Per
split dimension (`halos.AxisHalo`) it fetches the planes the shard's
windows need from its neighbours (`lax.ppermute` over the devices in the
order of the kernel's sharding, `Topology`), calls the binding's
single-device kernel on the extended block with padding 0 along that
dimension, and keeps the shard's own part of the result. Dimensions are
extended one after another, each on the block already extended along the
previous ones, so corner planes reach diagonal neighbours in two steps.

Planes outside the volume (below its first plane, above its last, and the
padded tail of an uneven last shard) are filled with what the kernel never
selects, so every shard computes the unsharded call's bits:

* forward: `-inf` (a window's maximum is unchanged). Only a window whose
  real elements are all `-inf` could select such a plane; below the volume
  it would, so those windows' indices are set to their first real tap, the
  contract's choice (`_first_real_taps`);
* `backward` (recompute): NaN in the input, which equals no maximum;
* every gradient: windows outside the volume get a zero gradient, so
  whatever their maximum or index selects, they add nothing (their maxima
  and indices are left as they come);
* `backward_from_input`: `-inf` and zero gradients where no padding lies
  below the volume; with padding there (an all `-inf` window could pick a
  filler plane) the shard runs `forward` on its extended block, settles the
  indices as above and scatters them with `backward_from_indices`.

A gradient shard gathers every window that touches its planes (its own and
its neighbours' halo windows) and sums each plane's contributions itself in
the kernel's window order, so nothing is added across devices: the result
is the unsharded kernel's, bit for bit, in every element type.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping

import numpy as np

from pool3d_pass.bindings.halos import AxisHalo
from pool3d_pass.contract import (
    BACKWARD,
    BACKWARD_FROM_INDICES,
    BACKWARD_FROM_INPUT,
    CALLS,
    FORWARD,
    FORWARD_OUTPUT,
)

AXIS = "pool3d_devices"  # the one mesh axis of the lowering: every device of the program, in partition order


def spatial_dimension(layout: str, axis: int) -> int:
    """The tensor dimension of pooled axis `axis` (0, 1, 2: D, H, W) in `layout`."""
    return axis + (1 if layout == "NDHWC" else 2)


class Topology:
    """Where each device's shard lies along each dimension of the kernel's sharding (an `HloSharding`)."""

    def __init__(self, hlo, device_assignment) -> None:
        from jax.sharding import Mesh

        dims = list(hlo.tile_assignment_dimensions())
        self.devices = np.asarray(hlo.tile_assignment_devices(), dtype=np.int64).reshape(dims)
        self.count = len(device_assignment)
        # Positions in this mesh are partition ids, the numbers the sharding's tile assignment holds.
        self.mesh = Mesh(np.array(device_assignment, dtype=object), (AXIS,))

    def tiles(self, dim: int) -> int:
        return int(self.devices.shape[dim])

    def coordinate(self, dim: int):
        """This device's shard index along `dim` (traced)."""
        import jax.numpy as jnp
        from jax import lax

        table = np.zeros(self.count, dtype=np.int32)
        table[self.devices.ravel()] = np.indices(self.devices.shape)[dim].ravel()
        return jnp.asarray(table)[lax.axis_index(AXIS)]

    def pairs(self, dim: int, shift: int) -> list[tuple[int, int]]:
        """(source, target) partition ids sending shard c's data to shard c + shift along `dim`."""
        n = self.tiles(dim)
        if shift > 0:
            sources, targets = np.arange(0, n - shift), np.arange(shift, n)
        else:
            sources, targets = np.arange(-shift, n), np.arange(0, n + shift)
        src = np.take(self.devices, sources, axis=dim).ravel()
        dst = np.take(self.devices, targets, axis=dim).ravel()
        return [(int(s), int(t)) for s, t in zip(src, dst, strict=True)]


def _neighbour_planes(x, dim: int, count: int, direction: int, shard: int, topology: Topology) -> list:
    """The `count` planes next to this shard on side `direction` (-1 below, +1 above), in order,
    as pieces from the shards 1, 2, ... away (zeros where there is no such shard)."""
    from jax import lax

    pieces, j = [], 1
    while count > 0:
        take = min(count, shard)
        start = shard - take if direction < 0 else 0
        piece = lax.slice_in_dim(x, start, start + take, axis=dim)
        if j < topology.tiles(dim):
            piece = lax.ppermute(piece, AXIS, perm=topology.pairs(dim, -direction * j))
        pieces.append(piece)
        count -= take
        j += 1
    return pieces[::-1] if direction < 0 else pieces


def extend(x, dim: int, below: int, above: int, *, shard: int, extent: int, fill, topology: Topology,
           past_end: bool = True):
    """This shard's block along `dim` (`shard` planes) widened to planes [c*shard - below, (c+1)*shard + above)
    of the whole (`extent` planes); a negative `above` drops the shard's own last planes. Planes below the
    whole are `fill`, and those past its end (a halo from beyond the last shard, an uneven last shard's
    padded tail) where `past_end` (the caller knows whether anything reads them); `fill` None: none filled."""
    import jax.numpy as jnp
    from jax import lax

    core = x if above >= 0 else lax.slice_in_dim(x, 0, shard + above, axis=dim)
    pieces = []
    if below > 0:
        pieces += _neighbour_planes(x, dim, below, -1, shard, topology)
    pieces.append(core)
    if above > 0:
        pieces += _neighbour_planes(x, dim, above, +1, shard, topology)
    out = lax.concatenate(pieces, dim) if len(pieces) > 1 else core
    outside_possible = below > 0 or past_end and shard * topology.tiles(dim) + max(above, 0) > extent
    if fill is None or not outside_possible:
        return out
    first = topology.coordinate(dim) * shard - below
    position = first + lax.broadcasted_iota(jnp.int32, out.shape, dim)
    return jnp.where((position >= 0) & (position < extent), out, jnp.asarray(fill, out.dtype))


def _first_real_taps(y, indices, plans: Mapping[int, AxisHalo], origins: Mapping[int, object], halo_windows: bool,
                     pool, layout: str):
    """`indices` with every window whose maximum is -inf given its first real tap (never padding).

    Only a split dimension's first ceil(p / s) windows of the volume can
    differ: there filler planes stand where the unsharded kernel has padding.
    With `halo_windows` the shard's windows start with its lower neighbours'
    (`grad_halo`); `origins[dim]`: the global index of its first window along
    `dim` (traced). Along every axis the first real tap of
    window o is max(0, p - o*s); its offset in the window is row-major.
    """
    import jax.numpy as jnp
    from jax import lax

    _, kh, kw = pool.kernel_size
    tap_strides = (kh * kw, kw, 1)
    for dim, plan in plans.items():
        if plan.padding == 0:
            continue
        count = min(indices.shape[dim], -(-plan.padding // plan.stride) + (plan.grad_halo[0] if halo_windows else 0))
        slab = tuple(slice(0, count) if d == dim else slice(None) for d in range(indices.ndim))
        offset = jnp.zeros(indices[slab].shape, jnp.int32)
        for axis in range(3):
            d = spatial_dimension(layout, axis)
            s, p = pool.stride[axis], pool.padding[axis]
            o = lax.broadcasted_iota(jnp.int32, offset.shape, d) + origins.get(d, 0)
            offset = offset + jnp.maximum(0, p - o * s) * tap_strides[axis]
        settled = jnp.where(y[slab] == -jnp.inf, offset.astype(indices.dtype), indices[slab])
        indices = indices.at[slab].set(settled)
    return indices


def per_shard_function(call: str, kernels: Mapping[str, Callable], keywords: dict, plans: Mapping[int, AxisHalo],
                       topology: Topology) -> Callable:
    """The function each device runs for `call` with the pooled dimensions `plans` split (tensor dim -> plan).

    `kernels[kind]`: the binding's single-device function of each call kind;
    `keywords`: the call's attributes (`input_shape` the global one where the call takes it).
    """
    import jax.numpy as jnp
    from jax import lax

    from pool3d_pass.contract.pool_config import PoolConfig

    pool = PoolConfig.of(keywords)
    layout = pool.data_format
    padding = list(pool.padding)
    for plan in plans.values():
        padding[plan.axis] = 0  # the volume's padding is the filler planes at its edges
    local = {**pool.attributes(), "padding": tuple(padding)}
    spec = CALLS[call]
    edge_padding = any(plan.padding > 0 for plan in plans.values())

    def widen(value, halo: str, fill, pooled: bool):
        """`value` with the halo `halo` names; planes outside the volume `fill`. The forward's maxima and
        indices need no fill: the windows outside the volume get a zero gradient, which adds nothing."""
        for dim, plan in plans.items():
            below, above = getattr(plan, halo)
            past_end = plan.windows_past_end_touch_it if pooled else plan.reads_past_end
            value = extend(value, dim, below, above, fill=fill, topology=topology, past_end=past_end,
                           shard=plan.shard_windows if pooled else plan.shard_extent,
                           extent=plan.windows if pooled else plan.extent)
        return value

    def own_planes(grad_input):
        """The shard's planes of a gradient computed over `grad_extent` planes from `input_halo[0]` below."""
        for dim, plan in plans.items():
            below = plan.input_halo[0]
            have = grad_input.shape[dim] - below
            kept = lax.slice_in_dim(grad_input, below, below + min(have, plan.shard_extent), axis=dim)
            if have < plan.shard_extent:  # planes no window reaches (stride > kernel): zero
                shape = list(kept.shape)
                shape[dim] = plan.shard_extent - have
                kept = lax.concatenate([kept, jnp.zeros(shape, kept.dtype)], dim)
            grad_input = kept
        return grad_input

    def origins(halo_windows: bool):
        return {dim: topology.coordinate(dim) * plan.shard_windows - (plan.grad_halo[0] if halo_windows else 0)
                for dim, plan in plans.items()}

    def forward(x):
        x = widen(x, "forward_halo", -jnp.inf, pooled=False)
        if call == FORWARD_OUTPUT:
            return kernels[FORWARD_OUTPUT](x, **local)
        y, indices = kernels[FORWARD](x, **local)
        if edge_padding:
            indices = _first_real_taps(y, indices, plans, origins(False), False, pool, layout)
        return y, indices

    def input_shape_of(widened_grad):
        """The kernel's input shape for windows `widened_grad`: each split dimension's `grad_extent`."""
        shape = list(keywords["input_shape"])
        for d in range(len(shape)):
            if d not in (spatial_dimension(layout, a) for a in range(3)):
                shape[d] = widened_grad.shape[d]  # batch, channels: this device's shard
        for dim, plan in plans.items():
            shape[dim] = plan.grad_extent
        return tuple(shape)

    def from_indices(g, indices):
        g = widen(g, "grad_halo", 0, pooled=True)
        indices = widen(indices, "grad_halo", None, pooled=True)
        return own_planes(kernels[BACKWARD_FROM_INDICES](g, indices, input_shape=input_shape_of(g), **local))

    def recompute(g, x, y):
        g = widen(g, "grad_halo", 0, pooled=True)
        y = widen(y, "grad_halo", None, pooled=True)
        x = widen(x, "input_halo", jnp.nan, pooled=False)
        return own_planes(kernels[BACKWARD](g, x, y, **local))

    def from_input(g, x):
        g = widen(g, "grad_halo", 0, pooled=True)
        x = widen(x, "input_halo", -jnp.inf, pooled=False)
        if not edge_padding:
            return own_planes(kernels[BACKWARD_FROM_INPUT](g, x, **local))
        y, indices = kernels[FORWARD](x, **local)
        indices = _first_real_taps(y, indices, plans, origins(True), True, pool, layout)
        return own_planes(kernels[BACKWARD_FROM_INDICES](g, indices, input_shape=tuple(x.shape), **local))

    body = {FORWARD: forward, FORWARD_OUTPUT: forward, BACKWARD_FROM_INDICES: from_indices, BACKWARD: recompute,
            BACKWARD_FROM_INPUT: from_input}[call]
    assert len(spec.operands) == body.__code__.co_argcount, (call, spec.operands)
    return functools.update_wrapper(lambda *operands: body(*operands), body)

