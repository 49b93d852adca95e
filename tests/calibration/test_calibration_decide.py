"""Strategy `auto` decided on this machine, end to end through the compile hook, with planted kernels.

The planted CPU binding (support/planted_kernels.py: wrong for 3x3x3 windows, slow for 2x2x2, aborting for
1x2x2, the real kernels elsewhere) is registered for "cpu"; one program holds a pool gradient of three and the
inference pool of the slow one (XLA's reduce_window is fast, its select_and_scatter is not), so one
first-use calibration (one child, and a second after the abort) measures all four. Then: the wrong and
the aborting kernels are refused under every strategy, the slow one under auto only, the real one is
used; the program's results are XLA's where refused; a second compile reads the stored verdicts and starts
no child.
"""

from __future__ import annotations

import logging

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import pool3d_pass
from pool3d_pass.bindings import registry
from pool3d_pass.calibration import decide, runner
from pool3d_pass.calibration.store import Store
from pool3d_pass.contract import TARGETS

import planted_kernels

pytestmark = pytest.mark.usefixtures("cpu_kernels", "switch_off")

GOOD = (3, 3, 1)
POOLS = {  # name: (window, stride, input shape NCDHW)
    "wrong": (planted_kernels.WRONG, (2, 2, 2), (2, 3, 9, 9, 9)),
    "slow": (planted_kernels.SLOW, (2, 2, 2), (2, 4, 8, 12, 12)),
    "abort": (planted_kernels.ABORT, planted_kernels.ABORT, (1, 2, 4, 6, 6)),
    "good": (GOOD, (2, 2, 1), (2, 8, 17, 17, 8)),
}


def _pool(window, stride):
    def pool(x):
        return lax.reduce_window(x, np.float32(-np.inf), lax.max, (1, 1, *window), (1, 1, *stride), "VALID")
    return pool


def step(xs, gs):
    """Each pool's gradient alone (a vjp whose primal is unused), the slow one's forward alone: one program."""
    return [_pool(w, s)(x) if name == "slow" else jax.vjp(_pool(w, s), x)[1](g)[0]
            for (name, (w, s, _)), x, g in zip(POOLS.items(), xs, gs)]


def arguments():
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(shape).astype(np.float32) for _, _, shape in POOLS.values()]
    gs = [rng.standard_normal(jax.eval_shape(_pool(w, s), jax.ShapeDtypeStruct(shape, jnp.float32)).shape)
          .astype(np.float32) for w, s, shape in POOLS.values()]
    return xs, gs


@pytest.fixture
def planted(monkeypatch, tmp_path):
    monkeypatch.setenv("POOL3D_CALIBRATION", "first-use")
    monkeypatch.setenv("POOL3D_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("POOL3D_CALIBRATION_BUDGET_S", "240")
    monkeypatch.setitem(registry._BINDINGS, "cpu", planted_kernels.binding())
    decide.reset()
    pool3d_pass.clear_caches()
    yield tmp_path / "cache"
    decide.reset()
    pool3d_pass.clear_caches()


def _compile(caplog, strategy="auto"):
    xs, gs = arguments()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="pool3d_pass"):
        compiled = pool3d_pass.jit(step, strategy=strategy).lower(xs, gs).compile()
    messages = [r.getMessage() for r in caplog.records]
    return compiled, messages, (xs, gs)


def _remark(messages, window) -> str:
    config = f"kernel_size={list(window)}"
    found = [m for m in messages if "remark" not in m and "not rewritten" in m and config in m]
    return found[0] if found else ""


def _calls(text: str) -> set[str]:
    return {kind for kind, target in TARGETS.items() if f'custom_call_target="{target}"' in text}


