"""The CPU binding for programs compiled for several devices: partitionable by XLA's SPMD partitioner.

A bare custom call is replicated by the partitioner (an all-gather of every
operand). Wrapped in `jax.experimental.custom_partitioning` it partitions:

* batch and channel dimensions keep their sharding, each device runs the
  kernel on its shard, no communication;
* pooled dimensions (D, H, W) are made whole first: windows cross shard
  borders, so a spatially sharded operand is all-gathered along them before
  the kernel runs (correct, and it costs that all-gather).

The Shardy rule names the same factors, with the pooled ones marked
need_replication, so propagation never shards them through the call.
"""

from __future__ import annotations

import functools

from jax.experimental.custom_partitioning import custom_partitioning
from jax.sharding import NamedSharding, PartitionSpec

from pool3d_pass.bindings import cpu

# Factor names per layout: operands (grad_output, input, output) -> result.
SHARDING_RULES = {
    "NCDHW": "b c i j k, b c d h w, b c i j k -> b c d h w",
    "NDHWC": "b i j k c, b d h w c, b i j k c -> b d h w c",
}
POOLED_FACTORS = ("i", "j", "k", "d", "h", "w")
PARALLEL_AXES = {"NCDHW": (0, 1), "NDHWC": (0, 4)}


def _spec(sharding, rank: int) -> tuple:
    spec = tuple(getattr(sharding, "spec", ()) or ())
    return spec + (None,) * (rank - len(spec))


def parallel_only(spec: tuple, layout: str) -> PartitionSpec:
    """`spec` with every pooled dimension made whole."""
    keep = PARALLEL_AXES[layout]
    return PartitionSpec(*(axis if dim in keep else None for dim, axis in enumerate(spec)))


@functools.cache
def _partitioned_call(kernel_size, stride, padding, data_format, output_format):
    kernel = functools.partial(
        cpu.max_pooling_3d_backward,
        kernel_size=kernel_size,
        stride=stride,
        padding=padding,
        data_format=data_format,
        output_format=output_format,
    )

    @custom_partitioning
    def call(grad_output, input, output):  # noqa: A002
        return kernel(grad_output, input, output)

    def shardings(mesh, arg_shapes):
        # The input's batch/channel sharding decides; grad_output and output follow it.
        sharding = NamedSharding(mesh, parallel_only(_spec(arg_shapes[1].sharding, 5), data_format))
        return sharding, (sharding, sharding, sharding)

    def partition(mesh, arg_shapes, result_shape):
        result_sharding, arg_shardings = shardings(mesh, arg_shapes)
        return mesh, kernel, result_sharding, arg_shardings

    def infer_sharding_from_operands(mesh, arg_shapes, result_shape):
        return shardings(mesh, arg_shapes)[0]

    call.def_partition(
        partition=partition,
        infer_sharding_from_operands=infer_sharding_from_operands,
        sharding_rule=SHARDING_RULES[data_format],
        need_replication_factors=POOLED_FACTORS,
    )
    return call


def max_pooling_3d_backward(
    grad_output,
    input,  # noqa: A002 - the contract's operand name
    output,
    *,
    kernel_size,
    stride,
    padding,
    data_format="NCDHW",
    output_format=None,
):
    cpu.register()
    output_format = output_format or data_format
    if output_format != data_format:
        raise NotImplementedError("the partitionable CPU binding needs output_format == data_format")
    call = _partitioned_call(tuple(kernel_size), tuple(stride), tuple(padding), data_format, output_format)
    return call(grad_output, input, output)
