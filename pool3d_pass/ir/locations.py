"""An op's location as `file:line:col`, the frame of the user's code, for remarks and diagnostics."""

from __future__ import annotations

import re

from jaxlib.mlir import ir

# jaxlib 0.9 and 0.10 expose location kinds differently (see pool3d_pass.jax_compat).
from pool3d_pass.jax_compat import file_locations as _file_locations

LIBRARY_PATH_MARKERS = ("site-packages", "dist-packages")
_FILE_LOCATION = re.compile(r'"((?:[^"\\]|\\.)*)":(\d+):(\d+)')


def format_location(location: ir.Location, filename: str | None = None) -> str:
    """`file:line:col` of an op, for remarks; the MLIR text of the location if it has no file.

    JAX nests locations as name(callsite(callee at caller ...)); the innermost
    frame outside installed libraries (the user's model code) is the one shown,
    else the innermost frame. The parser names its buffer "-"; `filename`
    replaces that name.
    """
    frames = [(f.filename, f.start_line, f.start_col) for f in _file_locations(location)]
    if not frames:  # e.g. a diagnostic's location, which the bindings do not downcast
        frames = [(n, int(line), int(col)) for n, line, col in _FILE_LOCATION.findall(str(location))]
    if not frames:
        return str(location)
    user = [f for f in frames if not any(marker in f[0] for marker in LIBRARY_PATH_MARKERS)]
    name, line, col = (user or frames)[0]
    if name == "-" and filename is not None:
        name = filename
    return f"{name}:{line}:{col}"
