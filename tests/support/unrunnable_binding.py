"""A binding whose every call lowers fine but names an FFI target no one registered.

XLA refuses such a module at compile time ("No FFI handler registered"): a
real compile failure after a successful rewrite, for test_compile_fallback.py.
"""

from __future__ import annotations

import jax

from pool3d_pass.bindings.reference import calls as reference

UNREGISTERED_TARGET = "pool3d_test.no_such_handler"


def _unrunnable(reference_function):
    def call(*operands, **attributes):
        results = jax.eval_shape(lambda *xs: reference_function(*xs, **attributes), *operands)
        flat = jax.tree.leaves(results)
        out = jax.ffi.ffi_call(UNREGISTERED_TARGET, flat if len(flat) > 1 else flat[0])(*operands)
        return tuple(out) if len(flat) > 1 else out

    return call


FUNCTIONS = {call: _unrunnable(function) for call, function in reference.FUNCTIONS.items()}


def functions():
    """The binding's loader (`bindings.base.Functions`)."""
    return FUNCTIONS
