"""The shared partitioning wrapper (bindings/partitioned.py) on 2 and 4 host CPU devices, Shardy and GSPMD.

The cases (tests/support/partitioned_cases.py) run in two child processes,
started together (each JAX reads its device count once): every call kind of
the contract through the CPU binding's partitionable calls, on batch-sharded
(2 devices) and batch x channel-sharded (2x2 mesh) arrays, under both of
XLA's partitioners; on 4 devices also a spatially sharded pool (per shard,
with halos) and a `pmap`; on 2 the gpu binding's partitionable calls with
its Pallas kernels in interpret mode, and a compile whose pool3d caches are
cleared between the rewrite and XLA's compile. Each must give plain
jax.jit's results, hold exactly the expected kernel calls, one per device
program on that device's shard, add no collective where the batch/channel
sharding suffices, and say in its remarks how it runs: partitioned over the
mesh (and, from the partitioning callback, how each call was split), or per
shard. Beside them, in this process: the sharding the wrapper gives the
kernel for a given operand sharding (`kernel_sharding`), its refusal of a
manual one, and a multi-device rewrite for a binding without partitionable
calls (refused, never a crash). The spatially sharded matrix is
test_spatial_sharding.py's.
"""

from __future__ import annotations

import pytest

from cases.children import run as run_children

from corpus import SUPPORT

CASES_SCRIPT = SUPPORT / "partitioned_cases.py"
DEVICE_COUNTS = (2, 4)
PARTITIONERS = ("shardy", "gspmd")
INPUT_SHAPE = (4, 4, 8, 8, 8)
POOLED_SHAPE = (4, 4, 4, 4, 4)  # kernel 3, stride 2, padding 1
# Kernel calls expected in each case's compiled program, by call kind.
EXPECTED_CALLS = {
    "backward": {"backward": 1},
    "forward_and_backward_from_indices": {"forward": 1, "backward_from_indices": 1},
    "backward_from_input": {"backward_from_input": 1},
    "forward_output": {"forward_output": 1},
    "spatially_sharded_forward_and_backward_from_indices": {"forward": 1, "backward_from_indices": 1},
    "pmap_pool_grad": {"forward": 1, "backward_from_indices": 1},
    "caches_cleared_between_rewrite_and_compile": {"forward": 1, "backward_from_indices": 1},
}
CALL_KINDS = ["backward", "forward_and_backward_from_indices", "backward_from_input", "forward_output"]
# The operands of each call kind: which have the input's shape (the rest are pooled).
INPUT_OPERANDS = {"backward": [False, True, False], "forward": [True], "backward_from_indices": [False, False],
                  "backward_from_input": [False, True], "forward_output": [True]}


@pytest.fixture(scope="module")
def children():
    """Both children started at once (each spends most of its time in single-threaded XLA compiles)."""
    runs = run_children(CASES_SCRIPT, *([n] for n in DEVICE_COUNTS))
    return {n: {(r["partitioner"], r["case"]): r for r in records} for n, records in zip(DEVICE_COUNTS, runs)}


def cases_of(devices: int) -> list[str]:
    if devices == 2:
        return CALL_KINDS + ["caches_cleared_between_rewrite_and_compile"]
    return CALL_KINDS + ["spatially_sharded_forward_and_backward_from_indices", "pmap_pool_grad"]


PARAMS = [(n, p, case) for n in DEVICE_COUNTS for p in PARTITIONERS for case in cases_of(n)]


def record_of(children, devices, partitioner, case):
    record = children[devices].get((partitioner, case))
    if record is None and case == "pmap_pool_grad":
        pytest.skip("JAX 0.9: pmap compiles replicas, not a shard_map, and is left alone")
    return record


@pytest.mark.parametrize(("devices", "partitioner", "case"), PARAMS)
def test_same_results_with_the_expected_kernel_calls(children, devices, partitioner, case):
    record = record_of(children, devices, partitioner, case)
    assert record["max_difference"] == 0.0
    assert record["kernel_calls"] == {kind: EXPECTED_CALLS[case].get(kind, 0) for kind in record["kernel_calls"]}
    assert record["pool_gradient_ops_left"] == 0
    if case != "backward":  # the recompute call reads the forward max pool's output; the other calls replace it
        assert record["reduce_window_left"] == 0
    assert not [line for line in record["remarks"] if line.startswith(("WARNING", "ERROR"))], record["remarks"]


