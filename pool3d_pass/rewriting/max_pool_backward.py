"""The pool3d MLIR pass, `pool3d-max-pool-backward`, and its public API: `add_pass`, `rewrite`, `rewrite_text`.

One pass, runnable in any PassManager next to upstream passes (`add_pass`),
or directly on a module (`rewrite`) or on text (`rewrite_text`). Each run
applies the patterns of patterns.py in one walk (`walk_and_apply_patterns`: no
folding, no dead-code elimination, so nothing the pass did not mean to touch
changes), erases the forwards the indices strategy replaced, then, with a
platform target whose binding has the forward-output call, applies the
second walk's pattern (forward max pools without a gradient). A bug in a
pattern fails the pass rather than emitting half-rewritten IR.
"""

from __future__ import annotations

from collections.abc import Callable

from jaxlib.mlir import ir, passmanager
from jaxlib.mlir._mlir_libs._mlir import rewrite as mlir_rewrite

from pool3d_pass.bindings.registry import Binding, binding_for
from pool3d_pass.ir.attributes import attribute_values_cached
from pool3d_pass.ir.context import make_context
from pool3d_pass.options import PassOptions, pass_options
from pool3d_pass.report import RewriteReport
from pool3d_pass.rewriting import cleanup
from pool3d_pass.rewriting.patterns import PassRun

PASS_NAME = "Pool3dMaxPoolBackward"
PASS_ARGUMENT = "pool3d-max-pool-backward"
PASS_DESCRIPTION = (
    "Rewrite StableHLO max-pool gradients (select_and_scatter GE/add), and their forward "
    "max pools, into the pool3d contract's custom calls (recompute or indices strategy); "
    "with a platform target, forward max pools without a gradient too (forward-output call)."
)


def _run_callable(on_report: Callable[[RewriteReport], None] | None, options: PassOptions, binding: Binding | None,
                  spliced: list | None = None):
    """The pass's body, which the PassManager calls with each module it runs on (`pm.run`).

    Each run makes a `patterns.PassRun` (the run's settings, emitter and
    strategy chooser; its patterns call `splicing.emitter`'s `Emit` for every
    contract call they emit), applies its patterns and hands the report to
    `on_report`. `spliced`: see `add_pass`.
    """

    def run(op: ir.Operation, pass_) -> None:
        state = PassRun(options, binding, spliced)
        state.chooser.collect_from(op)  # a calibration measures every class of the module at once
        try:
            with attribute_values_cached():
                mlir_rewrite.walk_and_apply_patterns(op, state.patterns())
                state.erase_replaced_forwards()
                forward_alone = state.forward_alone_patterns()
                if forward_alone is not None:
                    mlir_rewrite.walk_and_apply_patterns(op, forward_alone)
                    cleanup.erase_unused_chains(state.forwards_alone)
        except Exception:  # a bug in a pattern: fail the pass rather than emit half-rewritten IR
            pass_.signal_pass_failure()
            raise
        if state.pending_folds:
            # A slice the matcher accepted was not visited; never expected.
            pass_.signal_pass_failure()
        if on_report is not None:
            on_report(state.report)

    return run


def _module_operation(module) -> ir.Operation:
    """The `builtin.module` operation of `module` (an `ir.Module`, or that operation itself), else TypeError."""
    if isinstance(module, ir.Module):
        return module.operation
    if isinstance(module, (ir.Operation, ir.OpView)) and module.operation.name == "builtin.module":
        return module.operation
    what = f"a {module.operation.name} operation" if isinstance(module, (ir.Operation, ir.OpView)) else (
        f"{module!r:.60} ({type(module).__name__})")
    hint = "; for textual MLIR use pool3d_pass.rewrite_text" if isinstance(module, (str, bytes)) else ""
    raise TypeError(f"module must be a jaxlib.mlir.ir.Module (or its builtin.module operation), got {what}{hint}")


