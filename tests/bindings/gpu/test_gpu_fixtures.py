"""Fixtures rewritten for the gpu target, run end to end on CPU in interpret mode, against the spec.

With POOL3D_GPU_INTERPRET=1 the gpu binding's kernels lower as plain StableHLO,
so `pool3d-opt --target=gpu --strategy=...` writes programs XLA:CPU runs. Each
is compared with what the original program computes per the StableHLO spec
(tests/support/spec_oracle.py), by the rules of tests/support/fixture_numerics.py (f32
bit-exact where windows do not overlap). An interpret-mode program takes
seconds to compile, so CI runs a spread of fixtures (every frontend, both
layouts, bf16/f16, the bare-gradient forms, 2-D, ceil mode, second order)
under the indices strategy and a few under recompute;
POOL3D_GPU_ALL_FIXTURES=1 runs every positive fixture under both.
"""

from __future__ import annotations

import os

import pytest

import pool3d_pass
from oracles.xla_runner import run_stablehlo
from pool3d_pass.bindings.gpu import calls
from pool3d_pass.splicing import splice

from corpus import ENTRIES, FIXTURES
from fixture_numerics import compare_outputs, make_args
from spec_oracle import spec_text

pytestmark = pytest.mark.gpu

POSITIVE = [e for e in ENTRIES if not e["negative"]]
SPREAD = {
    "jax_ncdhw_k3s2_p1_f32", "jax_ndhwc_k2s2_valid_bf16", "jax_ncdhw_k2s2_valid_f16", "jax_ncdhw_k3s1_p1_f32",
    "jax_ncdhw_k2s2_same_even_f32", "jax_vjp_unused_primal_f32", "jax_vmap_grad_ndhwc_rank6_f32",
    "jax_checkpoint_f32", "jax_nchw_2d_k2s2_f32", "flax_linen_cnn3d_train_step_bf16",
    "equinox_maxpool3d_k3s2_p1_filter_grad_f32", "tf_max_pool3d_ndhwc_k3s2_same_odd7_f32",
    "tf_max_pool3d_second_order_f32", "keras_maxpooling3d_channels_first_same_train_step_f32",
    "txla_max_pool3d_k2s2_floor_odd7_f32", "txla_max_pool3d_k3s2_p1_ceil_f32", "txla_max_pool3d_k3s2_p1_f16",
    "jax_tpu_ndhwc_k2s2_p1_f32",
}
RECOMPUTE_SPREAD = {"jax_ncdhw_k3s2_p1_f32", "jax_ndhwc_k2s2_valid_bf16", "jax_vjp_unused_primal_f32",
                    "tf_max_pool3d_ndhwc_k3s2_same_odd7_f32"}
ALL = os.environ.get("POOL3D_GPU_ALL_FIXTURES") == "1"
CASES = [
    pytest.param(e, strategy, id=f"{e['name']}-{strategy}")
    for strategy, chosen in (("indices", SPREAD), ("recompute", RECOMPUTE_SPREAD))
    for e in POSITIVE
    if ALL or e["name"] in chosen
]


@pytest.fixture(autouse=True)
def interpreted(monkeypatch):
    monkeypatch.setenv(calls.INTERPRET_ENV, "1")
    splice._lowered.cache_clear()  # lowerings are cached per process: none made without the switch
    yield
    splice._lowered.cache_clear()


def test_the_spread_names_fixtures_that_exist():
    names = {e["name"] for e in POSITIVE}
    assert SPREAD <= names and RECOMPUTE_SPREAD <= names


@pytest.mark.parametrize("entry,strategy", CASES)
def test_rewritten_for_gpu_runs_on_cpu_and_equals_the_spec(entry, strategy):
    text = (FIXTURES / entry["file"]).read_text()
    new_text, report = pool3d_pass.rewrite_text(text, target="gpu", strategy=strategy)
    assert report.rewritten == entry["expected_pool_gradients"], [m.reason for m in report.missed]
    assert "stablehlo.select_and_scatter" not in new_text and "@pool3d." not in new_text
    assert "__gpu$xla.gpu.triton" not in new_text  # interpret mode: plain StableHLO
    args = make_args(entry, "smallint", seed=sum(map(ord, entry["name"])))
    compare_outputs(entry, run_stablehlo(spec_text(text), args), run_stablehlo(new_text, args))
