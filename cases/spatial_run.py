"""Spatially sharded pools on N host CPU devices (see tests/integration/test_spatial_sharding.py).

`python cases/spatial_run.py N [--all] [--match TEXT,...]` (cases/children.py starts it) runs the cases of `CASES` for N devices
(N = 2, 4 or 8) and prints one JSON line per case. A case is a pool split
along one pooled dimension (D, H or W) of a volume in NCDHW or NDHWC, of one
element type, window (`WINDOWS`), job (`JOBS`: a layer's forward + gradient,
a bare gradient, the recompute strategy's gradient, an inference forward),
evenly or unevenly sharded (n*4 or n*4 - 1 planes: the last shard padded),
under Shardy or GSPMD. `CASES` is a pairwise covering selection of those
factors (every pair of values of any two factors occurs in some case;
`test_spatial_sharding.py` checks it); `--all` runs every combination of
the factors except the device count (the `slow` sweep).

Per case, the same job is compiled three times: by plain jax.jit on the
sharded input (XLA's own partitioning), through `pool3d_pass.jit` on the
sharded input, and through `pool3d_pass.jit` on one device (the unsharded
program, the reference). The record: whether the rewritten sharded results
are the unsharded ones bit for bit (and whether XLA's are, for the record),
the kernel calls, each program's collectives and the bytes they move per
device, each program's memory per device (`memory_analysis`: arguments,
outputs and temporaries), and the remarks the partitioner's callbacks
logged. (The reference has no sharding constraint and runs on one device:
the constrained job on unplaced input would still be a multi-device
program.) The input holds ties, a NaN, -2 on the split dimension's last two
planes of one channel, and `-inf` filling the split
dimension's first two planes of one channel (windows at the volume's low
edge whose real elements are all `-inf`).

Two training steps (`STEPS`, on 4 devices): a 3-D convolution, ReLU, max
pool and loss, depth 32 split over the devices, strategy indices: NCDHW k2 s2
(windows aligned with the shards) and NDHWC k3 s2 p1 (windows straddling).
"""

from __future__ import annotations

import itertools
import os
import sys

DEVICES = int(sys.argv[1]) if len(sys.argv) > 1 else 4
os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count={DEVICES}"

import json
import logging
import zlib

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import pool3d_pass
from cases.spatial import (
    CASES,
    FACTORS,
    STEPS,
    WIDE,
    as_dict,
    conv_pool_step,
    excluded,
    max_pool,
    name_of,
    step_shapes,
)
from oracles.compiled_hlo import collectives, kernel_calls, kernel_operand_shapes, pool_gradient_ops


def every_case() -> list[dict]:
    """The full cross product for this device count, less the excluded combinations."""
    rows = (dict(zip(FACTORS, (DEVICES, *rest), strict=True)) for rest in itertools.product(*list(FACTORS.values())[1:]))
    return [case for case in rows if excluded(case) is None]


class Remarks(logging.Handler):
    """The partitioning remarks the callbacks log, and any warning (a failed rewrite or compile)."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, entry):
        message = entry.getMessage()
        if "partitioned over" in message and "per shard:" in message or entry.levelno >= logging.WARNING:
            self.lines.append(f"{entry.levelname}: {message}")

    def take(self) -> list[str]:
        lines, self.lines = self.lines, []
        return lines


def spatial_dimension(layout: str, axis: str) -> int:
    return "DHW".index(axis) + (1 if layout == "NDHWC" else 2)


def job_function(job: str, pool, constrain):
    """The job on a volume, its input and results constrained to the case's sharding."""
    def layer(x):
        y, vjp = jax.vjp(pool, constrain(x))
        return constrain(y), constrain(vjp(2 * y - 1)[0])

    def bare(x):
        x = constrain(x)
        return constrain(jax.grad(lambda v: jnp.sum(pool(v).astype(jnp.float32) * 3.0))(x))

    def recompute(x):
        x = constrain(x)
        return constrain(jax.grad(lambda v: jnp.sum(pool(v).astype(jnp.float32) ** 2))(x))

    def inference(x):
        return constrain(pool(constrain(x)))

    return {"layer": layer, "bare": bare, "recompute": recompute, "inference": inference}[job]


