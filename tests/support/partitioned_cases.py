"""The shared partitioning wrapper on N host CPU devices, under Shardy and GSPMD (see test_partitioned.py).

`python partitioned_cases.py N` (N = 2 or 4) runs every call kind of the
contract through the partitionable bindings (bindings/partitioned.py) under
both of XLA's partitioners (`jax_use_shardy_partitioner` True, then False),
and prints one JSON line per case: sharding_cases.record's fields, the
partitioner, the shapes of the operands each kernel call gets (one call per
device program, on its shard), and the pass's remarks logged for the
compile. Cases: through `pool3d_pass.jit`, batch-sharded arrays (N = 2:
over one axis; N = 4: batch x channel over a 2x2 mesh):

* `backward` (recompute), the layer pair (`forward` + `backward_from_indices`),
  `backward_from_input` (a bare gradient), `forward_output` (a forward pool
  alone), each a pool of the CPU binding's kernels;
* (N = 4) a spatially sharded forward + gradient (the pooled dimension made
  whole), and `pmap` of a pool gradient under `enable()` (from JAX 0.10 a
  pmap is a shard_map: the single-device kernel per shard);
* (N = 2) the gpu binding's partitionable functions themselves under `jax.jit` with
  its Pallas kernels in interpret mode (plain StableHLO that runs here), the
  interpret setting passed to the partitionable functions alone (none in the
  environment): XLA's partitioner lowers each shard's kernel later, so the
  binding must have bound it into each shard's kernel;
* (N = 2) the compile in flight: every cache of pool3d_pass cleared (and the
  garbage collected) between the rewrite and XLA's compile of the rewritten
  module, as another thread's `jax.clear_caches()` or an eviction would:
  only the compile's own list of spliced lowerings keeps their
  custom_partitioning callbacks (held weakly by JAX) alive for XLA's
  partitioner.
"""

from __future__ import annotations

import os
import sys

DEVICES = int(sys.argv[1]) if len(sys.argv) > 1 else 2
os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count={DEVICES}"

import gc
import json
import logging

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import pool3d_pass
from oracles.compiled_hlo import kernel_operand_shapes
from pool3d_pass.integration import module_rewrite
from pool3d_pass.options import BindingSettings

from sharding_cases import (
    Plain,
    bare_pool_grad,
    max_pool,
    pool_forward_and_grad,
    pool_grad,
    record,
    through_enable,
)

# JAX 0.10 made pmap a jit of shard_map; 0.9's pmap compiles replicas, which the pass leaves alone.
PMAP_IS_SHARD_MAP = tuple(int(part) for part in jax.__version__.split(".")[:2]) >= (0, 10)
ATTRIBUTES = dict(kernel_size=(3, 3, 3), stride=(2, 2, 2), padding=(1, 1, 1), data_format="NCDHW")


class Remarks(logging.Handler):
    """The pass's log lines that are remarks (the rewrite's, and the partitioning callbacks': how each call
    was split over the devices), collected per case."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, entry):
        message = entry.getMessage()
        partitioning = "partitioned over" in message and "per shard:" in message
        if "remark:" in message or partitioning or entry.levelno >= logging.WARNING:  # a failed rewrite or compile warns
            self.lines.append(f"{entry.levelname}: {message}")

    def take(self) -> list[str]:
        lines, self.lines = self.lines, []
        return lines


def forward_alone(x):
    return max_pool(x)


def gpu_layer(x):
    """The gpu binding's partitionable forward + from-indices, as a layer would call them."""
    from pool3d_pass.bindings.gpu import partitioned

    settings = BindingSettings(gpu_kernels="pallas", gpu_interpret=True)
    y, indices = partitioned.max_pooling_3d_forward(x, **ATTRIBUTES, settings=settings)
    return y, partitioned.max_pooling_3d_backward_from_indices(2 * y - 1, indices, input_shape=x.shape,
                                                               **ATTRIBUTES, settings=settings)


def reference_layer(x):
    from pool3d_pass.bindings import reference

    y, indices = reference.max_pooling_3d_forward(x, **ATTRIBUTES)
    return y, reference.max_pooling_3d_backward_from_indices(2 * y - 1, indices, input_shape=x.shape, **ATTRIBUTES)