def resolve_binding(options: PassOptions) -> Binding | None:
    """The binding of `options.target` with its packages checked (None: neutral, or no binding).

    A binding whose packages are missing raises ImportError, naming them.
    """
    binding = None if options.neutral else binding_for(options.target)
    if binding is not None:
        binding.require()
    return binding


def add_pass(
    pm: passmanager.PassManager,
    options: PassOptions | None = None,
    *,
    on_report: Callable[[RewriteReport], None] | None = None,
    binding: Binding | None = None,
    spliced: list | None = None,
    **keywords,
) -> None:
    """Append the pass to `pm`; `on_report` receives each run's report.

    `options` (a `PassOptions`), or its fields as keywords (options.py): `target` is
    "neutral" (the platform-neutral calls of docs/contract.md; None too) or a
    platform with a binding (`targets()`: "cpu", "neuron", ...), whose
    binding is spliced in; `mesh` (a `jax.sharding.Mesh` of the program's
    devices) asks for the binding's partitionable version, for programs
    compiled for several devices; `filename` names the input in locations;
    the settings (`strategy`: "auto", the platform's choice, recompute for
    neutral output; "recompute" or "indices", see rewriting/strategy.py; and
    the gpu binding's `gpu_kernels`, `gpu_interpret`). A binding whose
    packages are missing raises ImportError here, naming them.
    `binding`: the target's binding when the caller has resolved it already
    (`resolve_binding`). `spliced`: a list that receives each binding lowering
    spliced in; holding it keeps their `custom_partitioning` callbacks alive
    (JAX holds them weakly) until XLA has partitioned the module (the compile
    hook does). Bad arguments: TypeError or ValueError, naming them.
    """
    if not isinstance(pm, passmanager.PassManager):
        raise TypeError(f"pm must be a jaxlib.mlir.passmanager.PassManager, got {pm!r:.60} ({type(pm).__name__})")
    if on_report is not None and not callable(on_report):
        raise TypeError(f"on_report must be a callable taking a RewriteReport, or None, got {on_report!r:.60}")
    options = pass_options(options, **keywords)
    if binding is None:
        binding = resolve_binding(options)
    pm.add(
        _run_callable(on_report, options, binding, spliced),
        name=PASS_NAME,
        argument=PASS_ARGUMENT,
        description=PASS_DESCRIPTION,
    )


def rewrite(
    module: ir.Module, options: PassOptions | None = None, *, binding: Binding | None = None,
    spliced: list | None = None, **keywords
) -> RewriteReport:
    """Rewrite every max-pool gradient in `module` in place; the module is verified after.

    `module`: a `jaxlib.mlir.ir.Module` (or its `builtin.module` operation).
    `options`, or its fields as keywords (`target=`, `strategy=`, ...): see
    `add_pass`, and `binding`, `spliced`. A wrong type is a
    TypeError, an unknown target or strategy a ValueError naming the accepted ones.
    """
    operation = _module_operation(module)
    options = pass_options(options, **keywords)
    total = RewriteReport()
    with operation.context:
        pm = passmanager.PassManager("builtin.module")
        add_pass(pm, options, on_report=total.merge, binding=binding, spliced=spliced)
        pm.run(operation)  # runs `_run_callable`'s `run` on the module
    return total


def rewrite_text(text: str, options: PassOptions | None = None, **keywords) -> tuple[str, RewriteReport]:
    """Parse `text` (a str), rewrite it, and return (printed module, report); options as in `rewrite`.

    With `filename=`, the text is parsed under that name: its locations and
    a parse error (`ir.MLIRError`, or `safe_parse.InputLimitError`) name it.
    """
    if not isinstance(text, str):
        hint = "; decode it first (text.decode())" if isinstance(text, (bytes, bytearray)) else ""
        raise TypeError(f"text must be a str of textual MLIR, got {text!r:.60} ({type(text).__name__}){hint}")
    options = pass_options(options, **keywords)
    with make_context():
        from pool3d_pass.safe_parse import parse_module  # input limits; parses on a large stack

        module = parse_module(text, source_name=options.filename)
        report = rewrite(module, options)
        return str(module.operation), report
