"""Sanity checks of the real-lowering fixtures in tests/fixtures.

The fixtures are produced by ``scripts/lower_fixtures.py``. These tests check
that the manifest and the files agree: every entry has its file, every file is
listed, each module parses and verifies in a context with the StableHLO
dialect, its ``stablehlo.select_and_scatter`` count and ``main`` signature
match the manifest, and each module compiles and runs on XLA:CPU with random
inputs (through ``oracles/xla_runner.py``), giving results of the recorded shapes.
"""

from __future__ import annotations

import numpy as np
import pytest

from oracles.xla_runner import MLIR_TO_NUMPY, run_stablehlo

from corpus import ENTRIES, FIXTURES

pytestmark = pytest.mark.needs_flax
IDS = [e["name"] for e in ENTRIES]


def _context():
    from jax._src.interpreters import mlir as jax_mlir

    return jax_mlir.make_ir_context()


def _count_ops(module, name: str) -> int:
    n = 0

    def cb(op):
        nonlocal n
        if op.operation.name == name:
            n += 1
        from jax.extend.mlir import ir

        return ir.WalkResult.ADVANCE

    module.operation.walk(cb)
    return n


def random_inputs(entry: dict, seed: int = 0) -> list[np.ndarray]:
    """Random inputs for a manifest entry's ``args`` (normal floats, small ints)."""
    rng = np.random.default_rng(seed)
    out = []
    for a in entry["args"]:
        dt = np.dtype(a["dtype"]) if a["dtype"] != "bfloat16" else MLIR_TO_NUMPY["bf16"]
        if np.issubdtype(dt, np.integer):
            out.append(rng.integers(0, 4, a["shape"]).astype(dt))
        elif dt == np.bool_:
            out.append(rng.integers(0, 2, a["shape"]).astype(bool))
        else:
            out.append(rng.standard_normal(a["shape"]).astype(np.float32).astype(dt))
    return out


def test_manifest_matches_directory():
    listed = {e["file"] for e in ENTRIES}
    on_disk = {p.name for p in FIXTURES.glob("*.mlir")}
    assert listed == on_disk
    assert len(IDS) == len(set(IDS))
    for e in ENTRIES:
        assert e["source"] in {"jax", "flax.linen", "flax.nnx", "equinox", "tensorflow", "keras", "torch-xla"}
        if e["negative"]:
            assert e["expected_pool_gradients"] == 0
        else:
            assert e["expected_pool_gradients"] == e["select_and_scatter_count"] > 0


@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
def test_fixture_parses_and_counts(entry):
    from jax.extend.mlir import ir

    text = (FIXTURES / entry["file"]).read_text()
    with _context():
        module = ir.Module.parse(text)
        assert module.operation.verify()
        assert _count_ops(module, "stablehlo.select_and_scatter") == entry["select_and_scatter_count"]
        assert _count_ops(module, "stablehlo.reduce_window") == entry["reduce_window_count"]
        main = [op for op in module.body.operations
                if op.operation.name == "func.func"
                and ir.StringAttr(op.attributes["sym_name"]).value == "main"]
        assert len(main) == 1
        ftype = ir.FunctionType(ir.TypeAttr(main[0].attributes["function_type"]).value)
        shapes = [list(ir.RankedTensorType(t).shape) for t in ftype.inputs]
        assert shapes == [a["shape"] for a in entry["args"]]


@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
def test_fixture_runs_on_xla_cpu(entry):
    text = (FIXTURES / entry["file"]).read_text()
    outs = run_stablehlo(text, random_inputs(entry))
    assert len(outs) == len(entry["results"])
    for o, r in zip(outs, entry["results"]):
        assert list(o.shape) == r["shape"]
        assert o.dtype == (MLIR_TO_NUMPY["bf16"] if r["dtype"] == "bfloat16" else np.dtype(r["dtype"]))
        assert np.all(np.isfinite(o.astype(np.float32)))


def test_runner_matches_jax_multi_result_bf16():
    """The runner gives what jax.jit gives, for two results of mixed dtypes."""
    import jax
    import jax.numpy as jnp

    def fn(x, y):
        return (x * 2).astype(jnp.bfloat16), jnp.sum(y) + 1.0

    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    y = np.linspace(-1, 1, 5).astype(MLIR_TO_NUMPY["bf16"])
    text = jax.jit(fn).lower(x, y).as_text()
    got = run_stablehlo(text, [x, y])
    want = [np.asarray(v) for v in jax.jit(fn)(x, y)]
    assert len(got) == 2
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g.astype(np.float32), w.astype(np.float32))
