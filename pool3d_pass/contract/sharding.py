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
bindings hand `jax.experimental.custom_partitioning` its einsum-like string
(`ShardingRule.einsum`, `ShardingRule.keywords`).

The partitionable bindings split a pooled dimension with halo exchanges
(bindings/halos.py) where each shard's windows start at the same place
relative to its planes. Their rule (`partitioned_rule`) says so to Shardy:
where a pooled dimension's input extent is its output's times the stride
(N == O * s), the input's dimension is the compound factor `(k x)` of the
output's factor `k` and a stride factor `x` of size s (just `k` where s is
1), so a sharding of one carries to the other with shard borders on window
borders; the pooled dimensions without that property keep their separate
need_replication factors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pool3d_pass.contract import CALLS, INPUT, POOLED

BATCH, CHANNEL = "i", "j"
SPATIAL = {POOLED: ("k", "l", "m"), INPUT: ("n", "o", "p")}
NEED_REPLICATION = SPATIAL[POOLED] + SPATIAL[INPUT]
STRIDE = ("x", "y", "z")  # the minor part of an input dimension N == O * s: (k x), (l y), (m z)
# Where each layout keeps its batch and channel dimensions.
PARALLEL_DIMENSIONS = {"NCDHW": (0, 1), "NDHWC": (0, 4)}


def tensor_factors(shape: str, layout: str) -> tuple[str, ...]:
    """The factors of one rank-5 tensor (INPUT or POOLED shaped) in `layout`, dimension by dimension."""
    spatial = SPATIAL[shape]
    return (BATCH, *spatial, CHANNEL) if layout == "NDHWC" else (BATCH, CHANNEL, *spatial)


Dimension = str | tuple[str, ...]  # one factor, or a compound factor (major first)


def _spelled(dimension: Dimension) -> str:
    return dimension if isinstance(dimension, str) else "(" + " ".join(dimension) + ")"


@dataclass(frozen=True)
class ShardingRule:
    operands: tuple[tuple[Dimension, ...], ...]  # factors per operand
    results: tuple[tuple[Dimension, ...], ...]  # factors per result
    # the factors only compound dimensions name, with their sizes (custom_partitioning needs them)
    compound_sizes: tuple[tuple[str, int], ...] = field(default=())
    shardable: frozenset[str] = frozenset()  # pooled factors that may be sharded (partitioned_rule)

    @property
    def need_replication(self) -> tuple[str, ...]:
        """The pooled factors not `shardable`, in order of first appearance (custom_partitioning wants them so)."""
        order = [f for tensor in (*self.operands, *self.results) for f in tensor
                 if isinstance(f, str) and f in NEED_REPLICATION and f not in self.shardable]
        return tuple(dict.fromkeys(order))

    def einsum(self) -> str:
        """custom_partitioning's spelling, e.g. "i j n o p -> i j k l m, i j k l m" (forward, NCDHW)."""
        def tensors(group):
            return ", ".join(" ".join(_spelled(d) for d in t) for t in group)

        return tensors(self.operands) + " -> " + tensors(self.results)

    def keywords(self) -> dict:
        """custom_partitioning's keyword arguments beside the string: need_replication and compound sizes."""
        found = {"need_replication_factors": self.need_replication} if self.need_replication else {}
        return {**found, **dict(self.compound_sizes)}

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


def partitioned_rule(call: str, pool, input_spatial: Sequence[int]) -> ShardingRule:
    """The rule of `call` for the partitionable bindings (module docstring): `pool` a PoolConfig
    (one layout for every tensor), `input_spatial` the forward input's (D, H, W)."""
    layout = pool.data_format
    rule = sharding_rule(call, layout)
    pooled = pool.pooled_spatial(input_spatial)
    shared, sizes = {}, []  # input factor -> its dimension spelled with the pooled factor
    for axis, (n, o, s) in enumerate(zip(input_spatial, pooled, pool.stride)):
        if n != o * s:
            continue
        factor = SPATIAL[POOLED][axis]
        if s == 1:
            shared[SPATIAL[INPUT][axis]] = factor
        else:
            shared[SPATIAL[INPUT][axis]] = (factor, STRIDE[axis])
            sizes.append((STRIDE[axis], s))
    shardable = frozenset(SPATIAL[POOLED][axis] for axis in range(3) if SPATIAL[INPUT][axis] in shared)

    def respell(tensor):
        return tuple(shared.get(f, f) for f in tensor)

    return ShardingRule(tuple(map(respell, rule.operands)), tuple(map(respell, rule.results)), tuple(sizes),
                        shardable)
