"""Max-pool gradients inside `jax.shard_map` are rewritten, per shard, with jax.jit's results.

The cases (tests/support/shard_map_cases.py) run in child processes with 4 and 8 host
CPU devices: a fully manual body, a partially manual one (`axis_names=` a
subset of the mesh: JAX wraps its values in open sharding constraints), a
`jax.jit` inside the body and a `jax.jit` inside that, a shard_map inside a
jitted function with sharded arguments and automatic code around it, a
data-parallel training step whose weight gradients are `psum`'d, and bodies
whose manual axis splits the depth (a pool local to the device's planes, and
one after the body's own halo exchange); through `pool3d_pass.jit` and, for
some, `enable()` + `jax.jit`. Inside a manual computation the single-device
kernels are spliced (custom_partitioning cannot partition there).
"""

from __future__ import annotations

import pytest

from cases import children

from corpus import SUPPORT

CASES_SCRIPT = SUPPORT / "shard_map_cases.py"
LAYER_ONE = {"forward": 1, "backward_from_indices": 1}
LAYER_TWO = {"forward": 2, "backward_from_indices": 2}
EXPECTED_CALLS = {
    "full_manual_pool_grad": LAYER_ONE,
    "full_manual_pool_grad_through_enable": LAYER_ONE,
    "full_manual_bare_pool_grad": {"backward_from_input": 1},
    "partially_manual_pool_grad": LAYER_ONE,
    "partially_manual_pool_grad_through_enable": LAYER_ONE,
    "jit_inside_shard_map": LAYER_ONE,
    "jit_inside_jit_inside_shard_map": LAYER_ONE,
    "depth_manual_local_pool": LAYER_ONE,
    "depth_manual_halo_exchanged_by_the_body": LAYER_ONE,
    # the shard_map body's pool and the automatic pool beside it
    "shard_map_inside_jit_sharded_arguments": LAYER_TWO,
    "shard_map_inside_jit_sharded_arguments_through_enable": LAYER_TWO,
    "psum_weight_gradient_train_step": LAYER_TWO,  # two pooling layers
    "psum_weight_gradient_train_step_through_enable": LAYER_TWO,
}


@pytest.fixture(scope="module", params=[4, 8], ids=lambda n: f"{n}_devices")
def results(request) -> dict[str, dict]:
    (records,) = children.run(CASES_SCRIPT, [request.param])
    return {record["case"]: record for record in records}


def test_every_case_ran(results):
    assert sorted(results) == sorted(EXPECTED_CALLS)


@pytest.mark.parametrize("case", list(EXPECTED_CALLS))
def test_rewritten_with_jax_jit_results(results, case):
    record = results[case]
    assert record["max_difference"] == 0.0
    expected = {kind: EXPECTED_CALLS[case].get(kind, 0) for kind in record["kernel_calls"]}
    assert record["kernel_calls"] == expected
    assert record["pool_gradient_ops_left"] == 0 < record["plain_pool_gradient_ops"]  # XLA:CPU's scatter, in the plain program only
    assert record["reduce_window_left"] == 0  # the forward call replaced the forward max pool


@pytest.mark.parametrize("case", list(EXPECTED_CALLS))
def test_no_collective_beyond_the_programs_own(results, case):
    record = results[case]
    assert record["rewritten_collectives"] == record["plain_collectives"], record
    assert record["rewritten_out_shardings"] == record["plain_out_shardings"]