@pytest.mark.slow  # child processes (a minute of CI time in all): the newest JAX's half only
def test_first_use_refuses_the_wrong_slow_and_aborting_kernels_and_keeps_the_real_one(planted, caplog, monkeypatch):
    children = []
    real_run = runner.run
    monkeypatch.setattr(runner, "run", lambda *a, **k: children.append(a) or real_run(*a, **k))
    compiled, messages, (xs, gs) = _compile(caplog)
    assert len(children) == 1, "one calibration for the module's four classes"
    text = compiled.as_text()
    assert _calls(text) == {"backward_from_input"}, "only the real kernel's class is rewritten (the fused call)"
    for got, want in zip(compiled(xs, gs), jax.jit(step)(xs, gs), strict=True):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))  # XLA's where refused; equal where not

    lines = "\n".join(messages)
    wrong = next(m for m in messages if "not rewritten" in m and "gradient max diff" in m)
    assert "failed the numerics battery on this device" in wrong and "decided by this machine's calibration" in wrong
    assert any("XLA as fast or faster, or within the spread" in m for m in messages), lines
    assert any("died of SIGABRT" in m and "Fatal Python error: Aborted" in m for m in messages), lines
    assert "3 select_and_scatter found, 1 rewritten, 2 missed" in lines
    assert "1 forward max-pool(s) met after the gradients, 0 given the forward-output call, 1 missed" in lines
    # the stored verdicts: a numerics file per class, a timing for each class that passed it
    kinds = sorted(e["subject"]["kind"] for e in Store(planted).entries())
    assert kinds == ["numerics"] * 4 + ["speed"] * 2, kinds

    # a second compile reads them: no child, the same decisions
    monkeypatch.setattr(runner, "run", lambda *a, **k: pytest.fail("a stored verdict must not be measured again"))
    compiled_again, messages_again, _ = _compile(caplog)
    assert _calls(compiled_again.as_text()) == {"backward_from_input"}
    assert "\n".join(messages_again).count("decided by this machine's calibration") >= 3  # one WARNING holds two

    # an explicit strategy is the user's choice for speed (the slow kernel is used), never for numerics
    indices, messages_indices, _ = _compile(caplog, "indices")
    assert _calls(indices.as_text()) == {"backward_from_input", "forward_output"}, "\n".join(messages_indices)
    assert any("failed the numerics battery" in m for m in messages_indices)
    assert any("died of SIGABRT" in m for m in messages_indices)
    for got, want in zip(indices(xs, gs), jax.jit(step)(xs, gs), strict=True):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_a_spent_budget_leaves_an_unmeasured_class_to_xla_said_once(planted, monkeypatch, caplog):
    monkeypatch.setenv("POOL3D_CALIBRATION_BUDGET_S", "0")
    monkeypatch.setattr(runner, "run", lambda *a, **k: pytest.fail("no child once the budget is spent"))
    with caplog.at_level(logging.INFO, logger="pool3d_pass"):
        compiled = pool3d_pass.jit(lambda x: _pool(GOOD, (2, 2, 1))(x)).lower(np.ones((1, 2, 5, 5, 4), np.float32)).compile()
        pool3d_pass.jit(lambda x: _pool(GOOD, (1, 1, 1))(x)).lower(np.ones((1, 2, 5, 5, 4), np.float32)).compile()
    assert not _calls(compiled.as_text())
    messages = [r.getMessage() for r in caplog.records]
    assert any("this process's calibration budget (0 s) is spent" in m for m in messages)
    assert sum("budget of 0 s is spent" in m and r.levelno == logging.WARNING
               for m, r in zip(messages, caplog.records)) == 1


@pytest.mark.parametrize("mode", ["cached", "off"])
def test_cached_and_off_never_start_a_child_and_follow_the_prior(planted, monkeypatch, mode):
    """A binding that needs no battery first (the CPU's) follows its prior without a child."""
    monkeypatch.setitem(registry._BINDINGS, "cpu", planted_kernels.binding(verify_first=False))
    monkeypatch.setenv("POOL3D_CALIBRATION", mode)
    monkeypatch.setattr(runner, "run", lambda *a, **k: pytest.fail(f"{mode}: no child"))
    text = jax.jit(_pool(GOOD, (2, 2, 1))).lower(np.ones((1, 2, 5, 5, 4), np.float32)).as_text()
    _, report = pool3d_pass.rewrite_text(text, target="cpu")
    (done,) = report.rewrites
    assert "decided by the planted prior" in done.summary


@pytest.mark.parametrize("strategy", ["auto", "indices"])
@pytest.mark.parametrize("mode", ["cached", "off"])
def test_no_kernel_runs_on_a_device_before_its_battery_passed_there(planted, monkeypatch, mode, strategy):
    """A `verify_first` binding (GPU, Neuron) whose device this process has: without a passed battery, under
    "cached" (nothing stored) or "off", no strategy uses its kernels; the miss names the command that verifies."""
    jax.devices("cpu")  # this process has the device
    monkeypatch.setenv("POOL3D_CALIBRATION", mode)
    monkeypatch.setattr(runner, "run", lambda *a, **k: pytest.fail(f"{mode}: no child"))
    text = jax.jit(_pool(GOOD, (2, 2, 1))).lower(np.ones((1, 2, 5, 5, 4), np.float32)).as_text()
    rewritten, report = pool3d_pass.rewrite_text(text, target="cpu", strategy=strategy)
    assert not report.rewrites and "custom_call" not in rewritten
    (miss,) = report.missed
    assert "have not passed the numerics battery on this device" in miss.reason, miss.reason
    assert f"calibration is '{mode}'" in miss.reason
    assert "python -m pool3d_pass calibrate --platform cpu" in miss.reason


