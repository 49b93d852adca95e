"""The Shardy sharding rule of each call of the contract: the one builder, in both spellings.

Every tensor of a call has a batch factor `i` and a channel factor `j`, shared
by all operands and results (the call is independent per batch and channel
element), and three pooled factors: `k, l, m` where it is shaped like the
pool's output, `n, o, p` where it is shaped like the forward input
(`contract.TENSOR_SHAPES`). The pooled factors need replication: windows cross
shard borders. E.g. the backward call in NCDHW:
`([i, j, k, l, m], [i, j, n, o, p], [i, j, k, l, m])->([i, j, n, o, p])`.

Two consumers spell it differently: the pass writes the `sdy.sharding_rule`
attribute of a neutral call (`ShardingRule.attribute`), and the partitionable
CPU binding hands `jax.experimental.custom_partitioning` its einsum-like string
(`ShardingRule.einsum`, `ShardingRule.need_replication`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pool3d_pass.contract import CALLS, INPUT, POOLED

BATCH, CHANNEL = "i", "j"
SPATIAL = {POOLED: ("k", "l", "m"), INPUT: ("n", "o", "p")}
NEED_REPLICATION = SPATIAL[POOLED] + SPATIAL[INPUT]
# Where each layout keeps its batch and channel dimensions.
PARALLEL_DIMENSIONS = {"NCDHW": (0, 1), "NDHWC": (0, 4)}


def tensor_factors(shape: str, layout: str) -> tuple[str, ...]:
    """The factors of one rank-5 tensor (INPUT or POOLED shaped) in `layout`, dimension by dimension."""
    spatial = SPATIAL[shape]
    return (BATCH, *spatial, CHANNEL) if layout == "NDHWC" else (BATCH, CHANNEL, *spatial)


@dataclass(frozen=True)
class ShardingRule:
    operands: tuple[tuple[str, ...], ...]  # factors per operand
    results: tuple[tuple[str, ...], ...]  # factors per result

    @property
    def need_replication(self) -> tuple[str, ...]:
        """The pooled factors, in order of first appearance (custom_partitioning wants them so)."""
        order = [f for tensor in (*self.operands, *self.results) for f in tensor if f in NEED_REPLICATION]
        return tuple(dict.fromkeys(order))

    def einsum(self) -> str:
        """custom_partitioning's spelling, e.g. "i j n o p -> i j k l m, i j k l m" (forward, NCDHW)."""
        return ", ".join(" ".join(t) for t in self.operands) + " -> " + ", ".join(" ".join(t) for t in self.results)

    def attribute(self, operand_shapes: Sequence[Sequence[int]], result_shapes: Sequence[Sequence[int]]) -> str:
        """The `#sdy.op_sharding_rule<...>` text for tensors of these shapes (with the factor sizes)."""
        sizes = {}
        for factors, shape in zip((*self.operands, *self.results), (*operand_shapes, *result_shapes), strict=True):
            sizes.update(zip(factors, shape))

        def mapping(tensors):
            return ", ".join("[" + ", ".join(t) + "]" for t in tensors)

        return (
            f"#sdy.op_sharding_rule<({mapping(self.operands)})->({mapping(self.results)}) "
            "{" + ", ".join(f"{f}={n}" for f, n in sorted(sizes.items())) + "} "
            "need_replication={" + ", ".join(NEED_REPLICATION) + "}, custom>"
        )


def sharding_rule(call: str, layout: str) -> ShardingRule:
    """The rule of the contract's `call` with every tensor in `layout` (data_format == output_format)."""
    spec = CALLS[call]
    return ShardingRule(
        tuple(tensor_factors(shape, layout) for shape in spec.operand_shapes),
        tuple(tensor_factors(shape, layout) for shape in spec.result_shapes),
    )
