"""Neuron: NeuronCores belong to one process, so the kernel is verified before the program takes them
(`enable()`, through calibration/ahead.py), and a compile on a device already held says so once and
leaves the pool to XLA until a battery has passed there. Through the SDK stand-in (tests/support/neuron_sdk_standin); the stand-in's "device"
for the child is the CPU."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import jax
import numpy as np
import pytest
from jax import lax

import pool3d_pass
from pool3d_pass.bindings.neuron import sdk
from pool3d_pass.calibration import ahead, decide, device, runner
from pool3d_pass.calibration.key import NUMERICS, Subject
from pool3d_pass.calibration.store import Store
from pool3d_pass.options import PassOptions

STANDIN = Path(__file__).resolve().parents[1] / "support" / "neuron_sdk_standin"


@pytest.fixture
def standin(monkeypatch, tmp_path):
    for name in [n for n in sys.modules if n.split(".")[0] in ("nki", "nkilib")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.syspath_prepend(str(STANDIN))
    monkeypatch.setenv("POOL3D_NKI_STANDIN_ARTIFACTS", str(tmp_path / "artifacts"))
    monkeypatch.setenv("POOL3D_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("POOL3D_CALIBRATION", "first-use")
    monkeypatch.setattr(sdk, "_checked", False)
    decide.reset()
    pool3d_pass.clear_caches()
    yield tmp_path / "cache"
    decide.reset()
    pool3d_pass.clear_caches()
    for name in [n for n in sys.modules if n.split(".")[0] in ("nki", "nkilib")]:
        del sys.modules[name]


@pytest.mark.slow  # a child process: the newest JAX's half only
def test_before_the_program_takes_the_device_the_kernel_is_verified(standin, monkeypatch):
    wanted = [Subject(NUMERICS, "NCDHW", "f32", (2, 2, 2), (2, 2, 2), (0, 0, 0)),
              Subject(NUMERICS, "NDHWC", "bf16", (3, 3, 3), (2, 2, 2), (1, 1, 1))]
    monkeypatch.setattr(ahead, "common_subjects", lambda binding: wanted)
    measured = ahead.before_program(PassOptions(), device_platform="cpu")
    assert [m.subject for m in measured] == wanted
    assert all(m.entry["verdict"]["passed"] and m.entry["verdict"]["departures"] == ["signed_zero_gradient"]
               for m in measured), measured
    assert {e["device"]["platform"] for e in Store(standin).entries()} == {"neuron"}
    # nothing under "cached" or once this process holds the device
    monkeypatch.setattr(runner, "run", lambda *a, **k: pytest.fail("no child"))
    assert ahead.before_program(PassOptions(calibration="cached")) == []
    monkeypatch.setattr(ahead, "jax_backend", lambda platform: object() if platform == "neuron" else None)
    assert ahead.before_program(PassOptions()) == []


class _HeldNeuronCores:
    platform = "neuron"
    platform_version = "neuron stand-in"

    def devices(self):
        return [type("Core", (), {"device_kind": "Trn2 (stand-in)"})()]


def test_a_compile_on_a_held_device_says_once_that_nothing_was_verified(standin, monkeypatch, caplog):
    held = _HeldNeuronCores()
    monkeypatch.setattr(device, "jax_backend", lambda platform: held if platform == "neuron" else None)
    monkeypatch.setattr(decide, "jax_backend", lambda platform: held if platform == "neuron" else None)
    monkeypatch.setattr(runner, "run", lambda *a, **k: pytest.fail("no child can open a held NeuronCore"))

    def step(x, g):
        return jax.vjp(lambda v: lax.reduce_window(v, np.float32(-np.inf), lax.max, (1, 1, 2, 2, 2),
                                                   (1, 1, 2, 2, 2), "VALID"), x)[1](g)[0]

    text = jax.jit(step).lower(np.ones((1, 2, 4, 4, 4), np.float32), np.ones((1, 2, 2, 2, 2), np.float32)).as_text()
    with caplog.at_level(logging.INFO, logger="pool3d_pass"):
        for _ in range(2):
            _, report = pool3d_pass.rewrite_text(text, target="neuron")
            assert report.rewritten == 0  # never verified on this device: XLA's
    (miss,) = report.missed
    assert "have not passed the numerics battery on this device (its device belongs to one process" in miss.reason
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    said = [w for w in warnings if "not verified on this Trn2 (stand-in)" in w]
    assert len(said) == 1 and "python -m pool3d_pass calibrate --platform neuron" in said[0]

    # once a battery passed on this device (ahead of time), the kernel is used
    from pool3d_pass.bindings import registry
    from pool3d_pass.options import binding_settings
    here = device.identify("neuron", registry.binding_for("neuron"), binding_settings())
    Store(standin).write(here, Subject(NUMERICS, "NCDHW", "f32", (2, 2, 2), (2, 2, 2), (0, 0, 0)),
                         {"passed": True, "cases": 1, "departures": ["signed_zero_gradient"]})
    _, report = pool3d_pass.rewrite_text(text, target="neuron")
    (done,) = report.rewrites
    assert "decided by the neuron binding (no speed figures" in done.summary
