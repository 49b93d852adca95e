"""The binding mechanism: choosing a binding by platform, splicing it, and refusing.

Spliced programs run through XLA:CPU and must give the original's gradients:
the pure-JAX reference binding and the CPU FFI binding. Tests that need the
Neuron SDK skip where it is missing, and say so.
"""

from __future__ import annotations

import numpy as np
import pytest

import pool3d_pass
from oracles.xla_runner import run_stablehlo
from pool3d_pass.bindings import registry
from pool3d_pass.bindings.neuron import NeuronPackagesMissing, missing_packages
from pool3d_pass.bindings.reference.binding import functions as reference_functions
from pool3d_pass.bindings.registry import Binding, CallSignature, Functions, contract_preconditions
from pool3d_pass.contract import TARGETS
from pool3d_pass.contract.pool_config import PoolConfig

from corpus import BY_NAME as ENTRIES
from corpus import fixture_text, tie_heavy_inputs

SPLICED = ["jax_ncdhw_k3s2_p1_f32", "jax_ndhwc_k2s2_valid_bf16", "jax_ncdhw_k2s2_same_even_f32", "flax_linen_cnn3d_grad_params_and_input_f32"]


def assert_same_results(original: str, rewritten: str, entry) -> None:
    args = tie_heavy_inputs(entry)
    for before, after in zip(run_stablehlo(original, args), run_stablehlo(rewritten, args), strict=True):
        np.testing.assert_allclose(np.asarray(after, np.float64), np.asarray(before, np.float64), rtol=1e-6, atol=1e-6)


pytestmark = pytest.mark.usefixtures("cpu_kernels")


def test_bindings_follow_the_platform():
    assert registry.binding_for("cpu").platform == "cpu"
    assert registry.binding_for("neuron").platform == "neuron"
    assert registry.binding_for("tpu") is None
    assert {"cpu", "neuron", "reference"} <= set(registry.platforms())


@pytest.mark.parametrize("name", SPLICED)
def test_reference_binding_is_spliced_and_matches_the_original(name):
    text = fixture_text(name)
    rewritten, report = pool3d_pass.rewrite_text(text, target="reference")

    assert report.rewritten == ENTRIES[name]["expected_pool_gradients"]
    assert "select_and_scatter" not in rewritten and "custom_call" not in rewritten
    assert_same_results(text, rewritten, ENTRIES[name])


@pytest.mark.parametrize("name", SPLICED)
def test_cpu_binding_is_spliced_and_matches_the_original(name):
    text = fixture_text(name)
    rewritten, report = pool3d_pass.rewrite_text(text, target="cpu")

    assert report.rewritten == ENTRIES[name]["expected_pool_gradients"]
    gradient_calls = [f"@{TARGETS[call]}(" for call in ("backward", "backward_from_indices", "backward_from_input")]
    assert sum(rewritten.count(call) for call in gradient_calls) == report.rewritten
    assert_same_results(text, rewritten, ENTRIES[name])


def test_platform_without_binding_is_refused_naming_the_platforms():
    text = fixture_text("jax_ncdhw_k3s2_p1_f32")
    with pytest.raises(ValueError) as error:
        pool3d_pass.rewrite_text(text, target="no-such-platform")
    assert str(error.value) == ("unknown target 'no-such-platform'; expected one of "
                                + ", ".join(["neutral", *registry.platforms()]))


def test_binding_preconditions_refuse_with_a_remark(monkeypatch):
    refuse_bf16 = Binding(
        "picky",
        Functions(reference_functions, ("backward",)),
        "cpu",
        lambda signature: contract_preconditions(signature)
        or ("no bf16 here" if signature.input_type == "bf16" else None),
    )
    monkeypatch.setitem(registry._BINDINGS, "picky", refuse_bf16)

    _, bf16 = pool3d_pass.rewrite_text(fixture_text("jax_ndhwc_k2s2_valid_bf16"), target="picky")
    _, f32 = pool3d_pass.rewrite_text(fixture_text("jax_ncdhw_k3s2_p1_f32"), target="picky")

    assert bf16.rewritten == 0 and bf16.missed[0].reason == "picky binding: no bf16 here"
    assert f32.rewritten == 1


@pytest.mark.parametrize(
    "signature, reason",
    [
        (CallSignature("f32", "bf16", "f32", PoolConfig((2, 2, 2), (2, 2, 2), (0, 0, 0))), "differ in element type"),
        (CallSignature("f32", "f32", "f32", PoolConfig((17, 17, 17), (1, 1, 1), (0, 0, 0))), "4913 > 4096"),
        (CallSignature("f32", "f32", "f32", PoolConfig((2, 2, 2), (2, 2, 2), (0, 0, 0), "NHWC", "NHWC")), "are not NCDHW or NDHWC"),
    ],
)
def test_contract_preconditions(signature, reason):
    assert reason in contract_preconditions(signature)
    assert reason in registry.binding_for("neuron").unsupported(signature)