@pytest.mark.slow  # child processes (a minute of CI time in all): the newest JAX's half only
def test_two_processes_rewrite_alike_by_process_0s_decision(tmp_path):
    """jax.distributed on CPU, two processes, different planted timings and caches: process 0 calibrates, process 1
    takes its decision through the key-value store and starts no child."""
    import json
    import os
    import socket
    import subprocess
    import sys
    from pathlib import Path

    script = Path(planted_kernels.__file__).with_name("calibration_processes.py")
    with socket.socket() as probe:
        probe.bind(("localhost", 0))
        port = probe.getsockname()[1]
    started = []
    for process in (0, 1):
        env = dict(os.environ, JAX_PLATFORMS="cpu", POOL3D_CALIBRATION="first-use",
                   POOL3D_CACHE_DIR=str(tmp_path / f"cache{process}"), PLANTED_SLOW="0" if process == 0 else "1")
        started.append(subprocess.Popen([sys.executable, str(script), str(process), str(port), env["POOL3D_CACHE_DIR"]],
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env))
    results = []
    for child in started:
        out, err = child.communicate(timeout=300)
        assert child.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    first, second = results
    assert first["children"] == 1 and second["children"] == 0
    # (the real kernel is 2.9x-3.4x XLA's reduce_window on this class: process 0 rewrites unless the machine is
    # too noisy to tell, and then both keep XLA's: alike either way)
    assert first["rewritten"] == second["rewritten"], results
    assert any("decided by this machine's calibration" in r for r in first["remarks"]), first
    assert any("decided by process 0's decision (this machine's calibration" in r for r in second["remarks"]), second
    assert not (tmp_path / "cache1").exists() or not list((tmp_path / "cache1").rglob("*.json"))


def test_an_inference_pools_fused_producer_is_part_of_its_class():
    """pool(relu(x + b)) and pool(x) are timed as different jobs: XLA fuses the producer into its pool."""
    from jaxlib.mlir import ir

    from pool3d_pass.ir.context import make_context
    from pool3d_pass.options import PassOptions, binding_settings
    from pool3d_pass.rewriting.strategy import StrategyChooser

    pool = _pool((2, 2, 2), (2, 2, 2))
    x, b = np.ones((1, 4, 8, 8, 8), np.float32), np.ones((1, 4, 1, 1, 1), np.float32)
    chooser = StrategyChooser(PassOptions(target="cpu"), registry.binding_for("cpu"), binding_settings())
    found = []
    for function, arguments in ((pool, (x,)), (lambda x, b: pool(jax.nn.relu(x + b)), (x, b))):
        with make_context():
            module = ir.Module.parse(jax.jit(function).lower(*arguments).as_text())
            (request,) = chooser.requests_in(module.operation)
        found.append(request.subject())
    alone, after_relu = found
    assert not alone.producer and after_relu.producer and alone != after_relu
    assert alone.job == after_relu.job == "inference" and "after a fused producer" in after_relu.describe()


def test_one_place_for_speed_rules_the_cpu_prior_binds_auto_only(switch_off):
    """The CPU table's thin class (channels-last windows that do not overlap, inference): XLA's under auto, by the
    prior (no calibration: the suite runs under "cached"); the forward-output call under an explicit strategy."""
    def pool(x):
        return lax.reduce_window(x, np.float32(-np.inf), lax.max, (1, 2, 2, 2, 1), (1, 2, 2, 2, 1), "VALID")

    text = jax.jit(pool).lower(np.ones((2, 4, 4, 4, 8), np.float32)).as_text()
    _, auto = pool3d_pass.rewrite_text(text, target="cpu")
    (miss,) = auto.missed
    assert auto.forward_alone == 0 and "reduce_window measured faster inside a model" in miss.reason
    assert miss.reason.endswith("decided by the prior (bindings/cpu/speed.py)")
    _, explicit = pool3d_pass.rewrite_text(text, target="cpu", strategy="indices")
    (done,) = explicit.rewrites
    assert explicit.forward_alone == 1 and "decided by the explicit strategy 'indices'" in done.summary
