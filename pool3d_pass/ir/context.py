"""MLIR contexts and the jaxlib MLIR Python API this package relies on.

The pass is built on the MLIR Python bindings that ship inside jaxlib (the
upstream `mlir-python-bindings` package on PyPI is an empty placeholder). This
module checks the pieces of that API we need (listed, per jaxlib version, in
`pool3d_pass.jax_compat.REQUIRED_MLIR_API`), so a jaxlib that moves them fails
here, with a message naming what is missing, instead of deep inside a rewrite.
"""

from __future__ import annotations

import importlib

from pool3d_pass import jax_compat

# Per jaxlib version (0.9 and 0.10 differ in the location classes): jax_compat.
REQUIRED_API = jax_compat.REQUIRED_MLIR_API


class MissingMlirApi(ImportError):
    """jaxlib lacks a piece of the MLIR Python API that pool3d_pass needs."""


def check_mlir_api() -> None:
    """Raise MissingMlirApi naming every required module or attribute that is absent."""
    missing = []
    for module_name, names in REQUIRED_API:
        try:
            module = importlib.import_module(module_name)
        except ImportError as error:
            missing.append(f"{module_name} ({error})")
            continue
        missing.extend(f"{module_name}.{name}" for name in names if not hasattr(module, name))
    if missing:
        raise MissingMlirApi(
            f"pool3d_pass needs the MLIR Python API of jaxlib{jax_compat.supported_range_text()} "
            f"(tested: {', '.join(jax_compat.TESTED_VERSIONS)}); jaxlib "
            f"{jax_compat.jaxlib_version()} lacks: {', '.join(missing)}"
        )


check_mlir_api()

from jaxlib.mlir import ir  # noqa: E402 - after check_mlir_api, which names what a jaxlib lacks
from jaxlib.mlir._mlir_libs import _jax_mlir_ext  # noqa: E402 - likewise
from jaxlib.mlir.dialects import chlo, mhlo, sdy, stablehlo  # noqa: E402 - likewise

# Every dialect JAX emits beside func, with how each is registered in a context.
DIALECTS = {"stablehlo": stablehlo.register_dialect, "chlo": chlo.register_dialect, "sdy": sdy.register_dialect,
            "mhlo": mhlo.register_mhlo_dialect}


def make_context(dialects: tuple[str, ...] = tuple(DIALECTS)) -> ir.Context:
    """A context that knows func and `dialects` (default: every dialect JAX emits)."""
    registry = ir.DialectRegistry()
    _jax_mlir_ext.register_dialects(registry)
    context = ir.Context()
    context.append_dialect_registry(registry)
    context.load_all_available_dialects()
    for name in dialects:
        DIALECTS[name](context)
    return context
