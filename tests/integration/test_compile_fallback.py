"""A rewrite never breaks a program: if XLA rejects the rewritten module, the original is compiled.

The "cpu" binding is replaced (for one test) by one whose calls name an FFI
target nobody registered (tests/support/unrunnable_binding.py): the pass rewrites the
program, XLA:CPU refuses to compile it, and the hook must compile the original
module instead, warn once with XLA's reason and the `pool3d-opt` command
reproducing the rewrite, and give jax.jit's results.
"""

from __future__ import annotations

import functools
import logging
import os
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import pool3d_pass
from pool3d_pass.bindings import registry
from pool3d_pass.contract import TARGETS

import unrunnable_binding


def max_pool(x):
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 2, 2, 2), (1, 1, 2, 2, 2), "VALID")


def train_like(x):  # forward and gradient: the indices strategy's two calls
    y, vjp = jax.vjp(max_pool, x)
    return y, vjp(jnp.ones_like(y))[0]


@pytest.fixture
def unrunnable_cpu_binding(monkeypatch):
    binding = registry.Binding("cpu", registry.Functions(unrunnable_binding.functions, TARGETS), "cpu",
                               registry.contract_preconditions)
    monkeypatch.setitem(registry._BINDINGS, "cpu", binding)
    jax.clear_caches()
    yield binding
    jax.clear_caches()


def _x():
    return jnp.asarray(np.random.default_rng(0).integers(-3, 4, (2, 3, 4, 4, 4)), jnp.float32)


def _fallback_warnings(caplog):
    return [r.getMessage() for r in caplog.records
            if r.name == "pool3d_pass" and r.levelno == logging.WARNING and "XLA failed" in r.getMessage()]


def _check_warning(message: str, strategy: str) -> None:
    assert "No FFI handler registered for " + unrunnable_binding.UNREGISTERED_TARGET in message, message
    command = re.search(r"Reproduce the rewrite with: (pool3d-opt (?:--\S+ )+(\S+\.mlir))", message)
    assert command is not None, message
    assert f"--target=cpu --strategy={strategy}" in command.group(1)
    with open(command.group(2)) as saved:
        assert "stablehlo.select_and_scatter" in saved.read()  # the module before the rewrite
    os.remove(command.group(2))


def test_the_binding_really_fails_to_compile(unrunnable_cpu_binding):
    call = functools.partial(unrunnable_binding.FUNCTIONS["backward_from_input"],
                             kernel_size=(2, 2, 2), stride=(2, 2, 2), padding=(0, 0, 0), data_format="NCDHW")
    with pytest.raises(Exception, match="No FFI handler registered"):
        jax.jit(call).lower(jnp.ones((1, 1, 2, 2, 2)), jnp.ones((1, 1, 4, 4, 4))).compile()


@pytest.mark.parametrize("strategy", ["auto", "recompute"])
def test_pool3d_jit_compiles_the_original_when_xla_rejects_the_rewrite(unrunnable_cpu_binding, caplog, strategy):
    x = _x()
    with caplog.at_level(logging.INFO, logger="pool3d_pass"):
        compiled = pool3d_pass.jit(train_like, strategy=strategy).lower(x).compile()
        got = compiled(x)
    messages = [r.getMessage() for r in caplog.records if r.name == "pool3d_pass"]
    assert any("1 select_and_scatter found, 1 rewritten, 0 missed" in m for m in messages), messages  # the rewrite itself succeeded
    warnings = _fallback_warnings(caplog)
    assert len(warnings) == 1, warnings
    _check_warning(warnings[0], strategy)
    text = compiled.as_text()
    assert "custom-call" not in text  # XLA's own pooling: the original module was compiled
    for a, b in zip(got, jax.jit(train_like)(x), strict=True):
        np.testing.assert_array_equal(a, b)


def test_enable_compiles_the_original_when_xla_rejects_the_rewrite(unrunnable_cpu_binding, caplog):
    x = _x()
    grad = jax.grad(lambda x: jnp.sum(max_pool(x) ** 2))
    expected = jax.jit(grad)(x)
    with caplog.at_level(logging.WARNING, logger="pool3d_pass"), pool3d_pass.enabled():
        got = jax.jit(grad)(x)
    warnings = _fallback_warnings(caplog)
    assert len(warnings) == 1, warnings
    _check_warning(warnings[0], "auto")
    np.testing.assert_array_equal(got, expected)
