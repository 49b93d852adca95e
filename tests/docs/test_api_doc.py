"""docs/api.md names everything a user can call, set or pass, with its default, and explains every remark.

Each table is read back and compared with the package: the Python table with
`pool3d_pass.__all__`, the settings table with `PassOptions`' fields (and each
field's default), the `pool3d-opt` table with its argument parser's flags, the
environment table with `environment.VARIABLES`. Troubleshooting must quote every
reason the matchers give for leaving a gradient alone (their `NoMatch` and
`GeometryMismatch` texts, read from the source), so a new reason cannot go
unexplained.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import re

import pool3d_pass
from pool3d_pass import environment
from pool3d_pass.options import INPUT_FIELDS, SETTING_SPECS, PassOptions

from corpus import ROOT

API = ROOT / "docs" / "api.md"


def _section(title: str) -> str:
    text = API.read_text()
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else None]


def _table(title: str) -> dict[str, list[str]]:
    """The rows of the section's table: {first column's names: the other cells}."""
    rows = {}
    for line in _section(title).splitlines():
        if not line.startswith("| `"):
            continue
        cells = [cell.strip() for cell in line.strip("|").split(" | ")]
        for name in re.findall(r"`([^`]+)`", cells[0]):
            rows[name] = cells[1:]
    return rows


def test_every_public_name_is_in_the_python_table():
    assert set(_table("Python")) == set(pool3d_pass.__all__)


def test_every_passoptions_field_is_in_the_settings_table_with_its_default():
    rows = _table("Settings: `PassOptions`")
    assert list(rows) == [field.name for field in dataclasses.fields(PassOptions)]
    for name, (_kind, default, _) in rows.items():
        value = SETTING_SPECS[name]["default"] if name in SETTING_SPECS else \
            next(f.default for f in dataclasses.fields(PassOptions) if f.name == name)
        shown = f'"{value}"' if isinstance(value, str) else str(value)
        assert default.startswith(f"`{shown}`"), (name, default, shown)
        if SETTING_SPECS.get(name, {}).get("variable"):
            assert f"${SETTING_SPECS[name]['variable']}" in default, name
    assert set(INPUT_FIELDS) < set(rows)


def test_every_pool3d_opt_flag_is_in_its_table(monkeypatch):
    from pool3d_pass.cli import pool3d_opt

    parsers = []
    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", lambda self, *a, **k: parsers.append(self))
    pool3d_opt.parse_args([])
    (parser,) = parsers
    flags = {option for action in parser._actions for option in action.option_strings}
    flags |= {action.dest for action in parser._actions if not action.option_strings}  # `input`
    assert set(_table("`pool3d-opt`")) == flags


def test_every_environment_variable_is_in_its_table():
    assert set(_table("Environment variables")) == set(environment.VARIABLES)


def _reasons() -> list[str]:
    """The fixed text of every reason the matchers raise (the longest literal piece of each f-string)."""
    reasons = []
    for path in sorted((ROOT / "pool3d_pass" / "matching").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("NoMatch", "GeometryMismatch")
                    and node.args):
                continue
            argument = node.args[0]
            if isinstance(argument, ast.Constant):
                pieces = [argument.value]
            elif isinstance(argument, ast.JoinedStr):
                pieces = [part.value for part in argument.values if isinstance(part, ast.Constant)]
            else:
                continue  # str(reason): a reason raised elsewhere, read there
            reasons.append(max(pieces, key=len).strip(" ;:,(").split(" (")[0])
    return reasons


def test_troubleshooting_explains_every_reason_the_matchers_give():
    text = " ".join(_section("Troubleshooting").split())
    reasons = _reasons()
    assert len(reasons) >= 20  # the matchers' reasons were found
    assert not [reason for reason in reasons if reason not in text]
