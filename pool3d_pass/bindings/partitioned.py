"""Every FFI binding's calls for programs compiled for several devices: partitionable by XLA's SPMD partitioner.

A bare custom call is replicated by the partitioner (an all-gather of every
operand). Wrapped in `jax.experimental.custom_partitioning` it partitions.
One machinery serves every binding whose calls are single-device JAX
functions of the contract's signature (the CPU kernels; the gpu binding's
CUDA or Pallas kernels): `partitioned_calls(single_device)` gives the five
public functions, each `partitionable(call, kernels, attributes)` around the
binding's single-device functions. Every call partitions the same way, by
one sharding for all its tensors taken from one operand (`deciding_operand`:
the forward input where the call reads it, else the indices;
`kernel_sharding`):

* batch and channel dimensions keep their sharding; each device runs the
  kernel on its rows, no communication (an uneven split's padded rows
  compute rows XLA drops);
* a split pooled dimension (D, H, W) stays split where each shard's windows
  start at the same place relative to its planes (bindings/halos.py): each
  device runs the kernel for the windows it owns, with the few planes of its
  neighbours those windows read (a halo, `lax.ppermute`), or none where the
  windows stay inside the shards (bindings/halo_exchange.py); its results
  are the unsharded call's bits. Elsewhere (shards that do not line up with
  the windows) the dimension is made whole first: correct, at the cost of
  gathering it.

Each time XLA partitions a call, its callback logs one remark (INFO,
logger `pool3d_pass`, "pool3d partitioning: <call> <attributes> on <input
shape>: ..."): how each device runs the call, with the halos it exchanges,
or what was regrouped or gathered and why. (The callback runs inside XLA's
compile and knows the call, not the program: the rewrite's own remark
before it names the program and the source location.)

The callbacks work on the `HloSharding` XLA hands over
(`decode_shardings=False`), not on a PartitionSpec of a mesh, so the same
code serves Shardy and GSPMD, whatever mesh the program was written
against; the halo exchange runs on a mesh of its own, one axis over the
program's devices in partition order, on which the sharding's tile
assignment names each device's neighbours. Under Shardy the call's rule
(`contract.sharding.partitioned_rule`) lets propagation carry a pooled
dimension's sharding between input- and output-shaped tensors where their
shards line up; under GSPMD `infer_sharding_from_operands` says the same.
`backward_from_indices` receives the forward input's shape as
`input_shape`; on each device the kernel gets its block's shape.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from jax._src.sharding_impls import GSPMDSharding  # the sharding of an HloSharding (jax_compat.JAX_INTERNALS)
from jax.experimental.custom_partitioning import custom_partitioning
from jaxlib import xla_client as xc
from jaxlib.mlir import ir

from pool3d_pass import caches
from pool3d_pass.bindings import halos
from pool3d_pass.bindings.ffi_calls import contract_functions
from pool3d_pass.bindings.halo_exchange import Topology, per_shard_function, spatial_dimension
from pool3d_pass.bindings.halos import plan_axis
from pool3d_pass.contract import CALLS
from pool3d_pass.contract.pool_config import PoolConfig, split
from pool3d_pass.contract.sharding import PARALLEL_DIMENSIONS, partitioned_rule

logger = logging.getLogger("pool3d_pass")

RANK = 5  # every tensor of the contract's calls (N, C and three pooled dimensions)


def deciding_operand(call: str) -> int:
    """The operand whose sharding decides the one every operand and result of `call` gets
    (`kernel_sharding`): the forward input where the call reads it, else the indices."""
    operands = CALLS[call].operands
    return operands.index("input") if "input" in operands else operands.index("indices")


def _retiled(hlo: xc.HloSharding, tiles: dict[int, int]) -> xc.HloSharding:
    """`hlo` tiled `tiles[d]` ways along each dimension d of `tiles` (a divisor of its tiles there,
    each new tile the union of adjacent old ones) and whole along every other: the device array's
    kept parts come first, in order, and the rest (with any replication already there) is folded
    into one trailing replicated dimension. Each device keeps its block of the kept dimensions."""
    tiles = {d: t for d, t in tiles.items() if t > 1}
    if not tiles:
        return xc.HloSharding.replicate()
    dims = list(hlo.tile_assignment_dimensions())
    devices = np.asarray(hlo.tile_assignment_devices(), dtype=np.int64).reshape(dims)
    split_dims = []  # each dimension as (kept part, rest)
    for d, n in enumerate(dims):
        kept = tiles.get(d, 1)
        assert n % kept == 0, (hlo, tiles)
        split_dims += [kept, n // kept]
    devices = devices.reshape(split_dims)
    kept_axes = [2 * d for d in range(len(dims))][:RANK]
    order = kept_axes + [a for a in range(len(split_dims)) if a not in kept_axes]
    shape = [tiles.get(d, 1) for d in range(RANK)]
    replicas = math.prod(dims) // math.prod(shape)
    devices = devices.transpose(order).reshape(shape + ([replicas] if replicas > 1 else []))
    if replicas == 1:
        return xc.HloSharding.subgroup_with_device_ordering(devices)
    return xc.HloSharding.subgroup_with_device_ordering(devices, [xc.OpSharding.Type.REPLICATED])


def _tiling(hlo: xc.HloSharding) -> list[int] | None:
    """Tiles per dimension of a rank-5 tensor's sharding (None: not tiled, nothing to keep)."""
    if hlo.is_manual() or hlo.is_unreduced():  # per-shard code gets the single-device call (splicing/per_shard.py)
        raise ValueError(f"pool3d: cannot partition a call whose operand sharding is {hlo}")
    if hlo.is_replicated() or hlo.is_maximal() or not hlo.is_tiled():
        return None
    dims = list(hlo.tile_assignment_dimensions())
    if len(dims) > RANK and not hlo.replicate_on_last_tile_dim() and any(
            k != xc.OpSharding.Type.REPLICATED for k in hlo.subgroup_types()):
        raise ValueError(f"pool3d: cannot partition a call whose operand sharding is {hlo} "
                         "(a manual or unreduced subgroup)")
    return dims


