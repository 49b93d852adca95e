"""Everything that differs between the JAX / jaxlib versions pool3d_pass supports.

Supported: jax and jaxlib >= 0.9.0, < 0.13 (pyproject.toml). CI runs the full
suite on 0.12.1 (Python 3.12) and the pass-level tests on 0.9.0 (Python
3.11) (`make test`); 0.10.2 and 0.11.2 are checked by hand (`make check-jax`).
Found by running the pass, the kernel and the hook on each; see
docs/jax_integration.md ("Supported JAX versions").

What differs, and how this module hides it:

* MLIR locations (jaxlib): 0.10 downcasts `op.location` to `ir.FileLineColLoc`,
  `ir.NameLoc`, `ir.CallSiteLoc` (no `is_a_*` methods); 0.9 has one
  `ir.Location` class with `is_a_file()`, `is_a_name()`, `is_a_callsite()`.
  The attributes read (`filename`, `start_line`, `start_col`, `child_loc`,
  `callee`, `caller`) are the same. Use `file_locations`.
* XLA FFI headers (jaxlib/include): API version 0.2 on 0.9, 0.3 from 0.10.
  The kernel source is the same. jaxlib 0.9 refuses a kernel built against
  0.10's headers; 0.10 to 0.12 run one built against 0.9's. So pyproject.toml's
  build requirement is the oldest jaxlib (an isolated build loads everywhere),
  and a `--no-build-isolation` build uses the environment's own (CMakeLists.txt).
* MLIR attribute kinds (jaxlib): 0.12 dropped the static `ir.XAttr.isinstance`
  methods; the package casts instead (`ir.StringAttr(attr)` raises on another
  kind), which every version supports.
* `jax._src.interpreters.pxla._cached_compilation`: 0.9 takes
  `(computation, name, mesh, spmd_lowering, tuple_args, auto_spmd_lowering,
  ...)` and pmap's `UnloadedPmapExecutable` calls `compile_or_get_cached` too;
  0.10 dropped those parameters and pmap's own path. Both call
  `compiler.compile_or_get_cached(...)` through the module attribute, and its
  signature is the same on both, so the hook itself is version-independent.

* XLA's sharding propagation (not the pass): with a spatially sharded input
  and no `out_shardings`, 0.9 gives the plain program's pool output a partial
  tiling where 0.10 replicates it; the rewritten program (indices strategy)
  returns it replicated on both. Values are exact; the Makefile's 0.9 run
  deselects the one test that compares that output's sharding.

Everything else the package uses (the rest of the MLIR Python API in
`REQUIRED_MLIR_API`, `walk_and_apply_patterns`, `PassManager.add(callable)`,
`Module.parse`, `jax.ffi`, `jaxlib.xla_client.register_custom_call_target`,
`custom_partitioning`, `jax.shard_map`'s `sdy.manual_computation`, the
sharding APIs, the JAX internals in `JAX_INTERNALS`) is the same on all.

The MLIR part needs only jaxlib; the JAX part imports jax lazily.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import re

try:
    from jaxlib.mlir import ir
except ImportError:  # reported by ir.context.check_mlir_api, naming what is missing
    ir = None

#: The range pyproject.toml declares and CI tests: [minimum, first unsupported).
SUPPORTED_RANGE = ("0.9.0", "0.13")
TESTED_VERSIONS = ("0.9.0", "0.10.2", "0.11.2", "0.12.0.1", "0.12.1")


def installed_version(distribution: str) -> str | None:
    """An installed distribution's version, read from its metadata without importing it; None if absent."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def parse_version(text: str) -> tuple[int, ...]:
    """(0, 9, 0, 1) for "0.9.0.1"; ignores suffixes such as ".dev20260101" or "rc1"."""
    parts = []
    for piece in text.split("."):
        match = re.match(r"\d+", piece)
        if match is None:
            break
        parts.append(int(match.group()))
    return tuple(parts)


def jaxlib_version() -> str:
    import jaxlib

    return getattr(jaxlib, "__version__", None) or _jaxlib_version_module()


