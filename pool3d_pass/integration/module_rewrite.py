"""Rewrite one StableHLO module about to be compiled for one platform, or leave it alone.

This is the policy around the pass (`rewriting.rewrite`):

* no `stablehlo.select_and_scatter` in the module (nor, where the binding
  has the forward-output call, a `stablehlo.reduce_window`): return the very
  same object, uncopied (a program without pooling compiles exactly as before);
* a platform with no binding (`pool3d_pass.bindings.registry`): same object,
  and a WARNING saying the candidates were left alone;
* a program compiled for several devices gets the binding's partitionable
  version, laid over the program's own mesh (`device_mesh.py`); a bare custom
  call would make XLA all-gather its operands;
* otherwise check the platform's binding is usable, rewrite a COPY with that
  binding spliced in (the module passed in is JAX's cached lowering, shared
  with plain `jax.jit`), log the report, and return the copy, or the original
  when nothing was rewritten;
* the log: what was rewritten, and what strategy `auto`'s speed rule left to
  XLA, at INFO (DEBUG for a pooling primitive JAX compiles on its own to run
  it eagerly, as Flax's `init` does: a line per pool there says nothing);
  gradients left for any other reason (a dtype, a window the kernels do not
  take, no binding) in ONE WARNING per compiled program, with each one's
  location and reason: with Python's default logging a user still learns
  why nothing got faster;
* if registration or the rewrite fails, log a warning (with the saved input
  module and the `pool3d-opt` command reproducing the rewrite) and return the
  original: a failed acceleration never breaks the user's compile. If XLA
  then fails on the rewritten module, the hook compiles the original and
  `compile_failed` logs the same kind of warning.
"""

from __future__ import annotations

import io
import logging
import tempfile

import numpy as np
from jaxlib.mlir import ir

from pool3d_pass.bindings.registry import binding_for
from pool3d_pass.contract import FORWARD_OUTPUT
from pool3d_pass.integration.device_mesh import program_mesh
from pool3d_pass.options import PassOptions, command_flags
from pool3d_pass.report import FORWARDS, NEUTRAL_CALL, Miss, RewriteReport
from pool3d_pass.rewriting import rewrite

logger = logging.getLogger("pool3d_pass")

SELECT_AND_SCATTER = "stablehlo.select_and_scatter"
POOLING_OPS = (SELECT_AND_SCATTER, "stablehlo.reduce_window")
# The modules of pooling primitives run eagerly: JAX compiles each as `jit(<primitive>)`
# (jax._src.dispatch.xla_primitive_callable names its function after the primitive).
EAGER_POOLING = frozenset(f"jit_{name}" for name in (
    "reduce_window_max", "reduce_window", "select_and_scatter_add", "select_and_gather_add"))


def module_name(module: ir.Module) -> str:
    """The module's `sym_name` (JAX sets it to `jit_<function name>`)."""
    try:
        return ir.StringAttr(module.operation.attributes["sym_name"]).value
    except (KeyError, ValueError):
        return "<unnamed module>"


def count_ops(module: ir.Module, names: tuple[str, ...], *, stop_at_first: bool = False) -> int:
    """How many ops named `names` the module holds (at most 1 with stop_at_first)."""
    found = 0

    def visit(op: ir.Operation) -> ir.WalkResult:
        nonlocal found
        if op.name in names:
            found += 1
            if stop_at_first:
                return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found


def count_select_and_scatter(module: ir.Module, *, stop_at_first: bool = False) -> int:
    """How many `stablehlo.select_and_scatter` ops the module holds (at most 1 with stop_at_first)."""
    return count_ops(module, (SELECT_AND_SCATTER,), stop_at_first=stop_at_first)


def copy_module(module: ir.Module) -> ir.Module:
    """An independent copy, in the same context, with locations kept (bytecode round trip)."""
    buffer = io.BytesIO()
    module.operation.write_bytecode(buffer)
    return ir.Module.parse(buffer.getvalue(), context=module.context)


def _save_for_reproduction(module: ir.Module, name: str) -> str:
    with tempfile.NamedTemporaryFile(
        "w", prefix=f"pool3d_{name}_", suffix=".mlir", delete=False
    ) as file:
        file.write(module.operation.get_asm(enable_debug_info=True))
        return file.name


def reproducer(module: ir.Module, platform: str, options: PassOptions, devices=None) -> str:
    """Save `module` (the input of the rewrite) and return the command that rewrites it again."""
    saved = _save_for_reproduction(module, module_name(module))
    command = f"pool3d-opt {command_flags(options, target=platform)} {saved}"
    if devices is not None and np.size(devices) > 1:
        command += f" (the compile was for {np.size(devices)} devices: pool3d-opt splices the single-device binding)"
    return command


def compile_failed(module: ir.Module, platform: str, devices, options: PassOptions, error: Exception) -> None:
    """Log that XLA failed on the rewritten `module`, which is then compiled unchanged."""
    reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
    logger.warning(
        "%s (%s): XLA failed to compile the pool3d-rewritten module (%s: %s); compiled the original "
        "instead. Reproduce the rewrite with: %s", module_name(module), platform, type(error).__name__,
        reason, reproducer(module, platform, options, devices))


