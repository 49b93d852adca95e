"""Spatially sharded volumes: each device pools its own planes with its neighbours' halo, never a gathered whole.

The cases (cases/spatial_run.py, tables in cases/spatial.py)
run in three child processes started together, with 2, 4 and 8 host CPU
devices (JAX reads its device count once). They are a pairwise covering
selection of: the split dimension (D, H, W), the layout, the element type,
the window (k2 s2, k3 s2 p1, k3 s1 p1, (1,2,2)), the job (a layer's forward
+ gradient, a bare gradient, the recompute strategy's gradient, an inference
forward), even or uneven shards, Shardy or GSPMD; every pair of values of
two factors occurs in some case (checked here). Each case must give the
unsharded rewritten program's results bit for bit, hold the expected kernel
calls with exactly the halo planes its windows need, move no more bytes
between devices than XLA's own program (nothing at all where the windows
line up with the shards), need no more memory per device, and say in one
remark per call how it was split. Two more cases pool windows wider than a
shard (one plane per device: halos from shards 2 to 4 away). On 4 devices,
two training steps
(convolution, ReLU, max pool, loss; depth 32 split over the devices):
windows aligned with the shards move only what XLA's convolutions move.

Every combination of the factors (1,044 per device count) is
checks/spatial_sweep.py's, outside `make test`.
"""

from __future__ import annotations

import pytest

from cases import children
from cases.spatial import CASES, RUNNER, STEPS, WIDE, as_dict, name_of, problems, uncovered_pairs

DEVICE_COUNTS = (2, 4, 8)


def run_children(counts, *arguments, timeout=600) -> dict[str, dict]:
    """Every case's record, by name, from one child per device count, started together."""
    runs = children.run(RUNNER, *([n, *arguments] for n in counts), timeout=timeout)
    return {record["case"]: record for records in runs for record in records}


@pytest.fixture(scope="module")
def records() -> dict[str, dict]:
    return run_children(DEVICE_COUNTS)


NAMES = [name_of(as_dict(row)) for row in CASES] + [name_of(case) for case in WIDE]


def test_the_cases_cover_every_pair_of_factor_values():
    assert not uncovered_pairs([as_dict(row) for row in CASES])


def test_every_case_ran(records):
    assert sorted(records) == sorted(NAMES + [name for name, _, _ in STEPS])


@pytest.mark.parametrize("case", NAMES)
def test_per_shard_with_halos_the_unsharded_bits_and_no_more_bytes_or_memory_than_xla(records, case):
    assert not problems(records[case]), (problems(records[case]), records[case])


@pytest.mark.parametrize("step", [name for name, _, _ in STEPS])
def test_a_depth_sharded_training_step(records, step):
    record = records[step]
    plain = sum(c["bytes"] for c in record["plain_collectives"].values())
    rewritten = sum(c["bytes"] for c in record["rewritten_collectives"].values())
    assert {k: n for k, n in record["kernel_calls"].items() if n} == {"forward": 1, "backward_from_indices": 1}
    assert record["pool_gradient_ops_left"] == 0
    if record["window"] == "k2s2":  # aligned: only what XLA's convolutions (and the weight gradient) move
        assert rewritten == plain, record
    else:
        assert rewritten < plain, record
    assert record["rewritten_memory"] <= record["plain_memory"]
    # the convolutions and the weight gradient's sum are XLA's in both: the same up to their summation
    # order, sharded or not (values of order 1; measured up to 1.3e-5 with JAX 0.9)
    assert record["max_difference_to_unsharded"] < 1e-4 and record["max_difference_to_xla"] < 1e-4
    partitioning = [line for line in record["remarks"] if "per shard:" in line]
    assert len(partitioning) == 2 and all("D in 4 shards" in line for line in partitioning), partitioning