def _jaxlib_version_module() -> str:
    try:
        return importlib.import_module("jaxlib.version").__version__
    except (ImportError, AttributeError):
        return "?"


def is_supported(version: str) -> bool:
    low, high = (parse_version(v) for v in SUPPORTED_RANGE)
    return low <= parse_version(version) < high


def supported_range_text() -> str:
    low, high = SUPPORTED_RANGE
    return f">={low},<{high}"


# --- MLIR Python API (jaxlib) ----------------------------------------------------------

#: Downcast location classes: jaxlib 0.10 has them, 0.9 has `Location.is_a_*()` instead.
_HAS_LOCATION_CLASSES = hasattr(ir, "FileLineColLoc")

_LOCATION_API = (
    ("jaxlib.mlir.ir", ("FileLineColLoc", "NameLoc", "CallSiteLoc"))
    if _HAS_LOCATION_CLASSES
    else ("jaxlib.mlir.ir", ("Location",))
)

#: (module, names) the package needs from jaxlib's MLIR bindings, on this jaxlib.
REQUIRED_MLIR_API = (
    ("jaxlib.mlir.ir", ("Context", "Module", "Location", "InsertionPoint", "MLIRError",
                         "DenseI64ArrayAttr", "DenseElementsAttr", "RankedTensorType",
                         "DialectRegistry")),
    _LOCATION_API,
    ("jaxlib.mlir.passmanager", ("PassManager",)),
    ("jaxlib.mlir._mlir_libs._mlir.rewrite", ("RewritePatternSet", "walk_and_apply_patterns")),
    ("jaxlib.mlir.dialects.stablehlo", ("SelectAndScatterOp", "ReduceWindowOp", "CustomCallOp",
                                        "PadOp", "SliceOp", "ReshapeOp", "ConstantOp",
                                        "register_dialect")),
    ("jaxlib.mlir._mlir_libs._jax_mlir_ext", ("register_dialects",)),
)

if _HAS_LOCATION_CLASSES:

    def _is_file(location: ir.Location) -> bool:
        return isinstance(location, ir.FileLineColLoc)

    def _is_name(location: ir.Location) -> bool:
        return isinstance(location, ir.NameLoc)

    def _is_callsite(location: ir.Location) -> bool:
        return isinstance(location, ir.CallSiteLoc)

else:

    def _is_file(location: ir.Location) -> bool:
        return location.is_a_file()

    def _is_name(location: ir.Location) -> bool:
        return location.is_a_name()

    def _is_callsite(location: ir.Location) -> bool:
        return location.is_a_callsite()


MAX_LOCATION_NODES = 10_000  # a location tree built from shared aliases can be exponential


def file_locations(location: ir.Location) -> list[ir.Location]:
    """The file:line:col locations inside `location`, innermost call first.

    Each has `.filename`, `.start_line`, `.start_col` on every supported jaxlib.
    Walked without recursion (any nesting depth) and at most MAX_LOCATION_NODES
    nodes deep into the tree (the frames found by then are returned).
    """
    found, stack, visited = [], [location], 0
    while stack and visited < MAX_LOCATION_NODES:
        node = stack.pop()
        visited += 1
        if _is_file(node):
            found.append(node)
        elif _is_name(node):
            stack.append(node.child_loc)
        elif _is_callsite(node):
            stack += [node.caller, node.callee]  # the callee is walked first
    return found


# --- JAX internals (the compile hook) --------------------------------------------------

