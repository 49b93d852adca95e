"""The shared partitioning wrapper (bindings/partitioned.py) on 2 and 4 host CPU devices, Shardy and GSPMD.

The cases (tests/support/partitioned_cases.py) run in two child processes,
started together (each JAX reads its device count once): every call kind of
the contract through the CPU binding's partitionable calls, on batch-sharded
(2 devices) and batch x channel-sharded (2x2 mesh) arrays, under both of
XLA's partitioners; on 4 devices also a spatially sharded pool and a `pmap`;
on 2 the gpu binding's partitionable calls with its Pallas kernels in
interpret mode. Each must give plain jax.jit's results, hold exactly the
expected kernel calls, one per device program on that device's shard, add no
collective where the batch/channel sharding suffices, and say in its remark
how it runs: partitioned over the mesh, or per shard. Beside them, in this
process: the sharding the wrapper gives the kernel for a given operand
sharding (`parallel_only`), and its refusal of a manual one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from corpus import SUPPORT  # noqa: E402

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
}
CALL_KINDS = ["backward", "forward_and_backward_from_indices", "backward_from_input", "forward_output"]
# The operands of each call kind: which have the input's shape (the rest are pooled).
INPUT_OPERANDS = {"backward": [False, True, False], "forward": [True], "backward_from_indices": [False, False],
                  "backward_from_input": [False, True], "forward_output": [True]}


@pytest.fixture(scope="module")
def children():
    """Both children started at once (each spends most of its time in single-threaded XLA compiles)."""
    environment = dict(os.environ, JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="1")
    started = {n: subprocess.Popen([sys.executable, str(CASES_SCRIPT), str(n)], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, env=environment, cwd=CASES_SCRIPT.parent)
               for n in DEVICE_COUNTS}
    done = {}
    try:
        for n, child in started.items():
            out, err = child.communicate(timeout=600)
            assert child.returncode == 0, err[-4000:]
            records = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
            done[n] = {(r["partitioner"], r["case"]): r for r in records}
    finally:
        for child in started.values():
            if child.poll() is None:
                child.kill()
    return done


def cases_of(devices: int) -> list[str]:
    if devices == 2:
        return CALL_KINDS
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
def test_spatial_sharding_is_gathered_whole_before_the_kernel(children, partitioner):
    record = children[4][(partitioner, "spatially_sharded_forward_and_backward_from_indices")]
    for kind, calls in record["operand_shapes"].items():
        (shapes,) = calls
        assert all(shape[2:] == list((INPUT_SHAPE if first else POOLED_SHAPE)[2:])
                   for shape, first in zip(shapes, INPUT_OPERANDS[kind], strict=True)), (kind, shapes)
    assert record["rewritten_collectives"]["all-gather"] >= 1


@pytest.mark.parametrize(("devices", "partitioner", "case"), PARAMS)
def test_the_remark_says_how_the_program_was_partitioned(children, devices, partitioner, case):
    record = record_of(children, devices, partitioner, case)
    rewritten = [line for line in record["remarks"] if " rewritten: " in line]
    assert rewritten, record["remarks"]
    phrase = (f"per shard (a shard_map body) on {devices} devices" if case == "pmap_pool_grad"
              else f"partitioned over {devices} devices")
    assert all(phrase in line for line in rewritten), rewritten


@pytest.mark.parametrize("partitioner", PARTITIONERS)
def test_the_gpu_binding_partitions_its_pallas_kernels(children, partitioner):
    # Interpret mode was asked for only while tracing: XLA lowered each shard's kernel
    # afterwards, in interpret mode (a Triton call would not compile here), from the pin.
    record = children[2][(partitioner, "gpu_binding_pallas_interpret")]
    assert record["max_difference"] == 0.0  # against the reference binding
    assert record["custom_partitioning_left"] == record["triton_calls"] == 0
    assert not any(record["rewritten_collectives"].values()), record["rewritten_collectives"]
    assert record["rewritten_out_shardings"] == record["plain_out_shardings"]


# What the callbacks make of the sharding XLA hands them: each device keeps its batch/channel block.
PARALLEL_ONLY = [
    # (operand sharding, layout, shape, the kernel's sharding)
    ("{devices=[2,2,1,1,1]<=[4]}", "NCDHW", (4, 4, 8, 8, 8), "{devices=[2,2,1,1,1]0,1,2,3}"),
    ("{devices=[2,2,1,1,1]<=[4]}", "NDHWC", (4, 4, 8, 8, 8), "{devices=[2,1,1,1,1,2]0,1,2,3 last_tile_dim_replicate}"),
    ("{devices=[1,1,4,1,1]<=[4]}", "NCDHW", (4, 4, 8, 8, 8), "{replicated}"),  # D sharded: made whole
    ("{devices=[2,1,1,1,2]<=[2,2]T(1,0)}", "NCDHW", (4, 4, 8, 8, 8),  # batch x W: the W pairs become replicas
     "{devices=[2,1,1,1,1,2]0,2,1,3 last_tile_dim_replicate}"),
    ("{devices=[2,1,1,1,1,2]<=[4] last_tile_dim_replicate}", "NCDHW", (4, 4, 8, 8, 8),
     "{devices=[2,1,1,1,1,2]0,1,2,3 last_tile_dim_replicate}"),
    ("{devices=[4,1,1,1,1]<=[4]}", "NCDHW", (6, 4, 8, 8, 8), "{replicated}"),  # 6 over 4: shards not exact
    ("{replicated}", "NCDHW", (4, 4, 8, 8, 8), "{replicated}"),
]


@pytest.mark.parametrize(("given", "layout", "shape", "expected"), PARALLEL_ONLY)
def test_pooled_and_uneven_dimensions_become_replicas(given, layout, shape, expected):
    from jaxlib import xla_client as xc

    from pool3d_pass.bindings.partitioned import parallel_only

    assert str(parallel_only(xc.HloSharding.from_string(given), layout, shape)) == expected


def test_a_manual_sharding_is_refused_not_partitioned():
    from jaxlib import xla_client as xc

    from pool3d_pass.bindings.partitioned import parallel_only

    with pytest.raises(ValueError, match="cannot partition"):
        parallel_only(xc.HloSharding.manual(), "NCDHW", (4, 4, 8, 8, 8))