def test_contract_preconditions_accept_a_valid_call():
    ok = CallSignature("bf16", "bf16", "bf16", PoolConfig((3, 3, 3), (2, 2, 2), (1, 1, 1), "NDHWC", "NDHWC"))
    assert contract_preconditions(ok) is None
    assert registry.binding_for("neuron").unsupported(ok) is None


@pytest.mark.skipif(not missing_packages(), reason="the Neuron SDK is installed; the missing-package error cannot occur")
def test_neuron_target_without_the_sdk_fails_with_one_line_naming_the_packages():
    with pytest.raises(NeuronPackagesMissing) as raised:
        pool3d_pass.rewrite_text(fixture_text("jax_ncdhw_k3s2_p1_f32"), target="neuron")
    message = str(raised.value)
    assert "\n" not in message
    assert all(package in message for package in missing_packages())


@pytest.mark.skipif(
    bool(missing_packages()),
    reason="needs the Neuron SDK 2.33+ (not installable on this machine); run on a Trn2/Trn3 host (docs/neuron.md); "
    "tests/bindings/neuron/test_neuron_binding.py drives the binding through a stand-in",
)
def test_neuron_binding_produces_the_nki_custom_call():
    rewritten, report = pool3d_pass.rewrite_text(fixture_text("jax_ncdhw_k3s2_p1_f32"), target="neuron")
    assert report.rewritten == 1
    assert "AwsNeuronCustomNativeKernel" in rewritten


@pytest.mark.parametrize("target", ["cpu", "reference"])
def test_neutral_calls_of_an_earlier_run_are_bound_later(target):
    text = fixture_text("flax_linen_cnn3d_grad_params_and_input_f32")
    neutral, first = pool3d_pass.rewrite_text(text)
    bound, second = pool3d_pass.rewrite_text(neutral, target=target)
    again, third = pool3d_pass.rewrite_text(bound, target=target)

    assert first.rewritten == 2 and (second.candidates, second.bound) == (0, 2)
    assert "api_version = 4" not in bound  # no neutral call is left
    assert (third.bound, third.rewritten) == (0, 0) and again == bound
    assert_same_results(text, bound, ENTRIES["flax_linen_cnn3d_grad_params_and_input_f32"])


def test_neutral_call_left_unbound_is_a_neutral_call_remark(monkeypatch):
    picky = Binding("picky", Functions(reference_functions, ("backward",)), "cpu",
                    lambda signature: "no calls bound here")
    monkeypatch.setitem(registry._BINDINGS, "picky", picky)
    neutral, _ = pool3d_pass.rewrite_text(fixture_text("jax_ncdhw_k3s2_p1_f32"))
    unchanged, report = pool3d_pass.rewrite_text(neutral, target="picky")
    assert unchanged == neutral and report.bound == 0 and report.unbound == 1
    assert [(m.subject, m.reason) for m in report.missed] == [("neutral call", "picky binding: no calls bound here")]
    assert report.lines()[-1] == "pool3d: 1 neutral call(s) found, 0 bound, 1 left unbound"




def test_every_binding_loads_the_functions_of_the_calls_it_states():
    """A binding's calls are known without loading anything; its loader returns exactly those, by name."""
    def unloadable():
        raise AssertionError("implements() must not load the functions")

    assert Binding("lazy", Functions(unloadable, ("backward",)), "cpu", contract_preconditions).implements("backward")
    for platform in registry.platforms():
        binding = registry.binding_for(platform)
        for functions in (binding.functions, binding.partitioned_functions):
            assert set(functions.load()) == set(functions.calls), platform
            assert [functions[call].__name__ for call in functions] == [f"max_pooling_3d_{c}" for c in functions]


def _float16_backward():
    """A backward whose result type is not the call's (f16 for an f32 call)."""
    from pool3d_pass.bindings.reference import calls

    return {"backward": lambda *operands, **attributes: calls.max_pooling_3d_backward(
        *operands, **attributes).astype("float16")}


def test_a_splice_returning_the_wrong_type_is_refused_before_anything_moves():
    from jaxlib.mlir import ir

    from pool3d_pass.ir.context import make_context
    from pool3d_pass.options import BindingSettings
    from pool3d_pass.splicing import BindingLoweringError, splice_call

    binding = Binding("float16", Functions(_float16_backward, ("backward",)), "cpu", contract_preconditions)
    pooled, full = "tensor<1x1x2x2x2xf32>", "tensor<1x1x4x4x4xf32>"
    with make_context(), ir.Location.unknown():
        module = ir.Module.parse(f"func.func @main(%g: {pooled}, %x: {full}, %y: {pooled}) -> {full} {{\n"
                                 f"  return %x : {full}\n}}")
        before = str(module)
        block = module.body.operations[0].regions[0].blocks[0]
        with ir.InsertionPoint.at_block_terminator(block), pytest.raises(BindingLoweringError) as refused:
            splice_call(binding, "backward", list(block.arguments), [ir.RankedTensorType.parse(full)],
                        kernel_size=(2, 2, 2), stride=(2, 2, 2), padding=(0, 0, 0), data_format="NCDHW",
                        settings=BindingSettings())
        assert "float16 binding of backward returned ['tensor<1x1x4x4x4xf16>']" in str(refused.value)
        assert str(module) == before