def volume(case: dict) -> np.ndarray:
    """Small integers (ties), one NaN, -inf on the split dimension's first two planes of channel 0, and -2
    on its last two of channel 1 (windows there whose maximum is below 0, the padding an uneven split
    adds beyond the volume)."""
    layout, axis, n = case["layout"], case["axis"], case["devices"]
    extent = n * case.get("planes", 4) - (1 if case["shards"] == "uneven" else 0)
    spatial = [6, 6, 6]
    spatial["DHW".index(axis)] = extent
    shape = (2, 3, *spatial) if layout == "NCDHW" else (2, *spatial, 3)
    x = np.random.default_rng(zlib.crc32(name_of(case).encode())).integers(-3, 4, shape).astype(np.float32)
    edge = [slice(None)] * 5
    edge[1 if layout == "NCDHW" else 4] = 0
    edge[spatial_dimension(layout, axis)] = slice(0, 2)
    x[tuple(edge)] = -np.inf
    edge[1 if layout == "NCDHW" else 4] = 1
    edge[spatial_dimension(layout, axis)] = slice(extent - 2, extent)
    x[tuple(edge)] = -2.0
    x.flat[x.size // 2 + 5] = np.nan
    return x


def bits(values) -> list[np.ndarray]:
    out = []
    for value in jax.tree.leaves(values):
        value = np.asarray(value)
        out.append(value.view(np.uint16 if value.dtype.itemsize == 2 else np.uint32))
    return out


def same_bits(a, b) -> bool:
    return all(np.array_equal(u, v) for u, v in zip(bits(a), bits(b), strict=True))


def max_difference(a, b) -> float:
    return max(float(np.max(np.abs(np.asarray(u, np.float32) - np.asarray(v, np.float32))))
               for u, v in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True))


def memory(compiled) -> int:
    stats = compiled.memory_analysis()
    return int(stats.argument_size_in_bytes + stats.output_size_in_bytes + stats.temp_size_in_bytes
               - stats.alias_size_in_bytes)


def programs(plain, rewritten, lines: list[str]) -> dict:
    """What a case records of XLA's compiled program and the rewritten one, and of the remarks logged."""
    plain_hlo, rewritten_hlo = plain.as_text(), rewritten.as_text()
    return {
        "kernel_calls": kernel_calls(rewritten_hlo),
        "pool_gradient_ops_left": pool_gradient_ops(rewritten_hlo),
        "plain_collectives": collectives(plain_hlo),
        "rewritten_collectives": collectives(rewritten_hlo),
        "plain_memory": memory(plain),
        "rewritten_memory": memory(rewritten),
        "remarks": lines,
    }


def one_device(value):
    """`value` placed on the first device alone: a jit of it (with no sharding constraint) is unsharded."""
    return jax.device_put(value, jax.devices()[0])


def compare(name: str, function, unsharded, x, sharded_x, strategy, remarks: Remarks) -> dict:
    """One job: XLA's partitioning (`function`, its sharding constraints in it), the rewrite's, and the
    rewrite of the same job with no constraint on one device (`unsharded`: the reference)."""
    options = {} if strategy is None else {"strategy": strategy}
    plain = jax.jit(function).lower(sharded_x).compile()
    reference = pool3d_pass.jit(unsharded, **options)(one_device(x))
    remarks.take()
    rewritten = pool3d_pass.jit(function, **options).lower(sharded_x).compile()
    lines = remarks.take()
    got = rewritten(sharded_x)
    return {
        "case": name,
        "bits_equal": same_bits(reference, got),
        "xla_bits_equal": same_bits(jax.jit(unsharded)(one_device(x)), plain(sharded_x)),
        "kernel_operand_shapes": kernel_operand_shapes(rewritten.as_text()),
        **programs(plain, rewritten, lines),
    }


