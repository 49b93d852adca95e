"""The pass on real lowerings: rewrite counts, nothing left behind, verifier, idempotence.

Every fixture in tests/fixtures (JAX, Flax linen/nnx and Equinox gradients, and
modules that must come out unchanged) goes through `pool3d_pass.rewrite`.
Numerics of the same fixtures are checked in test_numerics_fixtures.py.
"""

from __future__ import annotations

import pytest
from jaxlib.mlir import ir, passmanager

import pool3d_pass
from pool3d_pass.contract import TARGET_NAME
from pool3d_pass.ir.context import make_context

from corpus import ENTRIES, FIXTURES

POSITIVE = [e for e in ENTRIES if e["expected_pool_gradients"] > 0]
NEGATIVE = [e for e in ENTRIES if e["expected_pool_gradients"] == 0]


def count_ops(module: ir.Module, name: str) -> int:
    found = 0

    def visit(op):
        nonlocal found
        found += op.name == name
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found


def parse_fixture(entry) -> ir.Module:
    return ir.Module.parse((FIXTURES / entry["file"]).read_text())


@pytest.fixture
def context():
    with make_context() as ctx:
        yield ctx


@pytest.mark.parametrize("entry", POSITIVE, ids=[e["name"] for e in POSITIVE])
def test_every_max_pool_gradient_is_rewritten(context, entry):
    module = parse_fixture(entry)
    report = pool3d_pass.rewrite(module)

    assert report.rewritten == entry["expected_pool_gradients"], report.missed
    assert report.candidates == report.rewritten + len(report.missed)
    assert count_ops(module, "stablehlo.select_and_scatter") == 0
    assert count_ops(module, "stablehlo.custom_call") - _custom_calls_before(entry) == report.rewritten
    assert module.operation.verify()


def _custom_calls_before(entry) -> int:
    with make_context():
        return count_ops(parse_fixture(entry), "stablehlo.custom_call")


@pytest.mark.parametrize("entry", POSITIVE, ids=[e["name"] for e in POSITIVE])
def test_second_run_changes_nothing(context, entry):
    module = parse_fixture(entry)
    pool3d_pass.rewrite(module)
    once = str(module)

    again = pool3d_pass.rewrite(module)

    assert (again.candidates, again.rewritten, again.missed) == (0, 0, [])
    assert str(module) == once


@pytest.mark.parametrize("entry", NEGATIVE, ids=[e["name"] for e in NEGATIVE])
def test_other_modules_come_out_unchanged(context, entry):
    module = parse_fixture(entry)
    before = module.operation.get_asm(enable_debug_info=True)

    report = pool3d_pass.rewrite(module)

    assert report.rewritten == 0
    assert module.operation.get_asm(enable_debug_info=True) == before
    assert len(report.missed) == report.candidates == entry["select_and_scatter_count"]
    assert all(miss.reason for miss in report.missed)


def test_min_pooling_is_missed_with_its_reason(context):
    (entry,) = [e for e in ENTRIES if "minpool" in e["name"]]
    report = pool3d_pass.rewrite(parse_fixture(entry))
    assert [m.reason for m in report.missed] == ["select is compare LE (min pooling), not GE (first maximum wins)"]
    assert ".py:" in report.missed[0].location  # the user's source line, from JAX's debug info


def test_runs_in_one_pass_manager_with_upstream_passes(context):
    entry = next(e for e in POSITIVE if e["expected_pool_gradients"] > 1)
    module = parse_fixture(entry)
    reports = []
    pm = passmanager.PassManager("builtin.module")
    pm.add("canonicalize")
    pool3d_pass.add_pass(pm, on_report=reports.append)
    pm.add("cse")

    pm.run(module.operation)

    assert sum(r.rewritten for r in reports) == entry["expected_pool_gradients"]
    assert count_ops(module, "stablehlo.select_and_scatter") == 0
    assert TARGET_NAME in str(module)


def test_rewrite_text_round_trip():
    text = (FIXTURES / POSITIVE[0]["file"]).read_text()
    new_text, report = pool3d_pass.rewrite_text(text)
    assert report.rewritten == POSITIVE[0]["expected_pool_gradients"]
    assert TARGET_NAME in new_text and "select_and_scatter" not in new_text


def test_rewrite_does_not_touch_ir_it_does_not_own(context):
    # Dead code and foldable ops stay: the walk driver neither folds nor deletes.
    module = ir.Module.parse(
        """
        func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
          %dead = stablehlo.constant dense<1.0> : tensor<4xf32>
          %zero = stablehlo.constant dense<0.0> : tensor<4xf32>
          %y = stablehlo.add %x, %zero : tensor<4xf32>
          return %y : tensor<4xf32>
        }"""
    )
    before = str(module)
    report = pool3d_pass.rewrite(module)
    assert (report.candidates, str(module)) == (0, before)


def test_rewrite_in_a_context_with_only_func_and_stablehlo():
    # A user's own context: no sdy dialect, so no sharding rule, the call is complete anyway.
    with make_context(dialects=("stablehlo",)):
        module = ir.Module.parse((FIXTURES / POSITIVE[0]["file"]).read_text())
        report = pool3d_pass.rewrite(module)
        assert report.rewritten == POSITIVE[0]["expected_pool_gradients"]
        assert module.operation.verify() and "sdy.sharding_rule" not in str(module)


def test_attribute_values_are_cached_for_one_run_only(context):
    # The matchers read window attributes through a per-run cache keyed by the
    # (uniqued) attribute: equal attributes of different ops share one entry,
    # and nothing is kept once the run ends (the cache would keep the context alive).
    from pool3d_pass.ir import attributes

    module = ir.Module.parse(
        """
        func.func @f(%x: tensor<4xf32>) -> (tensor<2xf32>, tensor<2xf32>) {
          %a = stablehlo.slice %x [0:4:2] : (tensor<4xf32>) -> tensor<2xf32>
          %b = stablehlo.slice %x [0:4:2] : (tensor<4xf32>) -> tensor<2xf32>
          return %a, %b : tensor<2xf32>, tensor<2xf32>
        }"""
    )
    first, second = list(module.body.operations[0].regions[0].blocks[0].operations)[:2]
    uncached = (attributes.i64_array(first, "strides", ()), attributes.i64_array(second, "strides", ()))
    assert uncached == ((2,), (2,)) and uncached[0] is not uncached[1]
    with attributes.attribute_values_cached():
        cached = (attributes.i64_array(first, "strides", ()), attributes.i64_array(second, "strides", ()))
        assert cached == uncached and cached[0] is cached[1]
    assert attributes._run_cache.values is None

    entry = next(e for e in POSITIVE if e["expected_pool_gradients"] > 1)
    report = pool3d_pass.rewrite(parse_fixture(entry))
    assert report.rewritten == entry["expected_pool_gradients"]
    assert attributes._run_cache.values is None
