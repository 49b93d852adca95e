"""The GPU device check's harness (checks/device_check/): what a lent machine's run relies on.

* the writer appends every record as a complete JSON line, and a line cut
  by a kill is dropped when read back;
* the budget says whether an item still fits;
* the summary stays within what the device tool returns;
* the dry run (interpret mode on CPU) of a stage finishes within its budget,
  and a run killed part-way leaves valid JSON lines of what finished;
* the poison checker finds unwritten elements, and its donated buffers are
  an FFI kernel's own result buffers (the CPU kernels, through XLA:CPU);
* the 64-bit case's expected values are the contract's;
* the trace parser splits device time by kernel class, and says "no device
  events" for a host-only trace (a real CPU profile included);
* C3D's pool rows are the model's own shapes; the sanitizer's verdicts;
* the launch variants: equal budget shares, the fastest per row, and one
  variant's dry-run process with its variables;
* the measured table is keyed by (implementation, GPU model), C3D rows kept out.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from checks.device_check import speed_table, summary
from checks.device_check.record import JSONL, Budget, Recorder, read_records
from checks.device_check.timing import device_cases

from corpus import ROOT

pytestmark = pytest.mark.gpu

CHECK = [sys.executable, "-m", "checks.device_check"]  # PYTHONPATH=ROOT in its environment


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
    return [*CHECK, "--platform", "cpu", "--no-torch", "--out", str(out),
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

    from checks.device_check.numerics import compare

    y = np.array([1.0, np.nan, -0.0], np.float32)
    got = {"y": y, "y_only": y, "index": np.array([0, -1, 2], np.int16), "from_indices": y, "backward": y,
           "from_input": y}
    assert compare(got, got, got, False, "float32", cpu=dict(got)) == ([], {"gradient_bit_exact": True,
                                                                             "gradient_max_diff": 0.0})
    other = dict(got, backward=np.array([1.0, np.nan, 0.0], np.float32))  # +0 where the CPU has -0
    problems, _ = compare(got, got, got, False, "float32", cpu=other)
    assert problems == ["differs from the CPU kernels bit for bit: backward"]


# --- the poison checker (device_check/poison.py) ------------------------------------------------


def test_unwritten_elements_are_those_holding_both_poisons():
    import ml_dtypes
    import numpy as np

    from checks.device_check import poison

    for dtype in (np.dtype(np.float32), np.dtype(ml_dtypes.bfloat16), np.dtype(np.float16), np.dtype(np.int16)):
        unsigned = np.dtype(f"u{dtype.itemsize}")
        first = np.zeros(6, dtype)
        second = np.zeros(6, dtype)
        first.view(unsigned)[[1, 4]] = poison.pattern_bits(dtype, poison.PATTERNS[0])
        second.view(unsigned)[[1, 2]] = poison.pattern_bits(dtype, poison.PATTERNS[1])
        # element 1 kept both poisons: unwritten; 4 and 2 hold one pattern each (a written value may equal one)
        assert poison.unwritten(first, second, dtype) == 1, dtype


def test_plain_entry_reads_the_compiled_programs_form():
    from checks.device_check.poison import hlo_op, plain_entry

    assert hlo_op("  ROOT %c = (f32[2]{0}, s16[2]{0}) custom-call(%x), custom_call_target=\"t\"") == "custom-call"
    assert hlo_op("  %x = f32[4]{0} parameter(0)") == "parameter"
    kernel = ("ENTRY %main (p: f32[2]) -> f32[2] {\n  %p = f32[2]{0} parameter(0)\n"
              "  ROOT %c = f32[2]{0} custom-call(%p), custom_call_target=\"pool3d.x\"\n}\n")
    assert plain_entry(kernel)
    assert not plain_entry(kernel.replace("custom-call(%p)", "fusion(%p)"))  # a fusion writes the output
    assert not plain_entry(kernel.replace("  ROOT %c", "  %c").replace("\n}", "\n  ROOT %d = f32[2]{0} copy(%c)\n}"))


def _cpu_calls():
    try:
        from pool3d_pass.bindings import cpu

        cpu.register()
    except Exception as error:  # noqa: BLE001 - the CPU kernels are not built here
        pytest.skip(f"CPU kernels unavailable: {error}")
    return cpu


def test_poisoned_buffers_reach_an_ffi_kernel_and_expose_a_kernel_that_writes_nothing():
    """Through XLA:CPU and the CPU kernels (the same ffi_call form as the CUDA ones): the donated poisoned
    buffers are the kernel's result buffers; a program that writes nothing leaves every element poisoned."""
    import jax
    import numpy as np

    from checks.device_check import poison

    cpu = _cpu_calls()
    attrs = dict(kernel_size=(2, 2, 2), stride=(2, 2, 2), padding=(0, 0, 0), data_format="NCDHW")
    x = np.random.default_rng(0).standard_normal((1, 2, 4, 4, 4)).astype(np.float32)
    spec = (jax.ShapeDtypeStruct(x.shape, x.dtype),)
    call = poison.PoisonedCall(lambda x: cpu.max_pooling_3d_forward(x, **attrs), spec)
    first, second, facts = call.twice(x)
    assert facts == {"unwritten": [0, 0], "reached": True}
    assert np.array_equal(np.asarray(first[0]), np.asarray(second[0]))

    nothing = poison.PoisonedCall(lambda x: x[:, :, ::2, ::2, ::2] * np.float32(1), spec)  # a fusion, not a kernel
    assert not nothing.plain

    def writes_nothing(byte):
        program = jax.jit(lambda out, x: out, donate_argnums=0, keep_unused=True)
        return program(poison.filled((1, 2, 2, 2, 2), np.float32, byte), x)

    assert poison.unwritten(writes_nothing(poison.PATTERNS[0]), writes_nothing(poison.PATTERNS[1]), np.float32) == 16
    problems, notes = __import__("checks.device_check.numerics", fromlist=["x"]).poison_problems(
        {"forward": {"unwritten": 16, "reached": True}, "from_input": {"unwritten": 0, "reached": False}}, True)
    assert problems == ["forward: 16 elements left unwritten (poison survived both runs)",
                        "poisoned result buffers did not reach the kernel for from_input "
                        "(unwritten elements undetectable there)"] and notes == []


