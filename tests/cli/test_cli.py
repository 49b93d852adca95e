"""pool3d-opt where lit cannot reach: a binding that fails inside the pass, --version, a machine without jaxlib."""

from __future__ import annotations

import re

from pool3d_pass.bindings import registry
from pool3d_pass.bindings.registry import Binding, Functions, contract_preconditions
from pool3d_pass.cli.pool3d_opt import main

from corpus import EXAMPLE


def _missing_module():
    import pool3d_pass.no_such_module  # noqa: F401 - the failure this binding plants

    raise AssertionError("unreachable")


def test_failing_binding_gives_one_line_and_no_output_file(monkeypatch, tmp_path, capsys):
    broken = Binding("broken", Functions(_missing_module, ("backward",)), "cpu", contract_preconditions)
    monkeypatch.setitem(registry._BINDINGS, "broken", broken)
    output = tmp_path / "out.mlir"
    output.write_text("the user's file\n")

    status = main([str(EXAMPLE), "--target=broken", "-o", str(output)])

    error = capsys.readouterr().err
    assert status == 1
    assert error.count("\n") == 1 and "Traceback" not in error
    assert f"{EXAMPLE}: error: the pass failed (ModuleNotFoundError" in error
    assert output.read_text() == "the user's file\n"


def test_version_names_the_package_and_its_jax(capsys):
    assert main(["--version"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r"pool3d-opt \(pool3d_pass \S+\); jax \S+, jaxlib \S+; supported >=0\.9\.0,<0\.13", line)


# A fresh interpreter where jax and jaxlib are not installed (their imports fail as a missing module's do).
WITHOUT_JAX = """
import sys
class NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("jax", "jaxlib"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, NotInstalled())
from pool3d_pass.cli.pool3d_opt import main
sys.exit(main(sys.argv[1:]))
"""


def test_without_jaxlib_one_error_line_and_version_still_works(tmp_path):
    import subprocess
    import sys

    output = tmp_path / "out.mlir"
    done = subprocess.run([sys.executable, "-c", WITHOUT_JAX, str(EXAMPLE), "-o", str(output)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and not output.exists()
    assert done.stderr == ("pool3d-opt: error: jax and jaxlib not installed: pool3d_pass needs jax and jaxlib "
                           "(>=0.9.0,<0.13) and numpy; install them first, e.g. pip install 'jax>=0.9.0,<0.13'\n")
    done = subprocess.run([sys.executable, "-c", WITHOUT_JAX, "--version"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and done.stdout.startswith("pool3d-opt (pool3d_pass ")
