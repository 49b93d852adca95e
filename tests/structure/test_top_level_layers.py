"""The repository's top-level folders import downward only, and nothing outside tests/ imports a test module.

checks/ (tools run by hand or on a device) may use bench/ (the speed tables),
both use cases/ (the problems) and oracles/ (what results are judged by),
and all of them the package. The package ships alone (pyproject.toml's
wheel.packages), so it imports none of them; tests/ sits on top and is
imported by nobody, its helpers (tests/support/, imported by bare name)
included. An ast reading, nothing imported; lazy imports count.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from corpus import ROOT, SUPPORT

# Top to bottom: a folder may import its own modules and those of the folders below it.
LAYERS = ("checks", "bench", "cases", "oracles", "pool3d_pass")
# The one exception, with its reason: `python -m pool3d_pass calibrate --bench` calibrates for make bench's
# rows, which only a source checkout has (its help says so); a lazy import, never reached from an installed wheel.
ALLOWED = {("pool3d_pass/cli/calibrate.py", "cases")}


def helper_names() -> frozenset[str]:
    """The names tests/support's helper modules are imported by (pyproject.toml's pytest pythonpath)."""
    return frozenset(p.stem for p in SUPPORT.glob("*.py")) | frozenset(p.name for p in SUPPORT.iterdir() if p.is_dir())


def top_level_imports(path: Path) -> set[str]:
    """The first component of every absolute module `path` imports."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.partition(".")[0])
    return found


def wrong_imports(root: Path) -> list[str]:
    helpers = helper_names()
    wrong = []
    for row, folder in enumerate(LAYERS):
        for path in sorted((root / folder).rglob("*.py")):
            relative = path.relative_to(root).as_posix()
            for name in sorted(top_level_imports(path)):
                if (relative, name) in ALLOWED:
                    continue
                if name == "tests" or name in helpers:
                    wrong.append(f"{relative} imports the test module {name}")
                elif name in LAYERS and LAYERS.index(name) < row:
                    wrong.append(f"{relative} imports {name}/, a folder above it")
    return wrong


def test_top_level_folders_import_downward_and_no_test_module():
    assert wrong_imports(ROOT) == []


@pytest.mark.parametrize("folder, source, expected", [
    ("checks", "from tests.bindings.neuron import test_neuron_transcription\n", "imports the test module tests"),
    ("checks", "def f():\n    import corpus\n", "imports the test module corpus"),
    ("cases", "from checks import deviceless\n", "imports checks/, a folder above it"),
], ids=["checks-imports-tests", "checks-imports-a-helper", "cases-imports-checks"])
def test_the_check_sees_a_wrong_import(tmp_path, folder, source, expected):
    for name in LAYERS:
        (tmp_path / name).mkdir()
    (tmp_path / folder / "m.py").write_text(source)
    assert [line for line in wrong_imports(tmp_path) if expected in line] == [f"{folder}/m.py {expected}"]
