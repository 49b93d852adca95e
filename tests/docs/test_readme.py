"""README.md's first screen is for people who train models, and what it says is true.

Its first 40 lines hold the install commands, a complete example (Flax,
under `pool3d_pass.enable()`) and the contributor commands (`make demo`,
`make test`); the example runs as printed and its training step's two
max-pool gradients are rewritten.
"""

from __future__ import annotations

import logging
import re

import numpy as np
import pytest

import pool3d_pass

from corpus import ROOT

README = ROOT / "README.md"
FIRST_SCREEN = 40


def _fenced_blocks(lines: list[str]) -> list[tuple[str, int, int]]:
    """(language, first line number, last line number) of each fenced block; line numbers from 1."""
    blocks, opened = [], None
    for number, line in enumerate(lines, 1):
        if line.startswith("```"):
            if opened is None:
                opened = (line[3:].strip(), number)
            else:
                blocks.append((opened[0], opened[1], number))
                opened = None
    return blocks


def _example() -> tuple[str, int]:
    """The README's first Python block, and the line its closing fence is on."""
    lines = README.read_text().splitlines()
    language, first, last = next(block for block in _fenced_blocks(lines) if block[0] == "python")
    return "\n".join(lines[first:last - 1]), last


def test_the_first_screen_holds_install_the_example_and_the_contributor_commands():
    lines = README.read_text().splitlines()[:FIRST_SCREEN]
    assert any(line.startswith("pip install .") for line in lines)
    assert _example()[1] <= FIRST_SCREEN
    for command in ("make demo", "make test"):
        assert any(line.startswith(command) for line in lines), command
    assert re.search(r"\d+(\.\d+)?x", " ".join(lines[:8])), "a measured figure in the opening sentence"


@pytest.mark.needs_flax
def test_the_example_runs_and_its_pools_gradients_are_rewritten(caplog):
    pytest.importorskip("flax")
    code, _ = _example()
    namespace: dict = {"__name__": "readme_example"}
    try:
        with caplog.at_level(logging.INFO, logger="pool3d_pass"):
            exec(compile(code, str(README), "exec"), namespace)  # noqa: S102 -- the README's own example
    finally:
        pool3d_pass.disable()
    assert np.isfinite(float(namespace["value"]))
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    assert any(line.startswith("jit_train_step (cpu): 2 select_and_scatter found, 2 rewritten, 0 missed")
               for line in lines), lines
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
