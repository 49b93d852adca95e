"""The GPU device check's harness (scripts/gpu_check.py, bench/device_check/): what a lent machine's run relies on.

* the writer appends every record as a complete JSON line, and a line cut
  by a kill is dropped when read back;
* the budget says whether an item still fits;
* the summary stays within what the device tool returns;
* the dry run (interpret mode on CPU) of a stage finishes within its budget,
  and a run killed part-way leaves valid JSON lines of what finished.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from corpus import ROOT  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))

from device_check import summary  # noqa: E402
from device_check.record import JSONL, Budget, Recorder, read_records  # noqa: E402
from device_check.timing import device_cases  # noqa: E402

pytestmark = pytest.mark.gpu

SCRIPT = ROOT / "scripts" / "gpu_check.py"


def test_records_are_appended_as_complete_json_lines(tmp_path):
    first, second = Recorder(tmp_path, "a"), Recorder(tmp_path, "b")
    first.record("calls", item="x", problems=[], diff=float("nan"), ratio=float("inf"))
    second.record("timing", ms={"xla": {"min_ms": 1.5}})
    lines = (tmp_path / JSONL).read_text().splitlines()
    assert [json.loads(line)["stage"] for line in lines] == ["a", "b"]
    assert json.loads(lines[0])["diff"] == "nan" and json.loads(lines[0])["ratio"] == "inf"
    with open(tmp_path / JSONL, "a") as f:  # a kill in the middle of a write
        f.write('{"stage": "c", "kind": "tim')
    assert [r["stage"] for r in read_records(tmp_path)] == ["a", "b"]
    first.table("| a | b |")
    assert (tmp_path / "gpu_check.md").read_text() == "| a | b |\n"


def test_the_budget_says_what_still_fits():
    now = [100.0]
    budget = Budget(10.0, clock=lambda: now[0])
    assert budget.fits(9.0) and not budget.fits(10.0)
    now[0] = 105.0
    assert budget.left() == 5.0 and budget.fits(4.9) and not budget.fits(5.0)


def test_the_summary_fits_in_what_the_device_tool_returns():
    rows = [{"kind": "machine", "device_kind": "NVIDIA H200", "jax": "0.11.2"}]
    rows += [{"kind": "timing", "case": f"NDHWC bf16 case {i}", "job": "gradient only", "ms": {"xla": {"min_ms": 2.0},
              "pool3d indices": {"min_ms": 1.0}}, "floor_ms": 0.5, "xla_over_pool3d": 2.0} for i in range(500)]
    rows += [{"kind": "calls", "item": f"c{i}", "problems": ["indices differ"] * (i % 2)} for i in range(40)]
    text = summary.render(rows)
    assert len(text) <= summary.LIMIT
    assert "numerics: 20 passed, 20 failed" in text and "FAIL c1" in text


def test_timed_shapes_span_the_size_classes():
    cases = device_cases(dry_run=False)
    sizes = {t.size_class for t in cases}
    assert sizes == {"small", "large"}
    assert max(t.input_bytes for t in cases) >= 2**30 and min(t.input_bytes for t in cases) >= 16 * 2**20
    keys = {(t.case.layout, t.case.dtype, t.overlap, t.size_class) for t in cases}
    assert len(keys) == len(cases) == 16


def _dry_run(out, budget_s, stages):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("OUT", None)
    return [sys.executable, str(SCRIPT), "--platform", "cpu", "--no-torch", "--out", str(out),
            "--budget-s", str(budget_s), "--stages", stages], env


def test_a_dry_run_stage_finishes_within_its_budget(tmp_path):
    command, env = _dry_run(tmp_path, 25, "jobs")
    start = time.monotonic()
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    elapsed = time.monotonic() - start
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    rows = read_records(tmp_path)
    assert rows[0]["kind"] == "run" and rows[0]["budget_s"] == 25
    checked = [r for r in rows if r["kind"] == "jobs"]
    assert checked and not [r for r in checked if r["problems"]]
    # the budget stops starting items; one item may overrun it, the grace kills past that
    assert elapsed < 25 + 20 + 30, elapsed
    assert "## gpu_check summary" in result.stdout and "numerics:" in result.stdout


def test_a_run_killed_part_way_keeps_valid_json_lines(tmp_path):
    command, env = _dry_run(tmp_path, 300, "jobs,timing")
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if len([r for r in read_records(tmp_path) if r["kind"] == "jobs"]) >= 2:
                break
            time.sleep(0.5)
        else:
            pytest.fail("the dry run wrote no jobs record in 120 s")
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    lines = (tmp_path / JSONL).read_text().splitlines()
    complete = [json.loads(line) for line in lines[:-1]]  # every line but a possibly cut last one
    assert complete[0]["kind"] == "run" and len([r for r in read_records(tmp_path) if r["kind"] == "jobs"]) >= 2


def test_cuda_results_must_equal_the_cpu_kernels_bit_for_bit():
    import numpy as np

    from device_check.numerics import compare

    y = np.array([1.0, np.nan, -0.0], np.float32)
    got = {"y": y, "y_only": y, "index": np.array([0, -1, 2], np.int16), "from_indices": y, "backward": y,
           "from_input": y}
    assert compare(got, got, got, False, "float32", cpu=dict(got)) == ([], {"gradient_bit_exact": True,
                                                                             "gradient_max_diff": 0.0})
    other = dict(got, backward=np.array([1.0, np.nan, 0.0], np.float32))  # +0 where the CPU has -0
    problems, _ = compare(got, got, got, False, "float32", cpu=other)
    assert problems == ["differs from the CPU kernels bit for bit: backward"]
