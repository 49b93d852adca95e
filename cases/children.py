"""Child Pythons that run cases: started together, each one's JSON records read back.

A child is a script (cases/spatial_run.py, tests/support/*_cases.py) that
prints one JSON record per case on stdout; most set XLA's host device count
before importing JAX, so each device count is a process of its own. It runs
with JAX on the CPU and with this process's module path on PYTHONPATH, in
this process's order (the installed packages before the repository: in a
venv with an installed pool3d_pass, that one is imported), so it imports
cases/ and oracles/ as this process does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path


class ChildFailed(RuntimeError):
    """A child exited with an error; the message is the end of its stderr."""


def environment(**variables: str) -> dict[str, str]:
    paths = [path for path in sys.path if path and os.path.isdir(path)]
    return dict(os.environ, JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="1",
                PYTHONPATH=os.pathsep.join(dict.fromkeys(paths)), **variables)


def run(script: Path, *argument_lists: Sequence, timeout: float | None = 600, **variables: str) -> list[list[dict]]:
    """`python SCRIPT ARGUMENTS...` once per argument list, all started at once; each child's records, in order.

    Raises ChildFailed for a child that exits with an error (the others are killed).
    """
    env = environment(**variables)
    started = [subprocess.Popen([sys.executable, str(script), *map(str, arguments)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env, cwd=script.parent)
               for arguments in argument_lists]
    records = []
    try:
        for child in started:
            out, err = child.communicate(timeout=timeout)
            if child.returncode != 0:
                raise ChildFailed(f"{script.name} exited with {child.returncode}:\n{err[-4000:]}")
            records.append([json.loads(line) for line in out.splitlines() if line.startswith("{")])
    finally:
        for child in started:
            if child.poll() is None:
                child.kill()
    return records
