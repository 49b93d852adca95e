"""The benchmark harness (bench/): its helpers compute the right things. No timing is asserted.

* `forward.offsets_to_flat` turns the forward call's window offsets into
  torch's flat indices (checked against torch on the pure-JAX reference
  forward, NCDHW, NDHWC and 2-D);
* `rewritten.census` / `strategy_of` read which calls a compiled program runs;
* a tiny "user view" job runs every variant and its results agree with XLA;
* the Flax C3D section (quick shapes) rewrites the pools of its train step,
  leaves its inference step's to XLA (the cpu speed rule), and gets XLA's
  results;
* a stored reference run still renders (`python -m bench.run --table-from`), and
  the same run marked a quick run (`--quick`) renders as one speed table with no
  target verdicts.
"""

from __future__ import annotations

import json
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bench import forward, rewritten, tables
from cases import pooling
from pool3d_pass.bindings import reference

from corpus import ROOT

BENCH = ROOT / "bench"

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

SMALL = [
    pooling.Case((2, 3, 6, 7, 8), (2, 2, 2), (2, 2, 2), (0, 0, 0)),
    pooling.Case((1, 2, 5, 6, 7), (3, 3, 3), (2, 2, 2), (1, 1, 1)),
    pooling.Case((1, 5, 6, 7, 3), (3, 2, 3), (1, 2, 1), (1, 0, 1), layout="NDHWC"),
    pooling.Case((2, 3, 9, 8), (3, 3), (2, 2), (1, 1), layout="NCHW"),
]


@pytest.mark.needs_torch
@pytest.mark.skipif(torch is None, reason="torch not installed")
@pytest.mark.parametrize("case", SMALL, ids=lambda c: c.name)
def test_offsets_to_flat_names_torchs_indices(case):
    x_np, _ = pooling.inputs(case)
    attrs = pooling.kernel_attrs(case)
    _, offsets = jax.jit(partial(reference.max_pooling_3d_forward, **attrs))(pooling.as_rank5(jnp.asarray(x_np), case))
    tp = pooling.TorchPool(case, torch)
    _, idx = tp.pool_with_indices(tp.tensor(x_np))
    np.testing.assert_array_equal(forward.offsets_to_flat(case, np.asarray(offsets)), idx.contiguous().numpy())


def test_strategy_of_reads_the_calls():
    assert rewritten.strategy_of({"forward": 1, "backward_from_indices": 1}) == "indices"
    assert rewritten.strategy_of({"backward_from_input": 2}) == "indices (fused)"
    assert rewritten.strategy_of({"backward": 3}) == "recompute"
    assert rewritten.strategy_of({"backward": 0}) == "none"


def test_census_counts_the_rewritten_call_and_xlas_ops():
    case = SMALL[1]
    pool = pooling.pool_fn(case)
    x_np, g_np = pooling.inputs(case)

    def grad(x, g):
        return jax.vjp(pool, x)[1](g)[0]

    plain, rew, counts = rewritten.compile_both(grad, jnp.asarray(x_np), jnp.asarray(g_np))
    plain_counts = rewritten.census(plain)
    assert sum(plain_counts[k] for k in ("backward", "forward", "backward_from_indices", "backward_from_input")) == 0
    assert plain_counts["scatter"] + plain_counts["select-and-scatter"] >= 1
    assert rewritten.strategy_of(counts) != "none"
    forced = rewritten.census(rewritten.compile_rewritten(grad, jnp.asarray(x_np), jnp.asarray(g_np),
                                                          strategy="recompute"))
    assert forced["backward"] == 1 and rewritten.strategy_of(forced) == "recompute"


def test_user_view_job_agrees_with_xla():
    from bench import user_view

    case = SMALL[1]
    x_np, g_np = pooling.inputs(case)
    x, g = jnp.asarray(x_np), jnp.asarray(g_np)
    for job in user_view.JOBS:
        record = user_view.run_job(case, job, x, g, x_np, g_np, repeats=1)
        assert record["strategy"] != "none"
        assert {"xla", "pool3d"} <= set(record["ms"])
        # f32 without ties: equal up to the order overlapping windows are summed in.
        assert all(v <= 1e-5 for v in record["checks"].values()), record["checks"]


def test_flax_c3d_steps_are_rewritten_with_xlas_results():
    pytest.importorskip("flax", reason="flax is not in this environment (the pass-level venv)")
    from bench import flax_c3d
    from cases import c3d

    record = flax_c3d.run_precision("bf16", c3d.QUICK, log=lambda _: None)
    levels = len(c3d.QUICK["channels"])
    train, inference = record["train"], record["inference"]
    assert train["census"]["forward"] == train["census"]["backward_from_indices"] == levels
    assert train["same_loss"] and train["updated_params_max_abs_diff"] == 0.0
    # channels-last windows that do not overlap: the cpu speed rule leaves inference pools to XLA
    # (bindings/cpu/speed.py), so the inference step is jax.jit's own program
    assert inference["forward_output_calls"] == 0 and inference["reduce_windows_left"] == levels
    assert inference["logits_bit_identical"]
    section = {"model": "C3D", "input_shape": list(c3d.QUICK["batch"]),
               "channels": list(c3d.QUICK["channels"]), "repeats": 1, "precisions": [record]}
    machine = {"cpu_model": "test", "cpus_usable": 1, "memory_gib": 1, "python": "3", "jax": "0",
               "jaxlib": "0", "torch": None, "date": "today"}
    text = tables.render({"mode": "quick", "machine": machine, "wall_s": 0.0, "flax_c3d": section})
    assert "| bf16 | train step (Adam) |" in text and "loss equal: True; updated parameters max |diff| 0 |" in text
    assert "Targets" not in text


