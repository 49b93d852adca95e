"""Splice a binding in place of a neutral call: lower it with JAX, move its ops in.

The binding's function for the call (`Binding.function`, the pass run's
settings bound) is lowered by `jax.jit(...).trace(...).lower(
lowering_platforms=(platform,))` for the call's exact shapes, dtypes and
attributes (cached: a model with a hundred identical pools lowers once) and
parsed into the target module's context. Its `main` ops are moved in front of
the call with the function's arguments replaced by the call's operands; the
private functions it calls (JAX outlines e.g. `jnp.where`) move into the
target module under fresh names. The lowered signature is checked against the
call's operand and result types first, so a refused splice moves nothing.
(The upstream `inline` pass would be simpler,
but jaxlib's context lacks the func dialect's inliner extension.)

A lowering is cached per (binding, call, operand shapes and types,
attributes, mesh, settings): the settings change what the binding lowers
to (the gpu binding's kernels and interpret mode), so they are part of the
key. What is cached per lowering is its text, and for a partitionable lowering the
`custom_partitioning` callbacks its calls name (`partition_keys.py`: re-keyed
so the program's persistent-cache key is the same in every process). The
cache is bounded (`CACHE_SIZE` lowerings) and cleared by `jax.clear_caches()`
and `pool3d_pass.clear_caches()` (`caches.py`). A compile keeps the callbacks of the
lowerings it spliced alive until XLA has partitioned it: `splice_call` appends
each lowering to the caller's `spliced` list, which the compile hook holds.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import warnings
from collections.abc import Iterator
from dataclasses import dataclass

from jaxlib.mlir import ir

from pool3d_pass import caches
from pool3d_pass.bindings.registry import Binding
from pool3d_pass.contract import CALLS
from pool3d_pass.options import BindingSettings
from pool3d_pass.splicing import partition_keys

logger = logging.getLogger("pool3d_pass")
_NUMPY_DTYPES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16", "i16": "int16"}


class BindingLoweringError(RuntimeError):
    """The binding could not be lowered for this call; the message says why."""


CACHE_SIZE = 256  # lowerings: distinct (call, shapes, attributes, mesh); a few KB of text each


@dataclass(frozen=True)
class LoweredBinding:
    text: str  # the lowered module
    callbacks: tuple  # custom_partitioning callback objects its calls name (weakly held by JAX)


@caches.bounded(CACHE_SIZE)
def _lowered(binding: Binding, call: str, operand_specs: tuple, attributes: tuple, mesh,
             settings: BindingSettings) -> LoweredBinding:
    import jax
    import jax.numpy as jnp

    caches.register_with_jax()
    function = binding.function(call, partitioned=mesh is not None, settings=settings)
    function = functools.partial(function, **dict(attributes))
    avals = [jax.ShapeDtypeStruct(shape, jnp.dtype(_NUMPY_DTYPES[dtype])) for shape, dtype in operand_specs]
    jit_options = {}
    if mesh is not None:
        # Lowered for the program's devices, so custom_partitioning emits its
        # partitionable call instead of inlining the single-device function.
        replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
        jit_options = {"in_shardings": replicated, "out_shardings": replicated}
    try:
        with _jax_deprecations_logged_once():
            lowered = jax.jit(function, **jit_options).trace(*avals).lower(
                lowering_platforms=(binding.lowering_platform,)
            )
    except ImportError:
        raise
    except Exception as error:  # JAX's errors are many; the pass reports one line
        raise BindingLoweringError(f"{binding.platform} binding failed to lower {call}: {error}") from error
    text = lowered.as_text()
    if mesh is None:
        return LoweredBinding(text, ())
    identity = (binding.platform, call, operand_specs, attributes, partition_keys.mesh_identity(mesh))
    text, callbacks = partition_keys.rekey(text, identity)
    return LoweredBinding(text, callbacks)


_logged_deprecations: set[str] = set()
_warnings_lock = threading.Lock()


@contextlib.contextmanager
def _jax_deprecations_logged_once() -> Iterator[None]:
    """JAX's DeprecationWarnings raised while lowering a binding are logged once per process at INFO.

    They concern the binding's code, not the user's (since JAX 0.11 every
    lowering of a Pallas Triton kernel warns that the backend is deprecated),
    so the user gets one INFO line on the "pool3d_pass" logger naming the JAX
    version, not a warning per compile. Any other warning is re-issued as it
    came. `catch_warnings` swaps process-wide state: one lowering at a time.
    """
    import jax

    with _warnings_lock, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for w in caught:
        message = str(w.message)
        if issubclass(w.category, DeprecationWarning) and (w.filename or "").replace("\\", "/").find("/jax/") >= 0:
            if message not in _logged_deprecations:
                _logged_deprecations.add(message)
                logger.info("JAX %s, lowering a pool3d binding: %s", jax.__version__, message)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def _spec(value: ir.Value) -> tuple:
    tensor = ir.RankedTensorType(value.type)
    return tuple(tensor.shape), str(tensor.element_type)


def _enclosing_module(block: ir.Block) -> ir.Operation:
    op = block.owner.operation
    while op.name != "builtin.module":
        op = op.parent
    return op


def _fresh_symbol(table: ir.SymbolTable, base: str, taken=()) -> str:
    name, suffix = f"{base}_pool3d", 0
    while name in table or name in taken:
        suffix += 1
        name = f"{base}_pool3d{suffix}"
    return name


def _move_private_functions(source: ir.Module, main: ir.OpView, target_module: ir.Operation) -> None:
    target_body = ir.InsertionPoint(target_module.regions[0].blocks[0])
    target_table = ir.SymbolTable(target_module)
    functions = [
        op for op in source.body.operations
        # not main, nor e.g. the sdy.mesh of a partitioned lowering: the call does not use it
        if op.operation != main.operation and op.operation.name == "func.func"
    ]
    # Rename them all before moving any: a private function may call another
    # (Pallas interpret mode's loop bodies do), and renaming reaches only the
    # uses still inside `source`.
    taken: set[str] = set()
    for op in functions:
        old_name = ir.SymbolTable.get_symbol_name(op).value
        new_name = _fresh_symbol(target_table, old_name, taken)
        taken.add(new_name)
        ir.SymbolTable.replace_all_symbol_uses(old_name, new_name, source.operation)
        ir.SymbolTable.set_symbol_name(op, new_name)
    for op in functions:
        target_body.insert(op.detach_from_parent())


def _main_function(module: ir.Module) -> ir.OpView:
    for op in module.body.operations:
        if op.operation.name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value == "main":
            return op
    raise BindingLoweringError("lowered binding has no main function")


def splice_call(
    binding: Binding,
    call: str,
    operands,
    result_types,
    *,
    kernel_size,
    stride,
    padding,
    data_format: str,
    output_format: str | None = None,
    mesh=None,
    settings: BindingSettings,
    spliced: list | None = None,
) -> list[ir.Value]:
    """Emit `binding`'s function for `call` on these operands at the current insertion point.

    Same signature and results as `contract.custom_call.build_call`. With a
    `jax.sharding.Mesh` of the program's devices, the binding's partitionable
    version is lowered for that mesh. `settings`: the pass run's, handed to
    the binding (`Binding.function`). `spliced`: where given, the lowering is
    appended to it (its callbacks live while the list does).
    """
    attributes = (
        ("kernel_size", tuple(kernel_size)),
        ("stride", tuple(stride)),
        ("padding", tuple(padding)),
        ("data_format", data_format),
        ("output_format", output_format or data_format),
    )
    if CALLS[call].takes_input_shape:  # no operand has the forward input's shape: the result has
        attributes += (("input_shape", tuple(ir.RankedTensorType(result_types[0]).shape)),)
    lowered = _lowered(binding, call, tuple(_spec(v) for v in operands), attributes, mesh, settings)
    if spliced is not None:
        spliced.append(lowered)

    source = ir.Module.parse(lowered.text)
    main = _main_function(source)
    body = main.regions[0].blocks[0]
    *ops, terminator = list(body.operations)
    # Checked before anything moves: a refused splice leaves the caller's module as it was.
    _check_signature(f"{binding.platform} binding of {call}", [a.type for a in body.arguments],
                     [v.type for v in operands], [r.type for r in terminator.operands], list(result_types))
    insertion_point = ir.InsertionPoint.current
    _move_private_functions(source, main, _enclosing_module(insertion_point.block))
    for argument, operand in zip(body.arguments, operands, strict=True):
        argument.replace_all_uses_with(operand)
    for op in ops:
        insertion_point.insert(op.detach_from_parent())
    return list(terminator.operands)


def _check_signature(what: str, arguments: list, operands: list, results: list, expected: list) -> None:
    """Raise BindingLoweringError where the lowered function does not take the call's operand types or
    return its result types."""
    if arguments != operands:
        raise BindingLoweringError(f"{what} takes {[str(t) for t in arguments]}, "
                                   f"the call's operands are {[str(t) for t in operands]}")
    if results != expected:
        raise BindingLoweringError(f"{what} returned {[str(t) for t in results]}, "
                                   f"expected {[str(t) for t in expected]}")
