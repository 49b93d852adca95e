"""The strategies: which calls each gradient gets, per platform, and that every strategy keeps the meaning.

* `auto` resolves per platform: recompute for neutral output and for a
  binding with only the backward call (Neuron), indices where the binding has
  the layer calls (cpu, reference).
* Under `indices`, every fixture's gradients are rewritten: a forward in the
  same block becomes the forward call (none inserted, the forward erased), a
  bare gradient gets the fused call; the output verifies and is a fixed point.
* A binding that lacks a call never receives it: the strategy falls back, and
  the remark says why.
* Numerics: the rewritten programs (pure-JAX reference binding and CPU kernel)
  give the spec's results on tie-heavy inputs, forward outputs bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest

import pool3d_pass
from oracles.float_bits import assert_same_bits
from oracles.xla_runner import run_stablehlo
from pool3d_pass.bindings import registry
from pool3d_pass.bindings.reference.binding import functions as reference_functions
from pool3d_pass.bindings.registry import Binding, Functions, contract_preconditions
from pool3d_pass.contract import TARGETS
from pool3d_pass.rewriting.strategy import preferred_strategy

from corpus import BY_NAME as ENTRIES
from corpus import fixture_text, tie_heavy_inputs
from spec_oracle import spec_outputs

POSITIVE = sorted(name for name, e in ENTRIES.items() if not e["negative"])
# A training step (forward + gradient), a bare gradient, a returned primal,
# explicit and attribute padding, asymmetric padding, NDHWC bf16, 2-D, rank 6,
# two pools, and torch-xla's pad + reduce_window forward.
NUMERICS = [
    "jax_vjp_with_primal_f32",
    "jax_ncdhw_k3s2_p1_f32",
    "jax_ncdhw_k2s2_same_even_f32",
    "jax_ndhwc_k2s2_valid_bf16",
    "jax_nchw_2d_k2s2_f32",
    "jax_vmap_grad_ndhwc_rank6_f32",
    "jax_checkpoint_two_layer_f32",
    "flax_linen_cnn3d_train_step_bf16",
    "tf_max_pool3d_ndhwc_k3s2_same_odd7_f32",
    "txla_conv3d_maxpool3d_train_step_f32",
]


def calls_in(text: str) -> dict[str, int]:
    return {call: text.count(f"@{target}(") for call, target in TARGETS.items()}


pytestmark = pytest.mark.usefixtures("cpu_kernels")


@pytest.fixture
def backward_only(monkeypatch):
    """A platform whose binding has only the backward call (like Neuron's), running the reference."""
    binding = Binding(
        "backward-only", Functions(reference_functions, ("backward",)), "cpu",
        contract_preconditions,
    )
    monkeypatch.setitem(registry._BINDINGS, binding.platform, binding)
    return binding


def test_auto_is_the_platforms_choice(backward_only):
    text = fixture_text("jax_vjp_with_primal_f32")
    for target, expected in [("neutral", "recompute"), ("reference", "indices"), ("backward-only", "recompute")]:
        _, report = pool3d_pass.rewrite_text(text, target=target)
        assert report.strategy == expected, target
        assert report.rewritten == 1
    assert preferred_strategy(registry.binding_for("neuron")) == "recompute"


def test_unknown_strategy_is_refused():
    with pytest.raises(ValueError, match="unknown strategy 'fastest'"):
        pool3d_pass.rewrite_text(fixture_text("jax_ncdhw_k3s2_p1_f32"), strategy="fastest")


@pytest.mark.parametrize("name", POSITIVE)
def test_indices_strategy_rewrites_every_fixture(name):
    text = fixture_text(name)
    rewritten, report = pool3d_pass.rewrite_text(text, strategy="indices")
    again, second = pool3d_pass.rewrite_text(rewritten, strategy="indices")

    expected = ENTRIES[name]["expected_pool_gradients"]
    assert report.rewritten == expected and not report.missed
    assert report.from_indices + report.from_input == expected
    assert report.forward_inserted == report.forward_reused == 0
    calls = calls_in(rewritten)
    assert calls["backward"] == 0
    assert calls["forward"] == report.forward_replaced + (calls["backward_from_indices"] - report.from_indices)
    assert calls["backward_from_indices"] == report.from_indices
    assert calls["backward_from_input"] == report.from_input
    # Forwards are replaced, never inserted: the program has fewer reduce_windows, not more.
    assert rewritten.count('"stablehlo.reduce_window"') == text.count('"stablehlo.reduce_window"') - report.forward_replaced
    assert "select_and_scatter" not in rewritten
    assert (second.candidates, second.rewritten) == (0, 0) and again == rewritten


def test_training_steps_replace_their_forward():
    # A JAX training step keeps the forward; torch-xla writes it as pad(-inf) + reduce_window.
    for name in ("jax_vjp_with_primal_f32", "flax_linen_cnn3d_train_step_bf16", "txla_conv3d_maxpool3d_train_step_f32"):
        _, report = pool3d_pass.rewrite_text(fixture_text(name), strategy="indices")
        assert report.forward_replaced == report.from_indices == report.rewritten, name


@pytest.mark.parametrize("target", ["reference", "cpu"])
@pytest.mark.parametrize("name", NUMERICS)
def test_indices_strategy_gives_the_spec_results(name, target):
    entry = ENTRIES[name]
    text = fixture_text(name)
    rewritten, report = pool3d_pass.rewrite_text(text, target=target, strategy="indices")
    assert report.rewritten == entry["expected_pool_gradients"]
    args = tie_heavy_inputs(entry)
    expected = spec_outputs(text, args)
    actual = run_stablehlo(rewritten, args)
    for index, (want, got) in enumerate(zip(expected, actual, strict=True)):
        want, got = np.asarray(want, np.float64), np.asarray(got, np.float64)
        if entry["args"][0]["dtype"] == "float32":
            np.testing.assert_array_equal(got, want, err_msg=f"result {index}")  # small integers: exact sums
        else:
            np.testing.assert_allclose(got, want, rtol=2**-7, atol=0, err_msg=f"result {index}")


def test_forward_output_is_bit_identical_on_special_values():
    # jax.vjp keeping the primal returns the forward max pool: under the indices
    # strategy that is the forward call's output, which must equal XLA's
    # reduce_window bit for bit (signed zeros, infinities), NaN where XLA has NaN.
    name = "jax_vjp_with_primal_f32"
    entry = ENTRIES[name]
    text = fixture_text(name)
    rng = np.random.default_rng(3)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0], np.float32)
    args = [specials[rng.integers(0, len(specials), a["shape"])] for a in entry["args"]]
    original = run_stablehlo(text, args)
    for target in ("reference", "cpu"):
        rewritten, report = pool3d_pass.rewrite_text(text, target=target, strategy="indices")
        assert report.forward_replaced == 1
        primal = np.asarray(run_stablehlo(rewritten, args)[0])
        want = np.asarray(original[0])
        assert_same_bits(primal, want, target, nan="any")


