"""The verdict cache (calibration/store.py): corrupt and foreign entries are absent, writes are atomic under
concurrency, a folder that cannot be written is not an error; the cache folder; the keys."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from pool3d_pass.calibration import store as store_module
from pool3d_pass.calibration.key import NUMERICS, SPEED, Device, Subject, digest, size_bucket, size_label
from pool3d_pass.calibration.store import FORMAT, Store

DEVICE = Device("cpu", "Test CPU, 2 cores", "XLA:CPU", "cpu kernels abc", "pool3d_pass 0.1.0, jax 0.12.1")
NUMBERS = Subject(NUMERICS, "NCDHW", "f32", (2, 2, 2), (2, 2, 2), (0, 0, 0))
TIMED = Subject(SPEED, "NCDHW", "f32", (2, 2, 2), (2, 2, 2), (0, 0, 0), "gradient only", "fused", 12,
                shape=(2, 4, 8, 8, 8))
PASSED = {"passed": True, "cases": 8}
FASTER = {"rewrite": True, "ratio": 2.5, "spread": 0.1, "xla_ms": 2.5, "kernels_ms": 1.0, "rounds": 7}


def test_a_verdict_is_read_back_with_when_and_where(tmp_path):
    store = Store(tmp_path)
    assert store.read(DEVICE, TIMED) is None
    written = store.write(DEVICE, TIMED, FASTER)
    entry = store.read(DEVICE, TIMED)
    assert entry["verdict"] == FASTER and entry["stored"].endswith("UTC") and written["path"].startswith(str(tmp_path))
    assert entry["subject"]["shape"] == [2, 4, 8, 8, 8]
    # the shape timed is recorded, not part of the key: another shape of the bucket reads it
    assert store.read(DEVICE, dataclasses.replace(TIMED, shape=(4, 4, 8, 8, 8))) is not None
    assert store.read(DEVICE, dataclasses.replace(TIMED, size=13)) is None
    assert store.read(DEVICE, NUMBERS) is None


@pytest.mark.parametrize("damage", ["truncated", "not json", "a list", "bad verdict", "other format", "other device",
                                    "other subject", "empty"])
def test_a_corrupt_or_foreign_entry_is_absent_and_replaced(tmp_path, damage):
    store = Store(tmp_path)
    path = Path(store.write(DEVICE, TIMED, FASTER)["path"])
    entry = json.loads(path.read_text())
    text = {
        "truncated": path.read_text()[:40],
        "not json": "\x00\x01 garbage",
        "a list": "[1, 2]",
        "bad verdict": json.dumps({**entry, "verdict": {"rewrite": "yes"}}),
        "other format": json.dumps({**entry, "format": FORMAT + 1}),
        "other device": json.dumps({**entry, "device": {**entry["device"], "versions": "pool3d_pass 0.0.9"}}),
        "other subject": json.dumps({**entry, "subject": {**entry["subject"], "calls": "recompute"}}),
        "empty": "",
    }[damage]
    path.write_text(text)
    assert store.read(DEVICE, TIMED) is None
    store.write(DEVICE, TIMED, FASTER)  # redone
    assert store.read(DEVICE, TIMED)["verdict"] == FASTER


def test_another_version_is_another_key_and_another_format_another_folder(tmp_path):
    older = dataclasses.replace(DEVICE, versions="pool3d_pass 0.0.9, jax 0.12.1")
    assert digest(older, TIMED) != digest(DEVICE, TIMED)
    Store(tmp_path).write(older, TIMED, FASTER)
    assert Store(tmp_path).read(DEVICE, TIMED) is None
    (tmp_path / f"v{FORMAT + 1}").mkdir()
    (tmp_path / f"v{FORMAT + 1}" / Store(tmp_path).path(DEVICE, TIMED).name).write_text("{}")
    assert Store(tmp_path).read(DEVICE, TIMED) is None
    assert [e["device"]["versions"] for e in Store(tmp_path).entries()] == [older.versions]


WRITER = """
import sys
from pool3d_pass.calibration.key import Device, Subject, SPEED
from pool3d_pass.calibration.store import Store
device = Device("cpu", "Test CPU, 2 cores", "XLA:CPU", "cpu kernels abc", "v")
store = Store(sys.argv[1])
for i in range(300):
    subject = Subject(SPEED, "NCDHW", "f32", (2, 2, 2), (2, 2, 2), (0, 0, 0), "gradient only", "fused", i % 5)
    store.write(device, subject, {"rewrite": True, "ratio": float(sys.argv[2]), "spread": 0.0, "pad": "x" * 4000})
    with store.lock(30) as held:
        assert held
