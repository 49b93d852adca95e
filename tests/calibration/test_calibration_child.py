"""The calibration child (runner.py, child.py): planted kernels that abort, segfault or hang are refusals, and the
parent carries on; the numerics battery of the Neuron binding against the SDK stand-in; the GPU binding's
Pallas kernels in interpret mode through the same child.

Each test is one `runner.run` with several tasks: a child per crash, one for the rest.
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

import pytest

from pool3d_pass.bindings.registry import binding_for
from pool3d_pass.calibration import decide, runner
from pool3d_pass.calibration.key import INFERENCE, NUMERICS, SPEED, Subject
from pool3d_pass.options import BindingSettings

import planted_kernels

pytestmark = pytest.mark.usefixtures("cpu_kernels")

STANDIN = Path(__file__).resolve().parents[1] / "support" / "neuron_sdk_standin"


def _numerics(window, layout="NCDHW", dtype="f32", stride=None, padding=(0, 0, 0)) -> dict:
    return dataclasses.asdict(Subject(NUMERICS, layout, dtype, window, stride or window, padding))


@pytest.mark.slow  # child processes (a minute of CI time in all): the newest JAX's half only
def test_a_kernel_that_aborts_segfaults_or_hangs_is_refused_and_the_others_still_run():
    spec = decide.binding_spec(planted_kernels.binding(), BindingSettings(), "planted")
    tasks = [{"id": "abort", "kind": NUMERICS, "subject": _numerics(planted_kernels.ABORT)},
             {"id": "segfault", "kind": NUMERICS, "subject": _numerics(planted_kernels.SEGFAULT)},
             {"id": "good", "kind": NUMERICS, "subject": _numerics((3, 3, 1), stride=(2, 2, 1), padding=(1, 1, 0))},
             {"id": "hang", "kind": NUMERICS, "subject": _numerics(planted_kernels.HANG)},
             {"id": "after", "kind": NUMERICS, "subject": _numerics((1, 1, 2), "NDHWC")}]
    start = time.monotonic()
    outcome = runner.run(spec, "cpu", tasks, seconds=150, task_seconds=10)
    assert outcome.fatal is None
    assert "SIGABRT" in outcome.refusals["abort"] and "Fatal Python error: Aborted" in outcome.refusals["abort"]
    assert "SIGSEGV" in outcome.refusals["segfault"] and "segmentation fault" in outcome.refusals["segfault"]
    assert "did not finish within 10 s" in outcome.timed_out["hang"]
    # a child per fault, and the classes after them in a new one: the parent carries on
    assert outcome.children == 4 and time.monotonic() - start < 120
    for task in ("good", "after"):
        assert outcome.verdicts[task]["passed"] and outcome.verdicts[task]["cases"] >= 6, outcome


def test_a_child_that_cannot_start_decides_nothing():
    spec = decide.binding_spec(binding_for("cpu"), BindingSettings(), "cpu")
    outcome = runner.run(spec, "no-such-platform", [{"id": "n", "kind": NUMERICS, "subject": _numerics((2, 2, 2))}],
                         seconds=60)
    assert outcome.fatal is not None and not outcome.verdicts and not outcome.refusals
    assert outcome.children == 1


def test_the_neuron_binding_passes_the_battery_through_the_sdk_standin(monkeypatch):
    """The NKI kernel's numpy transcription, launched eagerly through the stand-in, against the reference;
    its documented signed-zero departure allowed and named."""
    monkeypatch.syspath_prepend(str(STANDIN))
    neuron = binding_for("neuron")
    spec = decide.binding_spec(neuron, BindingSettings(), "neuron standin")
    assert spec["eager"] and spec["departures"] == ["signed_zero_gradient"]
    tasks = [{"id": "k3", "kind": NUMERICS, "subject": _numerics((3, 3, 3), "NDHWC", "bf16", (2, 2, 2), (1, 1, 1))},
             {"id": "k2", "kind": NUMERICS, "subject": _numerics((2, 2, 2))}]
    outcome = runner.run(spec, "cpu", tasks, seconds=120)
    assert outcome.fatal is None, outcome.fatal
    for task in ("k3", "k2"):
        verdict = outcome.verdicts[task]
        assert verdict["passed"], verdict
        assert verdict["departures"] == ["signed_zero_gradient"] and verdict["cases"] >= 6


def test_the_neuron_battery_fails_a_kernel_that_differs(monkeypatch, tmp_path):
    """The same battery sees a wrong NKI kernel: the stand-in's kernel, its gradient doubled."""
    (tmp_path / "neuron_doubled.py").write_text(
        "from pool3d_pass.bindings.neuron.calls import max_pooling_3d_backward as real\n"
        "def functions():\n"
        "    return {'backward': lambda *operands, **attributes: real(*operands, **attributes) * 2}\n")
    monkeypatch.syspath_prepend(str(STANDIN))
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = decide.binding_spec(binding_for("neuron"), BindingSettings(), "neuron standin")
    assert spec["functions"] == {"load": "pool3d_pass.bindings.neuron.binding:functions", "calls": ["backward"]}
    spec["functions"]["load"] = "neuron_doubled:functions"
    outcome = runner.run(spec, "cpu", [{"id": "k2", "kind": NUMERICS, "subject": _numerics((2, 2, 2))}], seconds=120)
    verdict = outcome.verdicts["k2"]
    assert not verdict["passed"] and "gradient not bit-exact" in verdict["failed"], verdict


@pytest.mark.gpu
def test_the_gpu_binding_is_calibrated_in_interpret_mode_on_cpu():
    """The GPU path's plumbing: the gpu binding's Pallas kernels (interpret mode) through the child's battery
    and timing, on XLA:CPU."""
    gpu = binding_for("gpu")
    settings = BindingSettings("pallas", True)
    spec = decide.binding_spec(gpu, settings, "gpu interpret")
    assert spec["takes_settings"] and spec["settings"] == {"gpu_kernels": "pallas", "gpu_interpret": True}
    speed = dataclasses.asdict(Subject(SPEED, "NDHWC", "f32", (2, 2, 2), (2, 2, 2), (0, 0, 0), INFERENCE,
                                       "forward-output", 7, producer=True, shape=(1, 4, 8, 8, 8)))
    tasks = [{"id": "n", "kind": NUMERICS, "subject": _numerics((2, 2, 2), "NDHWC")},
             {"id": "s", "kind": SPEED, "subject": speed, "rounds": 5, "numerics_id": "n"}]
    outcome = runner.run(spec, "cpu", tasks, seconds=240)
    assert outcome.fatal is None, outcome.fatal
    assert outcome.verdicts["n"]["passed"], outcome.verdicts["n"]
    assert outcome.verdicts["s"]["rounds"] == 5 and outcome.verdicts["s"]["shape"] == [1, 4, 8, 8, 8]


def test_the_child_environment_has_its_own_device_context():
    env = runner.child_environment("gpu")
    assert env["JAX_PLATFORMS"] == "cuda" and env["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"
    assert env["POOL3D_CALIBRATION"] == "off"
    assert str(Path(planted_kernels.__file__).parent) in env["PYTHONPATH"].split(os.pathsep)
