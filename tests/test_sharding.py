"""Rewritten programs partition under JAX's SPMD partitioner like the originals.

The cases run in a child process with 8 host CPU devices (tests/sharding_cases.py):
a data-parallel 3-D CNN training step (through `in_shardings`, and through
`enable()`), pool gradients on arrays sharded by `jax.device_put` over the
batch, the channels, both (2-D mesh), and a spatial dimension. Every case must
give the unrewritten program's results with the kernel call in it; batch and
channel sharding must add no collective; output shardings must be kept.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CASES_SCRIPT = Path(__file__).resolve().parent / "sharding_cases.py"
COMMUNICATION_FREE = [
    "train_step_batch_sharded_in_shardings",
    "train_step_through_enable",
    "pool_grad_batch_sharded_device_put",
    "pool_grad_batch_and_channel_sharded",
    "pool_grad_channel_sharded",
    "pool_2d_grad_batch_sharded_through_reshapes",
]
ALL_CASES = [*COMMUNICATION_FREE, "pool_grad_spatially_sharded"]


@pytest.fixture(scope="module")
def results() -> dict[str, dict]:
    environment = dict(os.environ, JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="1")
    completed = subprocess.run(
        [sys.executable, str(CASES_SCRIPT)], capture_output=True, text=True, timeout=600, env=environment
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    records = [json.loads(line) for line in completed.stdout.splitlines() if line.startswith("{")]
    return {record["case"]: record for record in records}


@pytest.mark.parametrize("case", ALL_CASES)
def test_same_results_with_the_kernel_in_the_program(results, case):
    record = results[case]
    assert record["max_difference"] == 0.0
    assert record["kernel_calls"] >= 1 and record["select_and_scatter_left"] == 0


@pytest.mark.parametrize("case", COMMUNICATION_FREE)
def test_batch_and_channel_sharding_add_no_collectives(results, case):
    record = results[case]
    for name, count in record["rewritten_collectives"].items():
        assert count <= record["plain_collectives"][name], (name, record)


@pytest.mark.parametrize("case", ALL_CASES)
def test_output_shardings_are_kept(results, case):
    record = results[case]
    assert record["rewritten_out_shardings"] == record["plain_out_shardings"]


def test_spatial_sharding_is_made_whole_before_the_kernel(results):
    # Correct (checked above), at the price of gathering the pooled dimension.
    record = results["pool_grad_spatially_sharded"]
    assert record["rewritten_collectives"]["all-gather"] >= 1
