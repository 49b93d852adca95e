"""Pass pipelines for pool3d-opt: upstream passes by their textual names, ours by its argument.

A Python-defined pass cannot be named inside an upstream textual pipeline, so
a pipeline such as `canonicalize,pool3d-max-pool-backward,cse` is split at its
top-level commas and each element added to the PassManager on its own.
"""

from __future__ import annotations

from collections.abc import Callable

from jaxlib.mlir import passmanager

from pool3d_pass.options import PassOptions
from pool3d_pass.report import RewriteReport
from pool3d_pass.rewriting import PASS_ARGUMENT, add_pass

DEFAULT_PIPELINE = PASS_ARGUMENT


def split_top_level(pipeline: str) -> list[str]:
    """Split at commas outside (), {} and quotes."""
    elements, depth, quoted, start = [], 0, False, 0
    for index, char in enumerate(pipeline):
        if char == '"':
            quoted = not quoted
        elif not quoted and char in "({":
            depth += 1
        elif not quoted and char in ")}":
            depth -= 1
        elif not quoted and depth == 0 and char == ",":
            elements.append(pipeline[start:index])
            start = index + 1
    elements.append(pipeline[start:])
    return [element.strip() for element in elements if element.strip()]


def build_pass_manager(
    pipeline: str,
    *,
    options: PassOptions,
    on_report: Callable[[RewriteReport], None],
) -> passmanager.PassManager:
    """A PassManager on builtin.module running `pipeline`; raises ValueError on an unknown pass."""
    pm = passmanager.PassManager("builtin.module")
    elements = split_top_level(pipeline)
    if not elements:
        raise ValueError("empty pass pipeline")
    for element in elements:
        if element == PASS_ARGUMENT:
            add_pass(pm, options, on_report=on_report)
        else:
            pm.add(element)  # ValueError naming the element if MLIR does not know it
    return pm