# (module, attribute, the leading parameter names we rely on, or None).
# The same on 0.9 to 0.12 (pxla._cached_compilation's parameters differ, but
# only its call of compile_or_get_cached through the module attribute matters).
JAX_INTERNALS: tuple[tuple[str, str, tuple[str, ...] | None], ...] = (
    ("jax._src.compiler", "compile_or_get_cached",
     ("backend", "computation", "devices", "compile_options", "host_callbacks",
      "executable_devices", "pgle_profiler")),
    ("jax._src.interpreters.pxla", "_cached_compilation",
     None),  # calls `compiler.compile_or_get_cached(backend, computation, ...)`
    ("jax._src.stages", "Lowered", None),
    ("jax._src.stages", "Traced", None),
    ("jax", "clear_caches", ()),
    ("jax._src.source_info_util", "register_exclusion", ("path",)),
    ("jax._src.traceback_util", "register_exclusion", ("path",)),
    # custom_partitioning's callback registry, keyed by backend_config (splicing/partition_keys.py)
    ("jax._src.custom_partitioning", "_sharding_callbacks", None),
    # the sharding of an HloSharding, which the partitionable bindings return (bindings/partitioned.py)
    ("jax._src.sharding_impls", "GSPMDSharding", None),
    # JAX's cache registry: jax.clear_caches() clears what is registered (caches.py)
    ("jax._src.util", "register_cache", ("cache", "for_what")),
)

#: (class in jax._src.stages, method) subclassed by pool3d_pass.jit.
STAGE_METHODS = (("Lowered", "compile"), ("Traced", "lower"))


class JaxInternalsChanged(ImportError):
    """This JAX lacks (or changed) a private name the pool3d_pass JAX hook relies on."""


SWITCH_STATE_KEYWORDS = ("include_in_jit_key", "include_in_trace_context")


def moved_jax_internals() -> list[str]:
    """What moved or changed among `JAX_INTERNALS`, one phrase each; empty if nothing."""
    problems = []
    for module_name, attribute, parameters in JAX_INTERNALS:
        try:
            module = importlib.import_module(module_name)
        except ImportError as error:
            problems.append(f"module {module_name} is gone ({error})")
            continue
        target = getattr(module, attribute, None)
        if target is None:
            problems.append(f"{module_name}.{attribute} is gone")
            continue
        target = getattr(target, "_pool3d_pass_original", target)
        if parameters:
            found = tuple(inspect.signature(target).parameters)[: len(parameters)]
            if found != parameters:
                problems.append(
                    f"{module_name}.{attribute} parameters are {found}, expected {parameters}")
    # The enable()/disable() switch is a JAX config state in JAX's cache keys (integration/routing.py).
    config = importlib.import_module("jax._src.config")
    make_state = getattr(config, "string_or_object_state", None)
    if make_state is None:
        problems.append("jax._src.config.string_or_object_state is gone")
    else:
        keywords = inspect.signature(make_state).parameters
        problems += [f"jax._src.config.string_or_object_state lacks {k}=" for k in SWITCH_STATE_KEYWORDS
                     if k not in keywords]
    problems += [f"jax._src.config.State.{a} is gone" for a in ("value", "_set") if not hasattr(getattr(config, "State", None), a)]
    stages = importlib.import_module("jax._src.stages")
    for cls_name, method in STAGE_METHODS:
        if not callable(getattr(getattr(stages, cls_name, None), method, None)):
            problems.append(f"jax._src.stages.{cls_name}.{method} is gone")
    return problems


def check_jax_internals() -> None:
    """Raise JaxInternalsChanged naming every relied-upon internal that moved or changed."""
    problems = moved_jax_internals()
    if problems:
        import jax

        version = jax.__version__
        where = ("a supported version" if is_supported(version)
                 else f"outside the supported range jax{supported_range_text()}")
        raise JaxInternalsChanged(
            f"pool3d_pass's JAX hook was written for jax{supported_range_text()} "
            f"(tested: {', '.join(TESTED_VERSIONS)}); this is jax {version}, {where}; "
            "see docs/jax_integration.md. Changed: " + "; ".join(problems))


# --- MLIR rewrite API (jaxlib) ---------------------------------------------------------


def erase_op(rewriter, op) -> None:
    """`rewriter.erase_op(op)` for an OpView or an Operation.

    jaxlib 0.10's `PatternRewriter.erase_op` takes any `_OperationBase` (an
    OpView such as `stablehlo.PadOp` too); 0.9's takes only `ir.Operation`.
    (`replace_op` takes `_OperationBase` on both.)
    """
    rewriter.erase_op(getattr(op, "operation", op))
