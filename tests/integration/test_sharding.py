"""Rewritten programs partition under JAX's SPMD partitioner like the originals.

The cases run in a child process with 8 host CPU devices (tests/support/sharding_cases.py),
under each strategy: `recompute` (the backward call; asked for explicitly) and
the default `auto`, which on CPU is `indices` (the forward call + the
from-indices call where the program has the forward max pool, the fused
from-input call for a bare gradient). Cases: a data-parallel 3-D CNN training
step (through `in_shardings`, and through `enable()`), pool gradients (with
and without the forward in the program) and a pool's forward + gradient on
arrays sharded by `jax.device_put` over the batch, the channels, both (2-D
mesh, NCDHW and NDHWC), unevenly over the batch, and a spatial dimension.
Every case must give the unrewritten program's results with exactly the
expected kernel calls in it and no select_and_scatter left; batch and channel
sharding must add no collective; no case may move more bytes between devices
than XLA's own program; output shardings must be kept. (Here D = 8 over 8
devices: 4 windows of stride 2 do not line up with shards of one plane, so
the kernel regroups them in pairs; test_spatial_sharding.py has the
spatially sharded matrix.)"""

from __future__ import annotations

import pytest

from cases import children

from corpus import SUPPORT

CASES_SCRIPT = SUPPORT / "sharding_cases.py"

# Kernel calls expected in each case's compiled program, by call kind.
RECOMPUTE_ONE, RECOMPUTE_TWO = {"backward": 1}, {"backward": 2}
FUSED = {"backward_from_input": 1}
LAYER_ONE = {"forward": 1, "backward_from_indices": 1}
LAYER_TWO = {"forward": 2, "backward_from_indices": 2}  # the CNN has two pooling layers
EXPECTED_CALLS = {
    "train_step_batch_sharded_in_shardings": RECOMPUTE_TWO,
    "train_step_through_enable": RECOMPUTE_TWO,
    "pool_grad_batch_sharded_device_put": RECOMPUTE_ONE,
    "pool_grad_batch_and_channel_sharded": RECOMPUTE_ONE,
    "pool_grad_channel_sharded": RECOMPUTE_ONE,
    "pool_2d_grad_batch_sharded_through_reshapes": RECOMPUTE_ONE,
    "pool_grad_spatially_sharded": RECOMPUTE_ONE,
    "indices_train_step_batch_sharded_in_shardings": LAYER_TWO,
    "indices_train_step_through_enable": LAYER_TWO,
    "indices_pool_grad_batch_sharded_device_put": LAYER_ONE,
    "indices_bare_pool_grad_batch_sharded": FUSED,
    "indices_bare_pool_grad_channel_sharded": FUSED,
    "indices_bare_pool_grad_batch_and_channel_sharded": FUSED,
    "indices_pool_forward_and_grad_batch_and_channel_sharded_ndhwc": LAYER_ONE,
    "indices_pool_forward_and_grad_unevenly_batch_sharded": LAYER_ONE,
    # D split, padding 1 along it: each device runs the forward and the from-indices kernel on its block
    # (the fused call's selection could take a plane below the volume: bindings/halo_exchange.py)
    "indices_bare_pool_grad_spatially_sharded": LAYER_ONE,
    "indices_pool_forward_and_grad_spatially_sharded": LAYER_ONE,
}
ALL_CASES = list(EXPECTED_CALLS)
SPATIAL = [case for case in ALL_CASES if "spatially" in case]
# Uneven batch shards (6 over 8): XLA's own program gathers for them too.
COMMUNICATION_FREE = [case for case in ALL_CASES if case not in SPATIAL and "unevenly" not in case]
INDICES = [case for case in ALL_CASES if case.startswith("indices_")]
# The from-indices call does not read the forward input, so nothing carries a
# spatially sharded input's sharding to its gradient: with no out_shardings
# given, that gradient comes back replicated (values exact; see
# docs/jax_integration.md, "Multi-device programs").
GRADIENT_SHARDING_NOT_KEPT = {"indices_pool_forward_and_grad_spatially_sharded"}


@pytest.fixture(scope="module")
def results() -> dict[str, dict]:
    (records,) = children.run(CASES_SCRIPT, [])
    return {record["case"]: record for record in records}


@pytest.mark.parametrize("case", ALL_CASES)
def test_same_results_with_the_expected_kernel_calls_in_the_program(results, case):
    record = results[case]
    assert record["max_difference"] == 0.0
    expected = {kind: EXPECTED_CALLS[case].get(kind, 0) for kind in record["kernel_calls"]}
    assert record["kernel_calls"] == expected
    assert record["pool_gradient_ops_left"] == 0 < record["plain_pool_gradient_ops"]  # XLA:CPU's scatter, in the plain program only


@pytest.mark.parametrize("case", INDICES)
def test_indices_strategy_leaves_no_reduce_window(results, case):
    # The forward call replaces the forward max pool; the fused call needs none.
    assert results[case]["strategy"] == "auto"
    assert results[case]["reduce_window_left"] == 0


@pytest.mark.parametrize("case", COMMUNICATION_FREE)
def test_batch_and_channel_sharding_add_no_collectives(results, case):
    record = results[case]
    for name, count in record["rewritten_collectives"].items():
        assert count <= record["plain_collectives"][name], (name, record)


@pytest.mark.parametrize("case", ALL_CASES)
def test_output_shardings_are_kept(results, case):
    record = results[case]
    if case in GRADIENT_SHARDING_NOT_KEPT:  # (output, gradient): the pool's output keeps its sharding
        assert record["rewritten_out_shardings"][0] == record["plain_out_shardings"][0]
        return
    assert record["rewritten_out_shardings"] == record["plain_out_shardings"]


@pytest.mark.parametrize("case", ALL_CASES)
def test_no_more_bytes_between_devices_than_xla(results, case):
    record = results[case]
    assert record["rewritten_bytes"] <= record["plain_bytes"], record
