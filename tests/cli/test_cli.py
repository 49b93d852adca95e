"""pool3d-opt failures that lit cannot provoke: a binding that fails inside the pass."""

from __future__ import annotations


from pool3d_pass.bindings import registry
from pool3d_pass.bindings.registry import Binding, contract_preconditions
from pool3d_pass.cli.pool3d_opt import main

from corpus import EXAMPLE  # noqa: E402


def test_failing_binding_gives_one_line_and_no_output_file(monkeypatch, tmp_path, capsys):
    broken = Binding("broken", {"backward": "pool3d_pass.no_such_module:function"}, "cpu", contract_preconditions)
    monkeypatch.setitem(registry._BINDINGS, "broken", broken)
    output = tmp_path / "out.mlir"
    output.write_text("the user's file\n")

    status = main([str(EXAMPLE), "--target=broken", "-o", str(output)])

    error = capsys.readouterr().err
    assert status == 1
    assert error.count("\n") == 1 and "Traceback" not in error
    assert f"{EXAMPLE}: error: the pass failed (ModuleNotFoundError" in error
    assert output.read_text() == "the user's file\n"