def test_the_int64_case_expectations_match_the_reference():
    """The 64-bit stage checks against XLA's own reshapes and reductions: they must be the contract's results."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from checks.device_check.numerics import int64_expected, int64_expected_dx
    from pool3d_pass.bindings import reference

    attrs = dict(kernel_size=(2, 2, 2), stride=(2, 2, 2), padding=(0, 0, 0), data_format="NDHWC")
    x = jax.random.normal(jax.random.PRNGKey(1), (1, 4, 4, 6, 3), jnp.bfloat16).round()  # ties: first maximum
    g = jax.random.normal(jax.random.PRNGKey(2), (1, 2, 2, 3, 3), jnp.bfloat16)
    y, index = int64_expected(x, (2, 2, 2))
    y_ref, index_ref = reference.max_pooling_3d_forward(x, **attrs)
    assert np.array_equal(np.asarray(y, np.float32), np.asarray(y_ref, np.float32))
    assert np.array_equal(np.asarray(index), np.asarray(index_ref))
    dx = int64_expected_dx(g, index, x.shape, (2, 2, 2))
    dx_ref = reference.max_pooling_3d_backward_from_indices(g, index_ref, input_shape=x.shape, **attrs)
    assert np.array_equal(np.asarray(dx, np.float32), np.asarray(dx_ref, np.float32))


# --- the device-time split (device_check/trace.py) ----------------------------------------------


def _meta(pid, name, tid=None):
    kind = "process_name" if tid is None else "thread_name"
    return {"ph": "M", "name": kind, "pid": pid, "tid": tid, "args": {"name": name}}


def _span(pid, tid, name, us, **args):
    return {"ph": "X", "name": name, "pid": pid, "tid": tid, "ts": 0, "dur": us, "args": args}


def test_the_trace_parser_splits_device_time_by_kernel_class():
    from checks.device_check.trace import device_split

    events = [
        _meta(1, "/host:CPU"), _meta(1, "python", 10),
        _meta(7, "/device:GPU:0 (NVIDIA H200)"), _meta(7, "Stream #13(Compute)", 13), _meta(7, "XLA Ops", 2),
        _span(1, 10, "PjitFunction(train_step)", 9000.0),  # host: not counted
        _span(7, 13, "void pool3d::gpu::GatherKernel<float, 2>(...)", 500.0),
        _span(7, 13, "pool3d_gpu_gather", 100.0),  # a Pallas kernel
        _span(7, 13, "input_scatter_fusion_3", 300.0),
        _span(7, 13, "loop_select_and_scatter_fusion", 50.0),
        _span(7, 13, "sm90_xmma_fprop_implicit_gemm_bf16", 2000.0),
        _span(7, 13, "loop_convert_fusion", 40.0),  # "convert" is not a convolution
        _span(7, 13, "loop_transpose_fusion_1", 250.0),
        _span(7, 13, "MemcpyD2D", 10.0),
        _span(7, 13, "fusion_12", 70.0, hlo_op="reduce-window.4"),  # classified by its HLO op
        _span(7, 2, "select-and-scatter.1", 50.0),  # derived from the stream's kernels: counted once only
    ]
    split = device_split(events)
    assert split["device_events"] == 9
    assert split["ms"] == pytest.approx({"pool3d": 0.6, "xla_pool": 0.42, "convolution": 2.0,
                                         "transpose_copy": 0.26, "other": 0.04})
    assert split["top"][0][:2] == (2.0, "convolution")


def test_a_trace_without_a_device_says_so():
    from checks.device_check.trace import device_split

    host_only = [_meta(1, "/host:CPU"), _meta(1, "python", 10), _span(1, 10, "PjitFunction(f)", 100.0)]
    assert device_split(host_only) == {"device_events": 0, "ms": dict.fromkeys(
        ("pool3d", "xla_pool", "convolution", "transpose_copy", "other"), 0.0), "top": [],
        "note": "no device events (host events only)"}
    assert device_split([])["note"] == "no device events (empty trace)"
    # a device process naming no stream thread: its own threads count, derived ones do not
    no_streams = [_meta(3, "/device:GPU:0"), _meta(3, "XLA Modules", 1), _meta(3, "Kernels", 2),
                  _span(3, 1, "jit_step", 900.0), _span(3, 2, "loop_transpose_fusion", 100.0)]
    split = device_split(no_streams)
    assert split["device_events"] == 1 and split["ms"]["transpose_copy"] == pytest.approx(0.1)


def test_a_profiled_cpu_program_gives_a_split_with_no_device_events(tmp_path):
    import jax
    import jax.numpy as jnp

    from checks.device_check.trace import profile

    split = profile(jax.jit(lambda x: (x @ x).sum()), (jnp.ones((64, 64)),), 2, tmp_path)
    assert split["steps"] == 2 and split["trace_files"] and split["device_events"] == 0
    assert split["note"].startswith("no device events")


# --- C3D's own pools in the timing table, the sanitizer's verdicts --------------------------------


def test_c3d_pool_rows_are_the_models_own_shapes():
    from checks.device_check.timing import c3d_cases

    rows = c3d_cases(dry_run=False)
    bf16 = [(t.c3d, t.case.shape, t.case.kernel) for t in rows if t.case.dtype == "bfloat16"]
    assert bf16 == [("pool1", (8, 16, 112, 112, 64), (1, 2, 2)), ("pool2", (8, 16, 56, 56, 128), (2, 2, 2)),
                    ("pool3", (8, 8, 28, 28, 256), (2, 2, 2)), ("pool4", (8, 4, 14, 14, 256), (2, 2, 2))]
    assert {t.case.dtype for t in rows} == {"bfloat16", "float32"} and all(t.case.layout == "NDHWC" for t in rows)


def test_sanitizer_verdicts():
    from checks.device_check.sanitizer import ERROR_EXIT, verdict

    clean = "calls ok: 80\n========= ERROR SUMMARY: 0 errors\n"
    assert verdict(0, clean, sanitized=True)["status"] == "pass"
    bad = ("========= Invalid __global__ write of size 4 bytes\n=========     at GatherKernel+0x1a0\n"
           "calls ok: 80\n========= ERROR SUMMARY: 3 errors\n")
    found = verdict(ERROR_EXIT, bad, sanitized=True)
    assert found["status"] == "fail" and found["errors"] == 3 and "Invalid __global__ write" in found["report"][0]
    race = "calls ok: 80\n========= RACECHECK SUMMARY: 2 hazards displayed (2 errors, 0 warnings)\n"
    assert verdict(ERROR_EXIT, race, sanitized=True)["errors"] == 2
    assert verdict(1, "Traceback ...\nRuntimeError: no GPU", sanitized=True)["status"] == "error"
    assert verdict("timeout", "", sanitized=True)["status"] == "timeout"


# --- the launch variants (device_check/variants.py) -----------------------------------------------


def test_variants_record_the_fastest_per_row(tmp_path):
    from checks.device_check import variants

    rec = Recorder(tmp_path, "variants")
    seen = []

    def run_child(name, env, seconds):  # what a child appends, without the child
        seen.append((name, env, round(seconds)))
        child = Recorder(tmp_path, "variants")
        for case, ms in (("a", {"256 threads, vector": 2.0, "128 threads, vector": 1.5}), ("b", {})):
            if name in ms:
                child.record("variant_timing", variant=name, case=case, job="gradient only", ms={"min_ms": ms[name]},
                             problem=None)
        return 0

    now = [0.0]
    variants.run(rec, Budget(100.0, clock=lambda: now[0]), run_child, lambda m: None)
    assert [s[0] for s in seen] == list(variants.VARIANTS) and seen[0][2] == 25  # equal shares of the budget
    assert seen[3][1] == {"POOL3D_CUDA_THREADS": "256", "POOL3D_CUDA_VECTOR": "0"}
    best = [r for r in read_records(tmp_path) if r["kind"] == "variant_best"]
    assert best == [dict(best[0], case="a", job="gradient only", fastest="128 threads, vector",
                         default_over_fastest=pytest.approx(2.0 / 1.5))]


def test_a_variant_child_runs_with_its_variables(tmp_path):
    """The dry run of one variant's process: it times its row and records the variables it ran with."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), POOL3D_CHECK_STAGE_S="60", POOL3D_CUDA_THREADS="128",
               POOL3D_GPU_INTERPRET="1", JAX_PLATFORMS="cpu")
    command = [*CHECK, "--stage", "variants", "--variant", "128 threads, vector",
               "--platform", "cpu", "--no-torch", "--out", str(tmp_path)]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    timed = [r for r in read_records(tmp_path) if r["kind"] == "variant_timing"]
    assert len(timed) == 1 and timed[0]["variant"] == "128 threads, vector"
    assert timed[0]["env"]["POOL3D_CUDA_THREADS"] == "128" and timed[0]["ms"]["min_ms"] > 0