def _parallel_dimensions(dims: list[int], layout: str) -> list[int]:
    """The batch/channel dimensions kept sharded: all that are split. Every (batch, channel) row is
    pooled alone, so an uneven split's padded rows (the last shard's tail) only compute rows XLA drops."""
    return [d for d in PARALLEL_DIMENSIONS[layout] if dims[d] > 1]


def shard_shape(shape, hlo: xc.HloSharding) -> tuple[int, ...]:
    """One device's block of a tensor of `shape` under `hlo`, as XLA tiles it (ceil; the last shard padded)."""
    if hlo.is_replicated() or not hlo.is_tiled():
        return tuple(shape)
    dims = hlo.tile_assignment_dimensions()
    return tuple(-(-n // t) for n, t in zip(shape, dims))


@dataclass(frozen=True)
class KernelSharding:
    """How a call runs on the devices: one sharding for all its tensors, the split pooled dimensions'
    halo plans (tensor dimension -> plan), and, for the split pooled dimensions whose shards do not line
    up with the windows, what was done instead and why: regrouped into fewer shards, or made whole."""

    hlo: xc.HloSharding
    plans: dict = field(default_factory=dict)
    regrouped: tuple[str, ...] = ()
    gathered: tuple[str, ...] = ()


def kernel_sharding(hlo: xc.HloSharding, pool: PoolConfig, input_shape: tuple[int, ...]) -> KernelSharding:
    """The sharding a call's kernel gets from its deciding operand's `hlo` (the input's shape
    `input_shape`): every split batch/channel dimension, and each split pooled dimension where a halo
    exchange serves (bindings/halos.py). Where the shards do not line up with the windows, adjacent
    shards are regrouped into the most shards that do (XLA gathers each group: the smallest exchange
    that makes the halos serve), else the dimension is made whole; either says why."""
    dims = _tiling(hlo)
    if dims is None:
        return KernelSharding(xc.HloSharding.replicate())
    layout = pool.data_format
    tiles = {d: dims[d] for d in _parallel_dimensions(dims, layout)}
    windows = pool.pooled_spatial(split(input_shape, layout)[2])
    plans, regrouped, gathered = {}, [], []
    for axis in range(3):
        dim = spatial_dimension(layout, axis)
        if dims[dim] == 1:
            continue
        geometry = (input_shape[dim], windows[axis], pool.kernel_size[axis], pool.stride[axis], pool.padding[axis])
        reason = None
        for count in (t for t in range(dims[dim], 1, -1) if dims[dim] % t == 0):
            plan = plan_axis(axis, count, *geometry)
            if isinstance(plan, str):
                reason = reason or plan
                continue
            plans[dim], tiles[dim] = plan, count
            if count < dims[dim]:
                regrouped.append(f"{plan.name}'s {dims[dim]} shards regrouped into {count} ({reason})")
            break
        else:
            gathered.append(reason)
    return KernelSharding(_retiled(hlo, tiles), plans, tuple(regrouped), tuple(gathered))


def describe(call: str, pool: PoolConfig, input_shape, chosen: KernelSharding, devices: int) -> str:
    """The remark of one partitioned call: how each device runs it."""
    config = (f"{call} {pool.data_format} kernel_size={list(pool.kernel_size)} stride={list(pool.stride)} "
              f"padding={list(pool.padding)} on {'x'.join(map(str, input_shape))}")
    details = []
    if chosen.plans:
        details.append(halos.describe(call, [chosen.plans[d] for d in sorted(chosen.plans)]))
    details += chosen.regrouped
    if chosen.gathered:
        details.append("gathered whole first, as no halo exchange serves (" + "; ".join(chosen.gathered) + ")")
    if not details:
        details.append("no pooled dimension split, no communication")
    return f"{config}: partitioned over {devices} devices, per shard: " + "; ".join(details)


def _global_input_shape(call: str, arg_shapes, keywords: dict) -> tuple[int, ...]:
    operands = CALLS[call].operands
    if "input" in operands:
        return tuple(arg_shapes[operands.index("input")].shape)
    return tuple(int(n) for n in keywords["input_shape"])


@caches.bounded(256)
def partitionable(call: str, kernels: tuple, attributes: tuple) -> Callable:
    """The binding's single-device function of `call` with its attributes bound, partitionable.

    `kernels`: (kind, single-device function) for every call kind of the
    binding (a split pooled dimension's gradient may run other kinds per
    shard); `attributes`: the function's keyword arguments as sorted (name,
    value) pairs, hashable (`input_shape` the global one where the call takes
    it). Same layout for every tensor (data_format == output_format).
    """
    spec = CALLS[call]
    decides = deciding_operand(call)
    kernel_of = dict(kernels)
    single_device = kernel_of[call]
    keywords = dict(attributes)
    pool = PoolConfig.of(keywords)
    layout = pool.data_format
    tuple_result = len(spec.results) > 1

    @custom_partitioning
    def partitioned(*operands):
        return single_device(*operands, **keywords)

    def choose(arg_shapes) -> tuple[GSPMDSharding, KernelSharding]:
        deciding = arg_shapes[decides]
        given = deciding.sharding
        chosen = kernel_sharding(given._to_xla_hlo_sharding(RANK), pool, _global_input_shape(call, arg_shapes, keywords))
        return GSPMDSharding(given._device_assignment, chosen.hlo), chosen

    def results(value):
        return tuple(value for _ in spec.results) if tuple_result else value

    def partition(mesh, arg_shapes, result_shape):
        sharding, chosen = choose(arg_shapes)
        devices = len(sharding._device_assignment)
        logger.info("pool3d partitioning: %s", describe(call, pool, _global_input_shape(call, arg_shapes, keywords),
                                                          chosen, devices))
        if chosen.plans:
            topology = Topology(chosen.hlo, sharding._device_assignment)
            lower = per_shard_function(call, kernel_of, keywords, chosen.plans, topology)
            return topology.mesh, lower, results(sharding), tuple(sharding for _ in spec.operands)
        local = keywords
        if spec.takes_input_shape:  # the kernel on one device sees its shard of the input
            local = {**keywords, "input_shape": shard_shape(keywords["input_shape"], chosen.hlo)}
        lower = functools.partial(single_device, **local)
        return mesh, lower, results(sharding), tuple(sharding for _ in spec.operands)

    def infer_sharding_from_operands(mesh, arg_shapes, result_shape):
        return results(choose(arg_shapes)[0])

    def rule(mesh, operand_types, result_types):
        """The Shardy rule for the call's shapes: pooled dimensions that line up with their windows shardable."""
        types = [*operand_types, *result_types]
        names = [*spec.operands, *spec.results]
        shape = ir.RankedTensorType(types[names.index("input" if "input" in names else "grad_input")]).shape
        chosen = partitioned_rule(call, pool, split(shape, layout)[2])
        return chosen.einsum(), chosen.keywords()

    partitioned.def_partition(
        partition=partition,
        infer_sharding_from_operands=infer_sharding_from_operands,
        sharding_rule=rule,
        decode_shardings=False,
    )
    return partitioned


def partitioned_calls(single_device: Callable[..., Callable], binding: str, *,
                      takes_settings: bool = False) -> dict[str, Callable]:
    """{kind: function} for every call of the contract, each partitionable.

    `single_device(kind)` is the binding's single-device function of `kind`,
    asked for whenever a call is traced (so it may pin what serves then);
    with `takes_settings`, each function takes the pass run's `settings=`
    (as `contract_function`'s do), handed on as `single_device(kind, settings)`.
    `binding` names the binding in errors.
    """

    def implement(kind: str, operands: tuple, attributes: dict, *settings):
        if attributes["output_format"] != attributes["data_format"]:
            raise NotImplementedError(f"the partitionable {binding} binding needs output_format == data_format")
        keywords = PoolConfig.of(attributes).attributes()
        if "input_shape" in attributes:
            keywords["input_shape"] = tuple(int(v) for v in attributes["input_shape"])
        kernels = tuple((other, single_device(other, *settings)) for other in CALLS)
        return partitionable(kind, kernels, tuple(sorted(keywords.items())))(*operands)

    return contract_functions(implement, takes_settings=takes_settings)
