"""`python -m pool3d_pass calibrate` (cli/calibrate.py) and the cache listing of `python -m pool3d_pass`."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def _run(*args, cache):
    env = dict(os.environ, POOL3D_CACHE_DIR=str(cache), JAX_PLATFORMS="cpu")
    return subprocess.run([sys.executable, "-m", "pool3d_pass", *args], capture_output=True, text=True, env=env,
                          timeout=300)


@pytest.mark.slow  # two processes and a calibration child: the newest JAX's half only
def test_calibrate_prints_the_table_and_python_m_lists_the_cache(tmp_path):
    done = _run("calibrate", "--shape", "2,8,8,16,16", "--kernel", "2", "--job", "inference", "--rounds", "5",
                cache=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("pool3d_pass calibration on cpu ")
    assert lines[1].startswith("| program | class | job (calls) | numerics | decision | XLA / kernels | spread |")
    (row,) = [line for line in lines if line.startswith("| NCDHW f32 (2, 8, 8, 16, 16)")]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == "NCDHW f32 k2 s2 p0" and cells[2] == "inference (forward-output)" and cells[3] == "passed"
    assert cells[4] in ("kernels", "XLA") and cells[5].endswith("x") and float(cells[6]) >= 0
    assert lines[-1].startswith(f"stored in {tmp_path / 'v1'}")

    listing = _run(cache=tmp_path)
    assert listing.returncode == 0
    cache_lines = [line for line in listing.stdout.splitlines() if "alibration" in line or line.startswith("  cpu ")]
    assert cache_lines[0].startswith(f"Calibration cache: {tmp_path / 'v1'} (2 verdict(s)")
    assert any("numerics passed" in line for line in cache_lines)
    assert any("inference (forward-output): " in line and "x +- " in line for line in cache_lines)


@pytest.mark.parametrize("args, message", [
    (("--shape", "1,2,3"), "expected five positive sizes"),
    (("--shape", "1,2,4,4,4", "--kernel", "5"), "has no window"),
    (("--shape", "1,2,4,4,4", "--kernel", "2", "--padding", "2"), "padding"),
    (("--platform", "tpu", "--shape", "1,2,4,4,4"), "no binding for platform 'tpu'"),
    ((), "give --shape"),
])
def test_bad_input_is_one_line_and_nothing_stored(tmp_path, monkeypatch, capsys, args, message):
    """In process (the command's main): SystemExit with the message, as the interpreter prints it, no traceback."""
    from pool3d_pass.cli import calibrate

    monkeypatch.setenv("POOL3D_CACHE_DIR", str(tmp_path))
    try:
        status = calibrate.main(list(args))
    except SystemExit as exit_:
        status, text = exit_.code, str(exit_.code) + capsys.readouterr().err
    else:
        text = capsys.readouterr().err
    assert status not in (0, None) and message in text, text
    assert not (tmp_path / "v1").exists()
