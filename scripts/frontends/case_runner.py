"""What the frontend case scripts share: the case registry and the command line.

Each `*_cases.py` runs in its frontend's own venv, registers its cases with
`CaseList.case(...)` and lowers them with its own `lower(case) -> str`;
`main` writes the JSON list that scripts/lower_fixtures.py reads (see the
scripts' docstrings for the fields).
"""

from __future__ import annotations

import importlib.metadata
import json
import sys
from collections.abc import Callable, Sequence


class CaseList(list):
    """The cases of one frontend, in registration order."""

    def __init__(self, source: str):
        super().__init__()
        self.source = source

    def case(self, name, description, expected=1, negative=None, notes=None, remarks=(), forward=True, source=None):
        """Decorator: register `build` (a function returning what `lower` takes) as a case."""
        def deco(build):
            self.append(dict(name=name, description=description, source=source or self.source, build=build,
                             expected_pool_gradients=expected, negative=negative, notes=notes,
                             expected_remarks=list(remarks), forward_in_program=forward))
            return build
        return deco


def versions(packages: Sequence[str]) -> dict:
    out = {}
    for package in packages:
        try:
            out[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            out[package] = None
    return out


def main(argv: Sequence[str], cases: CaseList, lower: Callable[[dict], str], packages: Sequence[str]) -> int:
    """`OUT.json [NAME ...]`: lower the named cases (all by default) into OUT.json."""
    out, names = argv[0], set(argv[1:])
    results = []
    for c in cases:
        if names and c["name"] not in names:
            continue
        entry = {k: v for k, v in c.items() if k != "build"}
        entry["text"] = lower(c)
        entry["versions"] = versions(packages)
        results.append(entry)
        print(f"lowered {c['name']}", file=sys.stderr)
    with open(out, "w") as f:
        json.dump(results, f)
    return 0