@pytest.mark.parametrize(("devices", "partitioner", "case"), [p for p in PARAMS if p[2] in CALL_KINDS])
def test_each_device_runs_the_kernel_on_its_shard_without_communication(children, devices, partitioner, case):
    record = record_of(children, devices, partitioner, case)
    ways = (2, 1) if devices == 2 else (2, 2)  # batch, channels
    for kind, calls in record["operand_shapes"].items():
        (shapes,) = calls  # one call per device program
        for shape, is_input in zip(shapes, INPUT_OPERANDS[kind], strict=True):
            whole = INPUT_SHAPE if is_input else POOLED_SHAPE
            assert shape == [whole[0] // ways[0], whole[1] // ways[1], *whole[2:]], (kind, shapes)
    assert not any(record["rewritten_collectives"].values()), record["rewritten_collectives"]
    assert record["rewritten_out_shardings"] == record["plain_out_shardings"]


@pytest.mark.parametrize("partitioner", PARTITIONERS)
def test_a_spatially_sharded_pool_runs_per_shard_with_halos(children, partitioner):
    # D = 8 over 4 devices, k3 s2 p1: each forward reads its 2 planes and 1 below; each gradient
    # its 1 window of grad_output and indices and the 1 above.
    record = children[4][(partitioner, "spatially_sharded_forward_and_backward_from_indices")]
    assert record["operand_shapes"] == {"forward": [[[4, 4, 3, 8, 8]]],
                                        "backward_from_indices": [[[4, 4, 2, 4, 4], [4, 4, 2, 4, 4]]]}
    assert record["rewritten_collectives"]["all-gather"] == 0
    assert 0 < record["rewritten_collectives"]["collective-permute"] <= record["plain_collectives"]["collective-permute"]
    partitioning = [line for line in record["remarks"] if "per shard:" in line]
    assert len(partitioning) == 2 and all("D in 4 shards, halos of" in line for line in partitioning), partitioning


@pytest.mark.parametrize("partitioner", PARTITIONERS)
def test_the_compile_keeps_its_lowerings_alive_when_the_caches_are_cleared_meanwhile(children, partitioner):
    # Only the compile's own list of spliced lowerings holds their custom_partitioning callbacks then:
    # without it XLA's partitioner finds no callback and the hook falls back to the original.
    record = children[2][(partitioner, "caches_cleared_between_rewrite_and_compile")]
    assert not [line for line in record["remarks"] if line.startswith(("WARNING", "ERROR"))], record["remarks"]
    assert record["kernel_calls"]["forward"] == record["kernel_calls"]["backward_from_indices"] == 1
    assert record["max_difference"] == 0.0


@pytest.mark.parametrize(("devices", "partitioner", "case"), PARAMS)
def test_the_remark_says_how_the_program_was_partitioned(children, devices, partitioner, case):
    record = record_of(children, devices, partitioner, case)
    rewritten = [line for line in record["remarks"] if " rewritten: " in line]
    assert rewritten, record["remarks"]
    per_shard_body = case == "pmap_pool_grad"
    phrase = (f"per shard (a shard_map body) on {devices} devices" if per_shard_body
              else f"partitioned over {devices} devices")
    assert all(phrase in line for line in rewritten), rewritten
    # and, from the partitioning callback, one line per call: how each device runs it
    partitioning = [line for line in record["remarks"] if "per shard:" in line]
    if per_shard_body:
        assert not partitioning
        return
    assert len(partitioning) == sum(EXPECTED_CALLS[case].values()), record["remarks"]
    assert all(line.startswith("INFO: pool3d partitioning: ") for line in partitioning), partitioning
    if case in CALL_KINDS:
        assert all("no pooled dimension split, no communication" in line for line in partitioning), partitioning


@pytest.mark.parametrize("partitioner", PARTITIONERS)
def test_the_gpu_binding_partitions_its_pallas_kernels(children, partitioner):
    # Interpret mode was asked for only while tracing: XLA lowered each shard's kernel
    # afterwards, in interpret mode (a Triton call would not compile here), from the pin.
    record = children[2][(partitioner, "gpu_binding_pallas_interpret")]
    assert record["max_difference"] == 0.0  # against the reference binding
    assert record["custom_partitioning_left"] == record["triton_calls"] == 0
    assert not any(record["rewritten_collectives"].values()), record["rewritten_collectives"]
    assert record["rewritten_out_shardings"] == record["plain_out_shardings"]


# What the callbacks make of the sharding XLA hands them: each device keeps its batch/channel block, and
# its block of a split pooled dimension where the shards line up with the windows.
K3S2P1 = {"kernel_size": (3, 3, 3), "stride": (2, 2, 2), "padding": (1, 1, 1)}
KERNEL_SHARDINGS = [
    # (operand sharding, layout, input shape, the kernel's sharding, split pooled dimensions, regrouped, gathered)
    ("{devices=[2,2,1,1,1]<=[4]}", "NCDHW", (4, 4, 8, 8, 8), "{devices=[2,2,1,1,1]0,1,2,3}", [], 0, 0),
    ("{devices=[2,2,1,1,1]<=[4]}", "NDHWC", (4, 4, 8, 8, 8), "{devices=[2,2,1,1,1]0,1,2,3}", ["D"], 0, 0),  # batch x D
    ("{devices=[1,1,4,1,1]<=[4]}", "NCDHW", (4, 4, 8, 8, 8), "{devices=[1,1,4,1,1]0,1,2,3}", ["D"], 0, 0),  # halos
    ("{devices=[1,1,4,1,1]<=[4]}", "NCDHW", (4, 4, 15, 8, 8), "{devices=[1,1,4,1,1]0,1,2,3}", ["D"], 0, 0),  # uneven
    # 12 planes, 6 windows: over 4 shards they do not line up; over 2 (adjacent pairs regrouped) they do
    ("{devices=[1,1,4,1,1]<=[4]}", "NCDHW", (4, 4, 12, 8, 8), "{devices=[1,1,2,1,1,2]0,1,2,3 last_tile_dim_replicate}",
     ["D"], 1, 0),
    ("{devices=[1,1,2,1,1]<=[2]}", "NCDHW", (4, 4, 10, 8, 8), "{replicated}", [], 0, 1),  # 5 windows over 2: whole
    ("{devices=[2,1,1,1,2]<=[2,2]T(1,0)}", "NCDHW", (4, 4, 8, 8, 8),  # batch x W
     "{devices=[2,1,1,1,2]0,2,1,3}", ["W"], 0, 0),
    ("{devices=[2,1,1,1,1,2]<=[4] last_tile_dim_replicate}", "NCDHW", (4, 4, 8, 8, 8),
     "{devices=[2,1,1,1,1,2]0,1,2,3 last_tile_dim_replicate}", [], 0, 0),
    ("{devices=[4,1,1,1,1]<=[4]}", "NCDHW", (6, 4, 8, 8, 8), "{devices=[4,1,1,1,1]0,1,2,3}", [], 0, 0),  # 6 over 4: padded
    ("{replicated}", "NCDHW", (4, 4, 8, 8, 8), "{replicated}", [], 0, 0),
]


@pytest.mark.parametrize(("given", "layout", "shape", "expected", "split", "regrouped", "gathered"), KERNEL_SHARDINGS)
def test_the_kernel_keeps_batch_channels_and_the_pooled_dimensions_halos_serve(given, layout, shape, expected,
                                                                               split, regrouped, gathered):
    from jaxlib import xla_client as xc

    from pool3d_pass.bindings.partitioned import kernel_sharding
    from pool3d_pass.contract.pool_config import PoolConfig

    chosen = kernel_sharding(xc.HloSharding.from_string(given), PoolConfig(**K3S2P1, data_format=layout), shape)
    assert str(chosen.hlo) == expected
    assert sorted(plan.name for plan in chosen.plans.values()) == split
    assert (len(chosen.regrouped), len(chosen.gathered)) == (regrouped, gathered), chosen


def test_a_manual_sharding_is_refused_not_partitioned():
    from jaxlib import xla_client as xc

    from pool3d_pass.bindings.partitioned import kernel_sharding
    from pool3d_pass.contract.pool_config import PoolConfig

    with pytest.raises(ValueError, match="cannot partition"):
        kernel_sharding(xc.HloSharding.manual(), PoolConfig(**K3S2P1), (4, 4, 8, 8, 8))


def test_a_binding_without_partitionable_calls_is_refused_in_a_multi_device_program():
    # The reference binding has single-device functions only: a program for several devices gets a
    # remark for each gradient, never a lookup of a partitionable function it lacks.
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax import lax
    from jax.sharding import Mesh

    import pool3d_pass

    def pool_grad(x):
        pool = lambda v: lax.reduce_window(v, -jnp.inf, lax.max, (1, 1, 2, 2, 2), (1, 1, 2, 2, 2), "VALID")
        return jax.grad(lambda v: jnp.sum(pool(v) ** 2))(x)

    text = jax.jit(pool_grad).lower(jnp.ones((2, 2, 4, 4, 4))).as_text()
    mesh = Mesh(np.array(jax.devices()[:1]), ("d",))
    for strategy in ("auto", "recompute", "indices"):
        rewritten, report = pool3d_pass.rewrite_text(text, target="reference", strategy=strategy, mesh=mesh)
        assert (report.candidates, report.rewritten) == (1, 0)
        assert "cannot be partitioned" in report.missed[0].reason, report.missed
        assert "stablehlo.select_and_scatter" in rewritten
