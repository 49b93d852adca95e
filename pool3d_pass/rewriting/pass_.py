"""The pool3d MLIR pass and its public API: `add_pass`, `rewrite`, `rewrite_text`.

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

from pool3d_pass import environment
from pool3d_pass.bindings.registry import Binding, binding_for
from pool3d_pass.ir_context import make_context
from pool3d_pass.matching import ir_utils as u
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


def _run_callable(on_report: Callable[[RewriteReport], None] | None, options: PassOptions, binding: Binding | None):
    def run(op: ir.Operation, pass_) -> None:
        state = PassRun(options, binding)
        try:
            with u.attribute_values_cached(), environment.applying(options):
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
    **keywords,
) -> None:
    """Append the pass to `pm`; `on_report` receives each run's report.

    `options` (a `PassOptions`), or its fields as keywords: `target` is
    "neutral" (the platform-neutral calls of docs/contract.md) or a platform
    with a binding ("cpu", "neuron", ...), whose binding is spliced in; `mesh`
    (a `jax.sharding.Mesh` of the program's devices) asks for the binding's
    partitionable version, for programs compiled for several devices;
    `strategy` is "auto" (the platform's choice; recompute for neutral
    output), "recompute" or "indices" (see rewriting/strategy.py); `filename`
    names the input in locations. A binding whose packages are missing raises
    ImportError here, naming them. `binding`: the target's binding when the
    caller has resolved it already (`resolve_binding`).
    """
    options = pass_options(options, **keywords)
    if binding is None:
        binding = resolve_binding(options)
    pm.add(
        _run_callable(on_report, options, binding),
        name=PASS_NAME,
        argument=PASS_ARGUMENT,
        description=PASS_DESCRIPTION,
    )


def rewrite(
    module: ir.Module, options: PassOptions | None = None, *, binding: Binding | None = None, **keywords
) -> RewriteReport:
    """Rewrite every max-pool gradient in `module` in place; the module is verified after.

    `options`, or its fields as keywords (`target=`, `strategy=`, `mesh=`,
    `filename=`): see `add_pass`.
    """
    options = pass_options(options, **keywords)
    total = RewriteReport()
    with module.context:
        pm = passmanager.PassManager("builtin.module")
        add_pass(pm, options, on_report=total.merge, binding=binding)
        pm.run(module.operation)
    return total


def rewrite_text(text: str, options: PassOptions | None = None, **keywords) -> tuple[str, RewriteReport]:
    """Parse `text`, rewrite it, and return (printed module, report); options as in `rewrite`."""
    options = pass_options(options, **keywords)
    with make_context():
        from pool3d_pass.safe_parse import parse_module  # input limits; parses on a large stack

        module = parse_module(text)
        report = rewrite(module, options)
        return str(module), report