def test_a_binding_without_the_layer_calls_gets_recompute_and_a_note(backward_only):
    text = fixture_text("jax_vjp_with_primal_f32")
    rewritten, report = pool3d_pass.rewrite_text(text, target="backward-only", strategy="indices")
    assert report.rewritten == 1 and report.forward_reused == 1 and report.from_indices == 0
    (remark,) = report.remarks()
    assert "recompute strategy: indices strategy not possible (backward-only binding has no forward call;" in remark
    assert "select_and_scatter" not in rewritten and "custom_call" not in rewritten  # the reference, spliced


def test_a_binding_without_the_fused_call_gets_forward_and_from_indices(monkeypatch):
    calls = Functions(reference_functions, [call for call in TARGETS if call != "backward_from_input"])
    binding = Binding("no-fused", calls, "cpu", contract_preconditions)
    monkeypatch.setitem(registry._BINDINGS, binding.platform, binding)
    name = "jax_vjp_unused_primal_f32"  # a bare gradient: no forward in the function
    text = fixture_text(name)
    rewritten, report = pool3d_pass.rewrite_text(text, target="no-fused")
    assert report.strategy == "indices" and report.from_input == 1 and report.forward_replaced == 0
    assert "indices strategy: no forward max-pool before it in its block, forward call inserted" in report.remarks()[0]
    args = tie_heavy_inputs(ENTRIES[name])
    for want, got in zip(spec_outputs(text, args), run_stablehlo(rewritten, args), strict=True):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


@pytest.mark.parametrize("target", ["reference", "cpu"])
def test_neutral_layer_calls_are_bound_later(target):
    name = "flax_linen_cnn3d_grad_params_and_input_f32"
    text = fixture_text(name)
    neutral, first = pool3d_pass.rewrite_text(text, strategy="indices")
    bound, second = pool3d_pass.rewrite_text(neutral, target=target)
    assert first.rewritten == 2
    assert second.bound == sum(calls_in(neutral).values()) and not second.missed
    assert "api_version = 4" not in bound
    args = tie_heavy_inputs(ENTRIES[name])
    for want, got in zip(spec_outputs(text, args), run_stablehlo(bound, args), strict=True):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_neutral_layer_calls_stay_where_the_binding_lacks_them(backward_only):
    neutral, _ = pool3d_pass.rewrite_text(fixture_text("jax_vjp_with_primal_f32"), strategy="indices")
    unchanged, report = pool3d_pass.rewrite_text(neutral, target="backward-only")
    assert unchanged == neutral and report.bound == 0
    assert sorted(m.reason for m in report.missed) == [
        "backward-only binding has no backward_from_indices call",
        "backward-only binding has no forward call",
    ]