# --- the measured table keyed by GPU model (scripts/speed_table.py) ---------------------------


def test_the_speed_table_is_keyed_by_implementation_and_gpu_model():
    machine = {"kind": "machine", "device_kind": "NVIDIA H100 80GB HBM3", "implementation": "cuda", "jax": "0.11.2"}
    timing = {"kind": "timing", "job": "gradient only", "layout": "NDHWC", "dtype": "bfloat16", "overlap": False,
              "size_class": "large", "xla_over_pool3d": 2.345, "problems": []}
    c3d = dict(timing, c3d="pool1", xla_over_pool3d=9.0)  # a C3D pool row: the model's shape, not a class
    rows = [machine, timing, c3d]
    assert speed_table.key_of(rows, None) == ("cuda", "NVIDIA H100 80GB HBM3")
    assert speed_table.key_of(rows, "pallas") == ("pallas", "NVIDIA H100 80GB HBM3")
    assert isinstance(speed_table.key_of([dict(machine, dry_run=True)], None), str)
    assert speed_table.ratios_of(rows) == {("NDHWC", "bf16", False, "large"): {"gradient only": 2.35}}
    key = ("cuda", "NVIDIA H100 80GB HBM3")
    text = speed_table.render({key: {"file": "x.jsonl", "jax": "0.11.2"}}, {key: speed_table.ratios_of(rows)})
    namespace = {}
    exec(compile(text, "measured.py", "exec"), namespace)  # noqa: S102 - the generated module, read back
    assert namespace["RATIOS"][key][("NDHWC", "bf16", False, "large")] == {"gradient only": 2.35}
