"""The package's import graph: layered, no upward import, no circle (an ast reading, nothing imported).

Every `import` and `from ... import` of a `pool3d_pass` module counts, also
those inside functions (a lazy import is still an arrow), and so does
`importlib.import_module("pool3d_pass....")` with a literal name. `from p import name`
is an arrow to the module `p.name` where that is a module, else to `p`.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from corpus import ROOT as REPOSITORY

PACKAGE = REPOSITORY / "pool3d_pass"
ROOT = "pool3d_pass"

# Top to bottom; a module may import only from its own entry or those below it.
# Entries of one row are siblings: neither may import the other.
LAYERS = [
    (ROOT,),
    (f"{ROOT}.cli", f"{ROOT}.integration"),
    (f"{ROOT}.rewriting",),
    (f"{ROOT}.calibration",),  # strategy auto's decisions: verdicts measured here (a child process), else the prior
    (f"{ROOT}.splicing",),  # emitting a call: the neutral custom call, or a binding lowered and spliced in
    (f"{ROOT}.matching", f"{ROOT}.bindings"),
    (f"{ROOT}.contract", f"{ROOT}.ir", f"{ROOT}.report", f"{ROOT}.safe_parse"),
    (f"{ROOT}.options", f"{ROOT}.jax_compat", f"{ROOT}.caches"),
    (f"{ROOT}.environment",),  # the variables' names, which options.py reads the settings' defaults from
]


def module_names() -> dict[str, Path]:
    names = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


def extension_modules() -> set[str]:
    """Compiled modules (the CPU kernels' `_kernel`: CMakeLists.txt's installed targets): no source to read."""
    cmake = (PACKAGE.parent / "CMakeLists.txt").read_text(encoding="utf-8")
    installed = re.findall(r"install\(TARGETS\s+(\w+)\s+LIBRARY\s+DESTINATION\s+([\w/]+)\)", cmake)
    assert installed, "CMakeLists.txt installs no extension module"
    return {f"{folder.replace('/', '.')}.{target}" for target, folder in installed}


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package modules `name` imports (a compiled module counts as none)."""
    extensions = extension_modules()
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                candidate = f"{source}.{alias.name}"
                if candidate not in extensions:
                    found.add(candidate if candidate in modules else source)
        elif isinstance(node, ast.Call) and _imported_by_name(node) is not None:
            found.add(_imported_by_name(node))
    return {target for target in found if target in modules and target != name}


def _imported_by_name(call: ast.Call) -> str | None:
    """The module of `importlib.import_module("pool3d_pass....")` (or a bare `import_module(...)`), else None."""
    func = call.func
    named = (isinstance(func, ast.Attribute) and func.attr == "import_module") or (
        isinstance(func, ast.Name) and func.id == "import_module")
    if named and call.args and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str):
        return call.args[0].value
    return None


def test_imports_by_name_are_arrows_too(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("import importlib\ndef f():\n    return importlib.import_module('pool3d_pass.contract')\n")
    modules = module_names()
    assert "pool3d_pass.contract" in imports_of("pool3d_pass.bindings.example", source, modules)


def import_graph() -> dict[str, set[str]]:
    modules = module_names()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def layer_of(name: str) -> tuple[int, str]:
    """(row, entry) of the longest LAYERS entry that is `name` or contains it."""
    best = None
    for row, entries in enumerate(LAYERS):
        for entry in entries:
            if (name == entry or name.startswith(entry + ".")) and (best is None or len(entry) > len(best[1])):
                best = (row, entry)
    assert best is not None, f"{name} is in no layer of LAYERS: add it"
    return best


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_every_module_has_a_layer():
    for name in import_graph():
        layer_of(name)


def test_no_module_imports_upward_or_sideways():
    wrong = []
    for name, targets in sorted(import_graph().items()):
        row, entry = layer_of(name)
        for target in sorted(targets):
            target_row, target_entry = layer_of(target)
            if target_row < row or (target_row == row and target_entry != entry):
                wrong.append(f"{name} -> {target}")
    assert not wrong, "imports against LAYERS:\n" + "\n".join(wrong)


def test_no_import_circle():
    assert cycles(import_graph()) == []


def context_variables(path: Path) -> int:
    """How many `contextvars.ContextVar(...)` (or bare `ContextVar(...)`) calls the module holds."""
    return sum(
        1 for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path)))
        if isinstance(node, ast.Call) and "ContextVar" in (getattr(node.func, "attr", None), getattr(node.func, "id", None)))


def test_one_context_variable_in_the_package(tmp_path):
    """Settings reach the rewrite and the bindings as arguments; the one context variable is
    routing's scope, which JAX's compile hook cannot be handed any other way."""
    found = {name: n for name, path in module_names().items() if (n := context_variables(path))}
    assert found == {f"{ROOT}.integration.routing": 1}
    source = tmp_path / "m.py"
    source.write_text("import contextvars\n_x = contextvars.ContextVar('x', default=None)\n")
    assert context_variables(source) == 1


@pytest.mark.parametrize(
    "graph, expected",
    [({"a": {"b"}, "b": {"a"}, "c": set()}, [["a", "b"]]), ({"a": {"b"}, "b": set()}, [])],
)
def test_the_circle_check_sees_a_circle(graph, expected):
    assert cycles(graph) == expected


def test_the_layer_check_sees_an_upward_import(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("import pool3d_pass\nfrom pool3d_pass.rewriting import max_pool_backward\n")
    modules = {**module_names(), "pool3d_pass.bindings.m": source}
    targets = imports_of("pool3d_pass.bindings.m", source, modules)
    assert targets == {ROOT, f"{ROOT}.rewriting.max_pool_backward"}
    assert all(layer_of(t)[0] < layer_of("pool3d_pass.bindings.m")[0] for t in targets)
