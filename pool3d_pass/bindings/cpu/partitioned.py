"""The CPU binding for programs compiled for several devices: partitionable by XLA's SPMD partitioner.

A bare custom call is replicated by the partitioner (an all-gather of every
operand). Wrapped in `jax.experimental.custom_partitioning` it partitions.
Every call of the contract (backward, forward, forward_output, backward_from_indices,
backward_from_input) is wrapped by the same machinery, `partitionable(call,
kernel, ...)`, and partitions the same way:

* batch and channel dimensions keep their sharding, each device runs the
  kernel on its shard, no communication. Every operand and result follows
  the batch/channel sharding of one operand (`deciding_operand`: the
  forward input where the call reads it, else the indices);
* pooled dimensions (D, H, W) are made whole first: windows cross shard
  borders, so a spatially sharded operand is all-gathered along them before
  the kernel runs (correct, and it costs that all-gather).

The Shardy rule of each call (contract/sharding.py, the one the pass writes
on neutral calls) names the same factors, with the pooled ones marked
need_replication, so propagation never shards them through the call.
`backward_from_indices` receives the forward input's shape as `input_shape`;
on each device the kernel gets its shard's shape.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from jax.experimental.custom_partitioning import custom_partitioning
from jax.sharding import NamedSharding, PartitionSpec

from pool3d_pass import caches
from pool3d_pass.bindings import cpu
from pool3d_pass.bindings.ffi_calls import contract_functions
from pool3d_pass.contract import CALLS
from pool3d_pass.contract.pool_config import PoolConfig
from pool3d_pass.contract.sharding import PARALLEL_DIMENSIONS, sharding_rule


def deciding_operand(call: str) -> int:
    """The operand whose batch/channel sharding every operand and result of `call` gets:
    the forward input where the call reads it, else the indices."""
    operands = CALLS[call].operands
    return operands.index("input") if "input" in operands else operands.index("indices")


def _spec(sharding, rank: int) -> tuple:
    spec = tuple(getattr(sharding, "spec", ()) or ())
    return spec + (None,) * (rank - len(spec))


def _ways(mesh, axis) -> int:
    """Into how many shards mesh axis (or axes) `axis` splits a dimension."""
    names = axis if isinstance(axis, tuple) else (axis,)
    ways = 1
    for name in names:
        ways *= mesh.shape[name]
    return ways


def parallel_only(spec: tuple, layout: str, shape: tuple | None = None, mesh=None) -> PartitionSpec:
    """`spec` with every pooled dimension made whole, and (given `shape` and `mesh`) every
    dimension that its axes do not divide evenly (the kernel's shards must be exact)."""
    keep = PARALLEL_DIMENSIONS[layout]

    def kept(dim, axis):
        if dim not in keep or axis is None:
            return None
        if shape is not None and shape[dim] % _ways(mesh, axis):
            return None
        return axis

    return PartitionSpec(*(kept(dim, axis) for dim, axis in enumerate(spec)))


@caches.bounded(256)
def partitionable(call: str, kernel: Callable, attributes: tuple) -> Callable:
    """`kernel` (the single-device function of `call`) with its attributes bound, partitionable.

    `attributes`: the kernel's keyword arguments as sorted (name, value) pairs,
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
        return kernel(*operands, **keywords)

    def sharding(mesh, arg_shapes) -> NamedSharding:
        deciding = arg_shapes[decides]
        return NamedSharding(mesh, parallel_only(_spec(deciding.sharding, 5), layout, tuple(deciding.shape), mesh))

    def results(value):
        return tuple(value for _ in spec.results) if tuple_result else value

    def partition(mesh, arg_shapes, result_shape):
        chosen = sharding(mesh, arg_shapes)
        local = keywords
        if spec.takes_input_shape:  # the kernel on one device sees its shard of the input
            local = {**keywords, "input_shape": tuple(chosen.shard_shape(tuple(keywords["input_shape"])))}
        lower = functools.partial(kernel, **local)
        return mesh, lower, results(chosen), tuple(chosen for _ in spec.operands)

    def infer_sharding_from_operands(mesh, arg_shapes, result_shape):
        return results(sharding(mesh, arg_shapes))

    partitioned.def_partition(
        partition=partition,
        infer_sharding_from_operands=infer_sharding_from_operands,
        sharding_rule=rule.einsum(),
        need_replication_factors=rule.need_replication,
    )
    return partitioned


def _implement(kind: str, operands: tuple, attributes: dict):
    """One call of the contract, partitionable: the CPU binding's function of `kind` with its attributes bound."""
    cpu.register()
    if attributes["output_format"] != attributes["data_format"]:
        raise NotImplementedError("the partitionable CPU binding needs output_format == data_format")
    keywords = PoolConfig.of(attributes).attributes()
    if "input_shape" in attributes:
        keywords["input_shape"] = tuple(int(v) for v in attributes["input_shape"])
    kernel = getattr(cpu, f"max_pooling_3d_{kind}")
    return partitionable(kind, kernel, tuple(sorted(keywords.items())))(*operands)


_CALLS = contract_functions(_implement)
max_pooling_3d_backward = _CALLS["max_pooling_3d_backward"]
max_pooling_3d_forward = _CALLS["max_pooling_3d_forward"]
max_pooling_3d_forward_output = _CALLS["max_pooling_3d_forward_output"]
max_pooling_3d_backward_from_indices = _CALLS["max_pooling_3d_backward_from_indices"]
max_pooling_3d_backward_from_input = _CALLS["max_pooling_3d_backward_from_input"]
