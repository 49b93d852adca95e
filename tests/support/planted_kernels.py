"""Planted kernels for strategy auto's calibration tests: the CPU kernels made wrong, slow, or fatal, by window.

`binding(...)` is the CPU binding with these functions in place of its own
(registered under "cpu" by a test), so the calibration child (which imports
their loader, `functions`, by its name, as it does a real binding's) runs
them. What a call does depends on its window, a static value at trace
time, so one program (one child) holds several behaviours:

| kernel_size | behaviour |
| --- | --- |
| (3, 3, 3) | WRONG: every gradient call returns twice the CPU kernels' gradient |
| (2, 2, 2) | SLOW: the CPU kernels' result after a loop of `SLOW_REPEATS` dependent calls |
| (1, 2, 2) | ABORT: the process aborts (SIGABRT) when the call runs |
| (2, 1, 2) | SEGFAULT: the process reads address 0 (SIGSEGV) when the call runs |
| (2, 2, 1) | HANG: the call sleeps for an hour |
| any other | the CPU kernels |

`PLANTED_SLOW=0` in the environment makes the SLOW window the plain CPU
kernels again (a process that should time the real ones).
"""

from __future__ import annotations

import ctypes
import dataclasses
import os
import time

from pool3d_pass.bindings import cpu
from pool3d_pass.bindings.base import NO_FUNCTIONS, Calibration, Functions, SpeedPrior
from pool3d_pass.bindings.registry import binding_for
from pool3d_pass.contract import CALLS

WRONG, SLOW, ABORT, SEGFAULT, HANG = (3, 3, 3), (2, 2, 2), (1, 2, 2), (2, 1, 2), (2, 2, 1)
SLOW_REPEATS = 40
GRADIENT_CALLS = ("backward", "backward_from_indices", "backward_from_input")


def _fatal(what: str):
    def run(x):
        if what == "abort":
            os.abort()
        if what == "segfault":
            ctypes.string_at(0)
        time.sleep(3600)
        return x

    return run


def _planted(call: str):
    real = cpu.FUNCTIONS[call]

    def function(*operands, **attributes):
        import jax
        import jax.numpy as jnp
        from jax import lax

        window = tuple(attributes["kernel_size"])
        result = real(*operands, **attributes)
        if window == WRONG and call in GRADIENT_CALLS:
            return result * 2
        if window in (ABORT, SEGFAULT, HANG):
            what = {ABORT: "abort", SEGFAULT: "segfault", HANG: "hang"}[window]
            first = jax.tree.leaves(result)[0]
            poisoned = jax.pure_callback(_fatal(what), jax.ShapeDtypeStruct(first.shape, first.dtype), first)
            return jax.tree.unflatten(jax.tree.structure(result), [poisoned, *jax.tree.leaves(result)[1:]])
        if window == SLOW and os.environ.get("PLANTED_SLOW", "1") != "0":
            x = operands[0]

            def step(_, carry):
                # x * (1 + 0), the 0 from the last result: XLA can neither hoist nor drop the call, and the
                # value keeps every bit (-0, NaN, inf) of x
                first = jax.tree.leaves(carry)[0].ravel()[0].astype(x.dtype)
                one = 1 + jnp.where(jnp.isfinite(first), first - first, 0)
                return real(x * one, *operands[1:], **attributes)

            return lax.fori_loop(0, SLOW_REPEATS, step, result)
        return result

    function.__name__ = f"max_pooling_3d_{call}"
    return function


FUNCTIONS = {call: _planted(call) for call in CALLS}


def functions():
    """The planted binding's loader (`Functions`): the child imports it by name."""
    return FUNCTIONS


def unsettled_prior(signature, input_shape, settings) -> SpeedPrior:
    """A prior that leaves every call to this machine's timing (the GPU's kind), favouring the kernels."""
    return SpeedPrior(True, "planted: the kernels, until this machine says otherwise", settled=False,
                      source="the planted prior")


def binding(*, verify_first: bool = True, prior=unsettled_prior):
    """The CPU binding with the planted functions; numerics before first use, timing under auto."""
    real = binding_for("cpu")
    return dataclasses.replace(real, functions=Functions(functions, CALLS), partitioned_functions=NO_FUNCTIONS,
                               calibration=Calibration(prior=prior, verify_first=verify_first))