def gpu_binding_case(name, x) -> dict:
    """The gpu binding's partitionable calls, Pallas in interpret mode, against the reference binding."""
    plain = Plain(reference_layer, x)
    lowered = jax.jit(gpu_layer).lower(x)  # traced here; each shard's kernel is lowered by XLA, later
    compiled = lowered.compile()
    result = record(name, None, plain, compiled, compiled(x))
    hlo = compiled.as_text()
    result["custom_partitioning_left"] = hlo.count("CustomSPMDPartitioning")
    result["triton_calls"] = hlo.count("xla.gpu.triton")
    return result


def caches_cleared_case(name, x) -> dict:
    """pool_forward_and_grad on `x`, every pool3d_pass cache emptied between the rewrite and the compile."""
    original = module_rewrite.rewrite_for_platform

    def rewrite_then_clear(*args, **kwargs):
        rewritten = original(*args, **kwargs)
        pool3d_pass.clear_caches()  # the lowerings, their callbacks, the partitionable wrappers
        gc.collect()
        return rewritten

    module_rewrite.rewrite_for_platform = rewrite_then_clear
    try:
        compiled = pool3d_pass.jit(pool_forward_and_grad).lower(x).compile()
    finally:
        module_rewrite.rewrite_for_platform = original
    return record(name, "auto", Plain(pool_forward_and_grad, x), compiled, compiled(x))


def run_cases(partitioner: str, remarks: Remarks) -> list[dict]:
    devices = np.array(jax.devices())
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.integers(-3, 4, (4, 4, 8, 8, 8)).astype(np.float32))  # ties everywhere
    if DEVICES == 2:
        mesh = Mesh(devices, ("data",))
        split = P("data")
    else:
        mesh = Mesh(devices.reshape(2, 2), ("data", "model"))
        split = P("data", "model")
    xs = jax.device_put(x, NamedSharding(mesh, split))
    xd = jax.device_put(x, NamedSharding(Mesh(devices, ("data",)), P(None, None, "data")))
    cases = [
        ("backward", "recompute", pool_grad, xs),
        ("forward_and_backward_from_indices", None, pool_forward_and_grad, xs),
        ("backward_from_input", None, bare_pool_grad, xs),
        ("forward_output", None, forward_alone, xs),
    ]
    if DEVICES == 4:  # (test_sharding.py has spatial sharding on 8 devices, under Shardy)
        cases.append(("spatially_sharded_forward_and_backward_from_indices", None, pool_forward_and_grad, xd))
    results = []
    for name, strategy, fun, arg in cases:
        compiled = pool3d_pass.jit(fun, **({"strategy": strategy} if strategy else {})).lower(arg).compile()
        result = record(name, strategy or "auto", Plain(fun, arg), compiled, compiled(arg))
        result["operand_shapes"] = kernel_operand_shapes(compiled.as_text())
        result["remarks"] = remarks.take()
        results.append(result)
    if DEVICES == 4 and PMAP_IS_SHARD_MAP:
        xp = jnp.reshape(x, (DEVICES, 1) + x.shape[1:])
        pmapped = jax.pmap(pool_grad)
        results.append(through_enable("pmap_pool_grad", None, Plain(pmapped, xp), pmapped, xp))
        results[-1]["remarks"] = remarks.take()
    if DEVICES == 2:
        results.append(gpu_binding_case("gpu_binding_pallas_interpret", xs))
        results[-1]["remarks"] = remarks.take()
        results.append(caches_cleared_case("caches_cleared_between_rewrite_and_compile", xs))
        results[-1]["remarks"] = remarks.take()
    for result in results:
        result["partitioner"] = partitioner
    return results


def main() -> int:
    assert len(jax.devices()) == DEVICES, f"expected {DEVICES} host devices, got {len(jax.devices())}"
    remarks = Remarks()
    logger = logging.getLogger("pool3d_pass")
    logger.addHandler(remarks)
    logger.setLevel(logging.INFO)
    for partitioner, shardy in (("shardy", True), ("gspmd", False)):
        jax.config.update("jax_use_shardy_partitioner", shardy)
        jax.clear_caches()
        remarks.take()
        for result in run_cases(partitioner, remarks):
            print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
