"""enable() / disable() while another thread compiles (docs/jax_integration.md, "Threads").

The race of issue 11: a thread compiles a rewritten executable, `disable()`
runs (and clears JAX's caches) while that compile is in flight, and the
compile finishes and is cached by JAX after the clear. The switch is part of
JAX's cache keys (`routing.SWITCH_STATE`), so that executable is cached under
"rewrite on": a call made after `disable()` compiles the gradient again,
unrewritten, and one made after the next `enable()` rewrites again. Checked
for a `jax.jit` call and for eager dispatch (each primitive compiled and
cached on its own), one after the other in one process, as JAX's caches
carry state from one to the next (without the switch in the keys, the
second of them is handed a cached executable instead of compiling). The
in-flight compile is held at a known point by pausing the rewrite; the real
pass runs, only the timing is controlled."""

from __future__ import annotations

import functools
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import pool3d_pass
from pool3d_pass.integration import module_rewrite, routing

pytestmark = [pytest.mark.usefixtures("cpu_kernels", "switch_off"), pytest.mark.slow]


@pytest.fixture
def gradient_compiles(monkeypatch):
    """Call it after enable(): then a list with one entry per compile (by XLA, through the hook)
    of a module holding a max-pool gradient, True where the hook rewrote it.

    Wraps `jax._src.compiler.compile_or_get_cached` (the hook, as installed)
    to observe which modules reach the compiler; it changes nothing.
    """
    from jax._src import compiler

    def start():
        hooked = compiler.compile_or_get_cached
        seen = []

        @functools.wraps(hooked)  # keeps the hook's marker: install() sees it installed
        def observed(backend, computation, *args, **kwargs):
            if "stablehlo.select_and_scatter" in str(computation):
                seen.append(routing.options() is not None)
            return hooked(backend, computation, *args, **kwargs)

        monkeypatch.setattr(compiler, "compile_or_get_cached", observed)
        return seen

    return start


def pool_loss(x):
    pooled = lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 2, 2, 2), (1, 1, 2, 2, 2), "VALID")
    return (pooled**2).sum()


# A jax.jit call, and eager dispatch (each primitive compiled on its own and
# cached by JAX after its compile returns, so the in-flight executable lands
# in the cache after disable() cleared it).
CALLS = {
    "jit": lambda: jax.jit(jax.grad(pool_loss)),
    "eager": lambda: jax.grad(pool_loss),
}


@pytest.mark.parametrize("call", sorted(CALLS))
def test_executable_rewritten_before_disable_is_not_served_after_it(call, monkeypatch, gradient_compiles):
    x = jnp.asarray(np.random.default_rng(0).standard_normal((1, 2, 4, 4, 4), np.float32))
    function = CALLS[call]()
    expected = np.asarray(jax.jit(jax.grad(pool_loss))(x))

    rewritten = threading.Event()
    release = threading.Event()
    rewrites = []
    original = module_rewrite.rewrite_for_platform

    def held(module, *args, **kwargs):
        result = original(module, *args, **kwargs)
        # the compile that holds the max-pool gradient (eager dispatch compiles the
        # forward max pool on its own: rewritten too, into the forward-output call)
        if result is not module and module_rewrite.count_select_and_scatter(module):
            rewrites.append(True)
            rewritten.set()
            assert release.wait(30), "the test never released the compile"
        return result

    monkeypatch.setattr(module_rewrite, "rewrite_for_platform", held)
    pool3d_pass.enable()
    compiles = gradient_compiles()
    results = []
    worker = threading.Thread(target=lambda: results.append(np.asarray(function(x))))
    worker.start()
    try:
        assert rewritten.wait(30), "the compile never reached the pass"
        pool3d_pass.disable()  # clears JAX's caches while the rewritten compile is in flight
    finally:
        release.set()
        worker.join(120)
    assert rewrites == [True] and len(results) == 1
    np.testing.assert_allclose(results[0], expected, rtol=1e-6, atol=1e-6)

    # The in-flight call has now cached its rewritten executable. A call after
    # disable() must not get it: it compiles the gradient again, unrewritten.
    assert compiles == [True]
    after = np.asarray(function(x))
    assert compiles == [True, False], "served an executable rewritten before disable()"
    assert rewrites == [True]
    np.testing.assert_allclose(after, expected, rtol=1e-6, atol=1e-6)

    # Switched on again: that call compiles and rewrites again.
    pool3d_pass.enable()
    function(x)
    assert compiles == [True, False, True] and rewrites == [True, True]