def test_stored_reference_run_renders():
    stored = sorted((BENCH / "results").glob("reference-*.json"))
    assert stored
    for path in stored:
        result = json.loads(path.read_text())
        text = tables.render(result)
        assert "Targets" in text, path
        # each section the run holds is rendered (a run of some sections: python -m bench.run --only)
        if "pool_backward" in result:
            assert "Max-pool backward" in text, path
        if "forward" in result:
            assert "The forward alone" in text, path


def test_a_quick_run_prints_no_target_verdicts():
    # A full run's record with missed targets, as a quick run would carry it: the speed table, no verdict.
    full = json.loads((BENCH / "results" / "reference-2026-12-04-1459.json").read_text())
    assert full["mode"] == "full"
    assert "### Targets" in tables.render(full) and "**no**" in tables.render(full)
    text = tables.render({**full, "mode": "quick"})
    assert "Targets" not in text and "**no**" not in text and "| yes |" not in text


def test_a_quick_run_prints_one_speed_table_of_layers_and_the_step():
    # A full run's record rendered as a quick run: a row per layer and job (medians, ratios of medians, whether
    # the results equal XLA's), then the training step; the other sections' tables after it, as in a full run.
    full = json.loads((BENCH / "results" / "reference-2026-12-04-1459.json").read_text())
    text = tables.render({**full, "mode": "quick"})
    lines = text.splitlines()
    header = lines.index(tables._row(["layer", "job", "XLA", "pool3d_pass.jit", "PyTorch", "XLA / pool3d_pass.jit",
                                      "PyTorch / pool3d_pass.jit", "results vs XLA"]))
    rows = lines[header + 2:lines.index("", header)]
    assert len(rows) == 2 * len(full["user_view"]["cases"]) + 1
    case, job = full["user_view"]["cases"][0], full["user_view"]["cases"][0]["jobs"][0]
    ms, ratios = job["ms"], job["ratios_of_median"]
    assert rows[0] == (f"| {case['case']} | gradient only | {ms['xla']['median_ms']:.3g} | "
                       f"{ms['pool3d']['median_ms']:.3g} | {ms['torch']['median_ms']:.3g} | "
                       f"{ratios['xla_vs_pool3d']:.3g}x | {ratios['torch_vs_pool3d']:.3g}x | equal |")
    step = full["train_step"]
    assert rows[-1].startswith("| training step, 3-D CNN (4,1,32,64,64) |")
    assert f"| {step['speedup_of_median']:.3g}x | n/a | equal |" in rows[-1]
    assert any(row.endswith("| bf16 within 0.25 (summed in f32) |") for row in rows)
    assert "### 1. The forward alone" in text and "user's view: one pooling layer" not in text


def test_a_quick_row_says_where_results_differ():
    record = {"user_view": {"cases": [
        {"case": "NDHWC bf16 (2, 8, 16, 16, 8) k3 s2 p1", "jobs": [{"checks": {"pool3d_dx_max_abs_diff_vs_xla": 0.03}}]},
        {"case": "NCDHW f32 (2, 4, 8, 16, 16) k2 s2", "jobs": [{"checks": {"pool3d_dx_max_abs_diff_vs_xla": 0.0,
                                                                       "torch_dx_max_abs_diff_vs_xla": 1.0}}]}]}}
    for case in record["user_view"]["cases"]:
        case["jobs"][0].update(job="gradient only", ms={"xla": {"median_ms": 2.0}, "pool3d": {"median_ms": 1.0}},
                               ratios_of_median={"xla_vs_pool3d": 2.0})
    assert [row[-1] for row in tables.quick_rows(record)] == ["bf16 within 0.03 (summed in f32)", "equal"]
    record["user_view"]["cases"][1]["jobs"][0]["checks"]["pool3d_dx_max_abs_diff_vs_xla"] = 0.5
    assert tables.quick_rows(record)[1][-1] == "**differ** (max abs diff 0.5)"
    assert tables.quick_rows(record)[1][2:8] == ["2", "1", "n/a", "2x", "n/a", "**differ** (max abs diff 0.5)"]


def _from_indices_target(ratios: dict) -> dict:
    section = {"cases": [{"case": "c", "ratios_of_min": {"kernel_vs_xla_speedup": 1.0, "floor_fraction": 1.0,
                                                          **ratios}}]}
    (item,) = [t for t in tables.targets({"pool_backward": section}) if t["target"].startswith("from_indices")]
    return item


def test_from_indices_target_names_the_bound_that_puts_it_out_of_reach():
    # A run that measured JAX's own call: the bound counts it.
    item = _from_indices_target({"from_indices_vs_torch_speedup": 0.9, "torch_vs_from_indices_floor": 5.0,
                                 "torch_vs_jax_call_and_from_indices_floor": 1.2})
    assert not item["met"] and "JAX's call + floor) = 1.2x" in item["measured"]
    # Within reach: no bound printed.
    item = _from_indices_target({"from_indices_vs_torch_speedup": 0.9, "torch_vs_from_indices_floor": 5.0,
                                 "torch_vs_jax_call_and_from_indices_floor": 3.0})
    assert not item["met"] and "out of reach" not in item["measured"]
    # An older run, without the call: the floor alone.
    item = _from_indices_target({"from_indices_vs_torch_speedup": 1.6, "torch_vs_from_indices_floor": 1.4})
    assert item["met"] and "torch / floor = 1.4x" in item["measured"]
