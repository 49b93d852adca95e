"""The jaxlib MLIR Python API the pass is built on is there, and its absence is reported clearly."""

from __future__ import annotations

import importlib.metadata
import re

import pytest

from pool3d_pass import jax_compat
from pool3d_pass.ir import context as ir_context

from corpus import ROOT

PYPROJECT = ROOT / "pyproject.toml"


def test_installed_jax_and_jaxlib_are_in_the_supported_range():
    # The pass relies on jaxlib's MLIR bindings and on JAX internals; CI tests
    # the ends of the range (make test: 0.12.1 in .venv, 0.9.0 in .venv-jax09).
    for package in ("jax", "jaxlib"):
        version = importlib.metadata.version(package)
        assert jax_compat.is_supported(version), (package, version, jax_compat.SUPPORTED_RANGE)


def test_pyproject_pins_the_range_jax_compat_states():
    text = PYPROJECT.read_text()
    build, project = text.split("[project]", 1)
    spec = jax_compat.supported_range_text()
    for package in ("jax", "jaxlib"):
        pins = re.findall(rf'"{package}([<>=!~][^"]*)"', project)
        assert pins and all(pin == spec for pin in pins), (package, pins, spec)
    # The kernel is built against the oldest supported jaxlib's FFI headers: a
    # newer FFI API version is refused by an older jaxlib, not the reverse.
    assert re.findall(r'"jaxlib([<>=!~][^"]*)"', build) == [f"=={jax_compat.SUPPORTED_RANGE[0]}"]


def test_version_range_arithmetic():
    assert jax_compat.parse_version("0.9.0.1") == (0, 9, 0, 1)
    assert jax_compat.parse_version("0.10.3.dev20260101") == (0, 10, 3)
    versions = ("0.8.3", "0.9.0", "0.9.0.1", "0.10.2", "0.11.2", "0.12.0.1", "0.12.9", "0.13.0")
    assert [jax_compat.is_supported(v) for v in versions] == [False, True, True, True, True, True, True, False]


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
    assert f"jaxlib{jax_compat.supported_range_text()}" in message
    assert f"jaxlib {jax_compat.jaxlib_version()} lacks" in message


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


def test_file_locations_unnest_jax_locations_on_this_jaxlib():
    # jaxlib 0.10 downcasts locations to FileLineColLoc/NameLoc/CallSiteLoc,
    # 0.9 answers Location.is_a_*(): jax_compat.file_locations reads both.
    ir = ir_context.ir
    with ir_context.make_context():
        callee = ir.Location.file("model.py", 12, 8)
        caller = ir.Location.file("train.py", 3, 4)
        location = ir.Location.name("jit(f)/select_and_scatter", ir.Location.callsite(callee, [caller]))
        frames = [(f.filename, f.start_line, f.start_col) for f in jax_compat.file_locations(location)]
        assert frames == [("model.py", 12, 8), ("train.py", 3, 4)]
        assert jax_compat.file_locations(ir.Location.unknown()) == []
