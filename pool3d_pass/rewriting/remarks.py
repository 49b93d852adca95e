"""The text of a rewrite's remark: the configuration, what replaced it, what decided it, and which kernels serve."""

from __future__ import annotations

from pool3d_pass.bindings.base import Binding
from pool3d_pass.calibration.request import Decision
from pool3d_pass.contract.pool_config import PoolConfig
from pool3d_pass.options import RECOMPUTE, BindingSettings, PassOptions
from pool3d_pass.rewriting.strategy import BARE_INDICES, FORWARD_REPLACED, FUSED, Plan


def serving(options: PassOptions, binding: Binding | None, settings: BindingSettings) -> str:
    """", <platform> binding: <which kernels>" for a binding that says (Binding.describe), else ""."""
    if options.neutral or binding is None or binding.describe is None:
        return ""
    return f", {binding.platform} binding: {binding.describe(settings)}"


def decided(decision: Decision | None) -> str:
    """", decided by <what>" (this machine's calibration and when, a stored run, the prior, an explicit strategy).

    Empty for neutral output (nothing is decided there). A refusal's remark says the same in its reason
    (`Decision.reason`).
    """
    if decision is None or not decision.source:
        return ""
    return f", {decision.note()}"


def partitioning(options: PassOptions, *, per_shard: bool) -> str:
    """How a program compiled for several devices runs the call (options.mesh), else ""."""
    mesh = options.mesh
    if options.neutral or mesh is None:
        return ""
    axes = ", ".join(f"{name}={size}" for name, size in mesh.shape.items())
    if per_shard:
        return (f", per shard (a shard_map body) on {mesh.size} devices [{axes}]: the single-device kernel "
                "on each device's block, what the body computes (a halo is the body's own exchange)")
    return (f", partitioned over {mesh.size} devices [{axes}]: the kernel runs on each device's shard, split "
            "pooled dimensions with halo exchanges (how each call is split is logged when XLA partitions it)")


def _configuration(pool: PoolConfig) -> str:
    return f"{pool.data_format} kernel_size={list(pool.kernel_size)} stride={list(pool.stride)} padding={list(pool.padding)}"


def describe(match, plan: Plan, forward) -> str:
    g = match.geometry
    parts = [
        _configuration(g.pool),
        f"{match.element_type}",
        {
            FORWARD_REPLACED: "indices strategy: forward max-pool replaced by the forward call, gradient from its indices",
            FUSED: "indices strategy: no forward max-pool before it in its block, one fused call from the input",
            BARE_INDICES: "indices strategy: no forward max-pool before it in its block, forward call inserted, "
            "gradient from its indices",
            RECOMPUTE: "forward max-pool reused" if forward is not None else "forward max-pool inserted",
        }[plan.kind],
    ]
    if plan.note:
        parts.append(f"recompute strategy: {plan.note}")
    if g.has_remainder:
        parts.append(f"asymmetric padding remainder low={list(g.remainder_low)} high={list(g.remainder_high)} kept as -inf pad")
    return ", ".join(parts)


def describe_forward_alone(pool) -> str:
    return f"{_configuration(pool.geometry.pool)}, {pool.element_type}, forward-output call"
