"""The jaxlib MLIR Python API the pass is built on is there, and its absence is reported clearly."""

from __future__ import annotations

import importlib.metadata

import pytest

from pool3d_pass import ir_context


def test_pinned_jax_and_jaxlib():
    # pyproject pins both exactly: the pass relies on jaxlib's MLIR bindings and
    # on the StableHLO this JAX emits.
    assert importlib.metadata.version("jax") == "0.10.2"
    assert importlib.metadata.version("jaxlib") == "0.10.2"


def test_every_required_mlir_api_is_present():
    ir_context.check_mlir_api()  # raises MissingMlirApi naming what is absent


def test_a_missing_api_is_named(monkeypatch):
    monkeypatch.setattr(
        ir_context,
        "REQUIRED_API",
        (*ir_context.REQUIRED_API, ("jaxlib.mlir.ir", ("NoSuchThing",)), ("jaxlib.no_such_module", ("x",))),
    )
    with pytest.raises(ir_context.MissingMlirApi) as raised:
        ir_context.check_mlir_api()
    message = str(raised.value)
    assert "jaxlib.mlir.ir.NoSuchThing" in message and "jaxlib.no_such_module" in message
    assert "jaxlib==0.10.2" in message


def test_context_parses_the_dialects_jax_emits():
    text = """
    sdy.mesh @mesh = <["x"=2]>
    func.func @f(%a: tensor<2xf32>) -> tensor<2xf32> {
      %0 = chlo.erf %a : tensor<2xf32> -> tensor<2xf32>
      %1 = stablehlo.add %0, %a : tensor<2xf32>
      %2 = mhlo.add %1, %a : tensor<2xf32>
      return %2 : tensor<2xf32>
    }"""
    with ir_context.make_context():
        module = ir_context.ir.Module.parse(text)
        assert module.operation.verify()
