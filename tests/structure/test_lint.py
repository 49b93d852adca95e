"""What the linter's configuration cannot say itself: each `noqa` names its rule and a reason,
and the import order's list of tests/support's helpers is that folder's (ruff runs in `make lint`).
"""

from __future__ import annotations

import re
import subprocess
import tomllib

from corpus import ROOT, SUPPORT

# The comment, its rule codes, and then words: a dash, a parenthesis or a colon may lead them in.
NOQA = re.compile(r"#\s*noqa\b(?P<rest>.*)$")
TAG = "# " + "noqa"  # (spelled apart, so this file's own examples are no directives)
NAMED = re.compile(r":\s*[A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*\s*(?:-+|\(|:)?\s*(?P<reason>\S.*)?$")


def unexplained(line: str) -> bool:
    """Whether a line's noqa (if any) lacks a rule or a reason."""
    found = NOQA.search(line)
    if found is None:
        return False
    named = NAMED.match(found.group("rest"))
    return named is None or not named.group("reason") or len(named.group("reason").strip("-() ")) < 8


def tracked_python() -> list[str]:
    listed = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True)
    return listed.stdout.split()


def test_every_noqa_names_its_rule_and_a_reason():
    wrong = [f"{path}:{number}: {line.strip()}"
             for path in tracked_python()
             for number, line in enumerate((ROOT / path).read_text(encoding="utf-8").splitlines(), 1)
             if unexplained(line)]
    assert wrong == []


def test_the_noqa_check_sees_a_bare_or_unexplained_noqa():
    assert unexplained(f"import x  {TAG}")
    assert unexplained(f"import x  {TAG}: E402")
    assert unexplained(f"import x  {TAG}: E402 - ok")
    assert not unexplained(f"import x  {TAG}: E402 - after XLA_FLAGS is set")
    assert not unexplained(f"except Exception:  {TAG}: BLE001 (a report line, never a crash)")
    assert not unexplained("x = 1  # a plain comment")


def test_the_import_orders_helper_list_is_tests_support():
    isort = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["ruff"]["lint"]["isort"]
    scripts_own = {"frontends", "case_runner"}  # scripts/frontends/ and the module its scripts share
    assert (ROOT / "scripts" / "frontends" / "case_runner.py").is_file()
    assert sorted(set(isort["known-local-folder"]) - scripts_own) == sorted(p.stem for p in SUPPORT.glob("*.py"))