def run_case(case: dict, remarks: Remarks) -> dict:
    jax.config.update("jax_use_shardy_partitioner", case["partitioner"] == "shardy")
    layout = case["layout"]
    mesh = Mesh(np.array(jax.devices()), ("d",))
    spec = [None] * 5
    spec[spatial_dimension(layout, case["axis"])] = "d"
    sharding = NamedSharding(mesh, P(*spec))
    dtype = {"f32": jnp.float32, "bf16": jnp.bfloat16, "f16": jnp.float16}[case["dtype"]]
    x = jnp.asarray(volume(case), dtype)
    # Uneven shards cannot be placed by device_put: the function's constraint splits the replicated input.
    placed = jax.device_put(x, NamedSharding(mesh, P()) if case["shards"] == "uneven" else sharding)
    pool = max_pool(case["window"], layout)
    function = job_function(case["job"], pool, lambda v: lax.with_sharding_constraint(v, sharding))
    strategy = "recompute" if case["job"] == "recompute" else None
    record = compare(name_of(case), function, job_function(case["job"], pool, lambda v: v), x, placed, strategy,
                     remarks)
    record.update(case)
    if case["shards"] == "uneven":
        # Filling an uneven split's padded tail reads the device's partition id: a few scalar buffers
        # (16 bytes seen on 8 devices) XLA's own program may not hold.
        record["memory_allowance"] = 64
    if case["job"] == "inference" and case["shards"] == "uneven":
        # A jit's result cannot be split unevenly: both programs gather the pooled volume at the end, and
        # for a custom call's result XLA's layout assignment copies the device's block into the layout
        # of that gather first (a reduce_window writes it directly): one output block more.
        pooled = jax.eval_shape(function, x)
        dim = spatial_dimension(layout, case["axis"])
        block = pooled.size // pooled.shape[dim] * -(-pooled.shape[dim] // DEVICES)
        record["memory_allowance"] += block * pooled.dtype.itemsize
    return record


def run_step(name: str, layout: str, window: str, remarks: Remarks) -> dict:
    jax.config.update("jax_use_shardy_partitioner", True)
    mesh = Mesh(np.array(jax.devices()), ("d",))
    rng = np.random.default_rng(1)
    shapes = step_shapes(layout)
    x = jnp.asarray(rng.standard_normal(shapes["x"]).astype(np.float32))
    kernel = jnp.asarray(rng.standard_normal(shapes["kernel"]).astype(np.float32) * 0.2)
    step, split = conv_pool_step(layout, window, mesh)
    unsharded, _ = conv_pool_step(layout, window, None)
    xs = jax.device_put(x, split)
    kernel = jax.device_put(kernel, NamedSharding(mesh, P()))
    plain = jax.jit(step).lower(kernel, xs).compile()
    reference = pool3d_pass.jit(unsharded, strategy="indices")(one_device(kernel), one_device(x))
    remarks.take()
    rewritten = pool3d_pass.jit(step, strategy="indices").lower(kernel, xs).compile()
    lines = remarks.take()
    got = rewritten(kernel, xs)
    want = plain(kernel, xs)
    return {
        "case": name, "layout": layout, "window": window, "devices": DEVICES,
        # the step's convolutions are XLA's in both: same loss and kernel up to their summation order
        "max_difference_to_xla": max_difference(want, got),
        "max_difference_to_unsharded": max_difference(reference, got),
        **programs(plain, rewritten, lines),
    }


def main() -> int:
    assert len(jax.devices()) == DEVICES, f"expected {DEVICES} host devices, got {len(jax.devices())}"
    remarks = Remarks()
    logger = logging.getLogger("pool3d_pass")
    logger.addHandler(remarks)
    logger.setLevel(logging.INFO)
    cases = every_case() if "--all" in sys.argv else [as_dict(row) for row in CASES if row[0] == DEVICES]
    cases += [case for case in WIDE if case["devices"] == DEVICES]
    if "--match" in sys.argv:  # only the cases whose name holds every given text (checks/spatial_sweep.py)
        texts = sys.argv[sys.argv.index("--match") + 1].split(",")
        cases = [case for case in cases if all(text in name_of(case) for text in texts)]
    for case in cases:
        print(json.dumps(run_case(case, remarks)), flush=True)
    if DEVICES == 4 and "--all" not in sys.argv:
        for name, layout, window in STEPS:
            print(json.dumps(run_step(name, layout, window, remarks)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