def unchanged_report(module: ir.Module, reason: str) -> RewriteReport:
    """The report of a compile that left `module` as it was: each select_and_scatter missed for `reason`
    (located at the module: no pass run read the ops' own locations)."""
    report = RewriteReport(candidates=count_select_and_scatter(module))
    for _ in range(report.candidates):
        report.add(Miss(module_name(module), reason))
    return report


def _is_gradient(miss: Miss) -> bool:
    return miss.subject not in (NEUTRAL_CALL, *FORWARDS)


def log_report(name: str, platform: str, report: RewriteReport, *, per_rewrite: bool = False) -> None:
    """The log of one compile's rewrite (see the module docstring): INFO (DEBUG for an eager primitive), and
    one WARNING naming every gradient left for a reason other than `auto`'s speed rule."""
    level = logging.DEBUG if name in EAGER_POOLING else logging.INFO
    if report.candidates or report.events:
        logger.log(level, "%s (%s): %s", name, platform, report.one_line())
    if per_rewrite:  # how each call runs on the devices: partitioned, or per shard (rewriting/remarks.py)
        for done in report.rewrites:
            logger.log(level, "%s (%s): %s", name, platform, done.remark())
    unexplained = [miss for miss in report.missed if _is_gradient(miss) and not miss.speed_rule]
    for miss in report.missed:
        if miss not in unexplained:
            logger.log(level, "%s (%s): %s not rewritten at %s: %s", name, platform, miss.subject,
                       miss.location, miss.reason)
    if unexplained:
        lines = "".join(f"\n  {miss.subject} not rewritten at {miss.location}: {miss.reason}" for miss in unexplained)
        logger.warning("%s (%s): pool3d_pass did not rewrite %d of %d max-pool gradient(s); XLA's "
                       "select_and_scatter runs them:%s", name, platform, len(unexplained), report.candidates, lines)


def rewrite_for_platform(
    module: ir.Module, platform: str, devices=None, options: PassOptions | None = None, spliced: list | None = None,
    on_report=None,
) -> ir.Module:
    """The module to compile for `platform` on `devices`: `module` itself, or a rewritten copy.

    `devices` is the compile's device assignment (any array-like of devices); a
    program for several devices gets the binding's partitionable version.
    `options` (`routing.options()`: the settings asked for; None: the defaults) get this compile's
    target and mesh. `spliced`: receives the binding lowerings spliced in
    (`rewriting.rewrite`); the caller holds it while XLA compiles the result.
    `on_report`: called with this compile's `RewriteReport` (`pool3d_pass.jit`'s
    `last_report`), where the module held pooling.
    """
    options = PassOptions() if options is None else options
    name = module_name(module)

    def left(reason: str) -> ir.Module:
        report = unchanged_report(module, reason)
        log_report(name, platform, report)
        if on_report is not None:
            on_report(report)
        return module

    binding = binding_for(platform)
    if binding is None:
        return left(f"no pool3d binding for platform '{platform}'; nothing is rewritten there")
    # inference max pools too, where the binding has their call (rewriting/inference.py)
    candidates = POOLING_OPS if binding.implements(FORWARD_OUTPUT) else (SELECT_AND_SCATTER,)
    if not count_ops(module, candidates, stop_at_first=True):
        logger.debug("%s (%s): no pooling, compiled unchanged", name, platform)
        if on_report is not None:
            on_report(RewriteReport())
        return module

    try:
        binding.require()
    except Exception as error:  # noqa: BLE001 -- any failure means: compile unchanged
        logger.warning(
            "%s (%s): pool3d kernel binding unavailable, compiled unchanged: %s: %s",
            name, platform, type(error).__name__, error)
        if on_report is not None:
            on_report(unchanged_report(module, f"the {platform} binding is unavailable: {error}"))
        return module

    mesh = None
    if devices is not None and np.size(devices) > 1:
        mesh = program_mesh(module, devices)
        if mesh is None:
            return left(f"compiled for {np.size(devices)} devices on a mesh pool3d cannot read")

    copy = copy_module(module)
    try:
        report = rewrite(copy, options.replace(target=platform, mesh=mesh), binding=binding, spliced=spliced)
        copy.operation.verify()
    except Exception as error:  # see the module docstring
        logger.warning(
            "%s (%s): pool3d_pass.rewrite failed, compiled unchanged. Reproduce with: %s",
            name, platform, reproducer(module, platform, options, devices), exc_info=True)
        if on_report is not None:
            on_report(unchanged_report(module, f"pool3d_pass.rewrite failed ({type(error).__name__}: {error})"))
        return module

    log_report(name, platform, report, per_rewrite=mesh is not None)
    if on_report is not None:
        on_report(report)
    return copy if report.rewritten or report.forward_alone else module