"""


def test_two_processes_writing_at_once_leave_only_whole_entries(tmp_path):
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), str(n)], stderr=subprocess.PIPE,
                                text=True) for n in (1, 2)]
    for writer in writers:
        assert writer.wait(timeout=120) == 0, writer.stderr.read()
    entries = Store(tmp_path).entries()
    assert len(entries) == 5 and not any(e.get("unreadable") for e in entries)
    assert {e["verdict"]["ratio"] for e in entries} <= {1.0, 2.0}
    assert not [p for p in (tmp_path / f"v{FORMAT}").iterdir() if p.suffix == ".tmp"]


def test_the_lock_is_exclusive_and_gives_up_after_its_timeout(tmp_path):
    store = Store(tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\nfrom pool3d_pass.calibration.store import Store\n"
        "with Store(sys.argv[1]).lock(10) as held:\n    print(held, flush=True)\n    time.sleep(30)\n"), str(tmp_path)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "True"
        with store.lock(0.3) as held:
            assert not held
    finally:
        holder.kill()
        holder.wait()
    with store.lock(5) as held:
        assert held


def test_an_unwritable_folder_keeps_verdicts_for_this_process(tmp_path, caplog):
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    store = Store(blocked)
    entry = store.write(DEVICE, TIMED, FASTER)
    assert "this process only" in entry["path"] and store.read(DEVICE, TIMED)["verdict"] == FASTER
    assert any("cannot write the verdict cache" in r.getMessage() for r in caplog.records)


def test_the_cache_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("POOL3D_CACHE_DIR", str(tmp_path / "mine"))
    assert store_module.cache_dir() == tmp_path / "mine"
    monkeypatch.delenv("POOL3D_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    if sys.platform.startswith("linux"):
        assert store_module.cache_dir() == tmp_path / "xdg" / "pool3d_pass"
    assert Store().folder.name == f"v{FORMAT}"


def test_size_buckets_are_powers_of_four():
    assert size_bucket((1, 1, 1, 1, 256), "f32") == 5 and size_bucket((1, 1, 1, 1, 257), "f32") == 6
    assert size_bucket((1, 1, 1, 1, 512), "bf16") == 5
    assert size_label(5) == "256 B-1 KiB" and size_label(15) == "256 MiB-1 GiB"


@pytest.mark.parametrize("variable", ["POOL3D_CUDA_THREADS", "POOL3D_CUDA_VECTOR", "POOL3D_CPU_THREADS",
                                      "POOL3D_CUDA_LIBRARY", "POOL3D_KERNEL_LIBRARY"])
def test_another_launch_or_build_of_the_kernels_is_another_key(monkeypatch, variable):
    """A verdict of the kernels at 256 threads a block is not one of the same kernels at 512 (which once failed
    to launch): the variables that choose a build or a launch are part of the `kernels` key."""
    from pool3d_pass.bindings.registry import binding_for
    from pool3d_pass.calibration.device import kernels
    from pool3d_pass.options import binding_settings

    binding, settings = binding_for("gpu"), binding_settings()
    monkeypatch.delenv(variable, raising=False)
    plain = kernels(binding, settings)
    monkeypatch.setenv(variable, "512")
    assert kernels(binding, settings) != plain
