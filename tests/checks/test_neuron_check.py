"""`make neuron-check` (checks/neuron_check.py) off a Neuron host: its skip line, and a dry run of its steps."""

from __future__ import annotations

import json

import pytest

from checks import neuron_check
from pool3d_pass.bindings import neuron

pytestmark = pytest.mark.usefixtures("cpu_kernels")


def test_without_the_sdk_it_skips_with_one_line_and_status_0(capsys):
    if not neuron.missing_packages():
        pytest.skip("this Python has the Neuron SDK: neuron-check runs instead of skipping")
    assert neuron_check.main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("neuron-check skipped: no Neuron device/SDK (") and out.count("\n") == 1


def test_a_dry_run_checks_every_layer_and_program_it_names(tmp_path, capsys):
    report = tmp_path / "report.json"
    status = neuron_check.main([
        "--dry-run", "--repeats", "1", "--fixtures", "jax_ncdhw_k3s2_p1_f32", "--bench-cases", "1", "--out", str(report)
    ])
    assert status == 0, capsys.readouterr().out
    result = json.loads(report.read_text())
    # the fixture's layer and the first bench case's, each with finite and special inputs
    assert len(result["layers"]) == 2 and all(len(row["checks"]) == 2 for row in result["layers"])
    fixture, *bench = result["programs"]  # the fixture, then the bench's quick cases
    assert fixture["program"] == "jax_ncdhw_k3s2_p1_f32" and fixture["rewritten"] == 1
    assert len(bench) == 1 and bench[0]["rewritten"] == 1
    assert all(row["rewritten_vs_contract"] <= 2e-2 for row in result["programs"])
