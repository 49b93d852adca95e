"""Every FFI binding's calls for programs compiled for several devices: partitionable by XLA's SPMD partitioner.

A bare custom call is replicated by the partitioner (an all-gather of every
operand). Wrapped in `jax.experimental.custom_partitioning` it partitions.
One machinery serves every binding whose calls are single-device JAX
functions of the contract's signature (the CPU kernels; the gpu binding's
CUDA or Pallas kernels): `partitioned_calls(single_device)` gives the five
public functions, each `partitionable(call, single_device, attributes)` around the
binding's single-device function of that call. Every call partitions the
same way:

* batch and channel dimensions keep their sharding, each device runs the
  kernel on its shard, no communication. Every operand and result follows
  the batch/channel sharding of one operand (`deciding_operand`: the
  forward input where the call reads it, else the indices);
* pooled dimensions (D, H, W) are made whole first: windows cross shard
  borders, so a spatially sharded operand is all-gathered along them before
  the kernel runs (correct, and it costs that all-gather). So is a
  batch/channel dimension its shards do not divide evenly (the kernel's
  shards must be exact).

The callbacks work on the `HloSharding` XLA hands over
(`decode_shardings=False`), not on a PartitionSpec of a mesh, so the same
code serves Shardy and GSPMD, whatever mesh the program was written
against. Under Shardy the call's rule (contract/sharding.py, the one the
pass writes on neutral calls) names the same factors, with the pooled ones
marked need_replication, so propagation never shards them through the
call; under GSPMD `infer_sharding_from_operands` says the same.
`backward_from_indices` receives the forward input's shape as
`input_shape`; on each device the kernel gets its shard's shape.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np
from jax._src.sharding_impls import GSPMDSharding  # the sharding of an HloSharding (jax_compat.JAX_INTERNALS)
from jax.experimental.custom_partitioning import custom_partitioning
from jaxlib import xla_client as xc

from pool3d_pass import caches
from pool3d_pass.bindings.ffi_calls import contract_functions
from pool3d_pass.contract import CALLS
from pool3d_pass.contract.pool_config import PoolConfig
from pool3d_pass.contract.sharding import PARALLEL_DIMENSIONS, sharding_rule

RANK = 5  # every tensor of the contract's calls (N, C and three pooled dimensions)


def deciding_operand(call: str) -> int:
    """The operand whose batch/channel sharding every operand and result of `call` gets:
    the forward input where the call reads it, else the indices."""
    operands = CALLS[call].operands
    return operands.index("input") if "input" in operands else operands.index("indices")


def parallel_only(hlo: xc.HloSharding, layout: str, shape: tuple[int, ...]) -> xc.HloSharding:
    """`hlo` (a rank-5 tensor's sharding) with every pooled dimension made whole, and every
    dimension its tiles do not divide evenly: those tiles become replicas.

    The device array is transposed so that the kept dimensions come first, in
    order, and the dropped ones (with any replication already there) are
    folded into one trailing replicated dimension: each device keeps its
    batch/channel block.
    """
    if hlo.is_manual() or hlo.is_unreduced():  # per-shard code gets the single-device call (splicing/per_shard.py)
        raise ValueError(f"pool3d: cannot partition a call whose operand sharding is {hlo}")
    if hlo.is_replicated() or hlo.is_maximal() or not hlo.is_tiled():
        return xc.HloSharding.replicate()
    dims = list(hlo.tile_assignment_dimensions())
    extra = len(dims) - RANK  # trailing subgroup dimensions
    kinds = hlo.subgroup_types()
    if extra and not hlo.replicate_on_last_tile_dim() and any(k != xc.OpSharding.Type.REPLICATED for k in kinds):
        raise ValueError(f"pool3d: cannot partition a call whose operand sharding is {hlo} "
                         "(a manual or unreduced subgroup)")
    keep = PARALLEL_DIMENSIONS[layout]
    kept = [d for d in range(RANK) if d in keep and dims[d] > 1 and shape[d] % dims[d] == 0]
    if not kept:
        return xc.HloSharding.replicate()
    devices = np.asarray(hlo.tile_assignment_devices(), dtype=np.int64).reshape(dims)
    order = kept + [d for d in range(len(dims)) if d not in kept]
    replicas = math.prod(dims) // math.prod(dims[d] for d in kept)
    tiles = [dims[d] if d in kept else 1 for d in range(RANK)]
    if replicas == 1:
        return xc.HloSharding.subgroup_with_device_ordering(devices.transpose(order).reshape(tiles))
    return xc.HloSharding.subgroup_with_device_ordering(devices.transpose(order).reshape(tiles + [replicas]),
                                                        [xc.OpSharding.Type.REPLICATED])


@caches.bounded(256)
def partitionable(call: str, single_device: Callable, attributes: tuple) -> Callable:
    """`single_device` (a binding's single-device function of `call`) with its attributes bound, partitionable.

    `attributes`: the function's keyword arguments as sorted (name, value) pairs,
    hashable (`input_shape` the global one where the call takes it). Same
    layout for every tensor (data_format == output_format).
    """
    spec = CALLS[call]
    decides = deciding_operand(call)
    keywords = dict(attributes)
    layout = keywords["data_format"]
    tuple_result = len(spec.results) > 1
    rule = sharding_rule(call, layout)

    @custom_partitioning
    def partitioned(*operands):
        return single_device(*operands, **keywords)

    def sharding(arg_shapes) -> GSPMDSharding:
        deciding = arg_shapes[decides]
        given = deciding.sharding
        hlo = given._to_xla_hlo_sharding(RANK)
        return GSPMDSharding(given._device_assignment, parallel_only(hlo, layout, tuple(deciding.shape)))

    def results(value):
        return tuple(value for _ in spec.results) if tuple_result else value

    def partition(mesh, arg_shapes, result_shape):
        chosen = sharding(arg_shapes)
        local = keywords
        if spec.takes_input_shape:  # the kernel on one device sees its shard of the input
            local = {**keywords, "input_shape": tuple(chosen.shard_shape(tuple(keywords["input_shape"])))}
        lower = functools.partial(single_device, **local)
        return mesh, lower, results(chosen), tuple(chosen for _ in spec.operands)

    def infer_sharding_from_operands(mesh, arg_shapes, result_shape):
        return results(sharding(arg_shapes))

    partitioned.def_partition(
        partition=partition,
        infer_sharding_from_operands=infer_sharding_from_operands,
        sharding_rule=rule.einsum(),
        need_replication_factors=rule.need_replication,
        decode_shardings=False,
    )
    return partitioned


def partitioned_calls(single_device: Callable[..., Callable], binding: str, *,
                      takes_settings: bool = False) -> dict[str, Callable]:
    """{"max_pooling_3d_<kind>": function} for every call of the contract, each partitionable.

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
        return partitionable(kind, single_device(kind, *settings), tuple(sorted(keywords.items())))(*operands)

    return contract_functions(implement, takes_settings=takes_settings)
