"""JAX integration: pool3d_pass.jit, enable()/disable()/enabled(), and the compile hook.

What "rewritten" means in compiled HLO: XLA on CPU expands select_and_scatter
into reduce-window + `scatter` before codegen, so a compiled max-pool gradient
that was NOT rewritten shows a `scatter(` (or `select-and-scatter(`); one that
was shows the custom-call target and neither.
"""

from __future__ import annotations

import inspect
import logging
import os
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import pool3d_pass
from oracles.compiled_hlo import POOL_GRADIENT_OP as SCATTER
from pool3d_pass.contract import TARGETS
from pool3d_pass.integration import compile_hook, module_rewrite, routing
from pool3d_pass.rewriting.strategy import preferred_strategy

TARGET = "pool3d.max_pooling_3d_backward"


pytestmark = pytest.mark.usefixtures("cpu_kernels", "switch_off")


def max_pool(x, k=3, s=2, padding="SAME"):
    """NCDHW 3-D max pooling, as jax/flax write it."""
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, k, k, k), (1, 1, s, s, s), padding)


def pool_loss(x):
    return (max_pool(x) ** 2).sum()


def make_grad():
    """A fresh function object each time, so JAX's caches start empty for it."""
    return jax.grad(lambda x: (max_pool(x) ** 2).sum())


def rand(shape=(2, 3, 5, 6, 7), seed=0):
    # numpy, not jax.random: its compile costs seconds after every jax.clear_caches().
    return jnp.asarray(np.random.default_rng(seed).standard_normal(shape, np.float32))


def is_rewritten(compiled_text: str) -> bool:
    """A pool3d gradient call (any strategy's) is in the program and no scatter is left."""
    gradient_targets = [TARGETS[call] for call in ("backward", "backward_from_indices", "backward_from_input")]
    return any(f'custom_call_target="{t}"' in compiled_text for t in gradient_targets) and not SCATTER.search(compiled_text)


def is_plain(compiled_text: str) -> bool:
    return TARGET not in compiled_text and bool(SCATTER.search(compiled_text))


# --- the JAX internals the hook relies on ----------------------------------------------


def test_jax_internals_are_where_the_hook_expects_them():
    """Fails with the list of moved internals; see docs/jax_integration.md to re-port."""
    compile_hook.check_jax_internals()  # raises JaxInternalsChanged naming what moved
    from jax._src import compiler
    from jax._src.interpreters import pxla

    # pxla must look the function up on the module at call time, or patching it does nothing.
    source = inspect.getsource(pxla)
    assert "compiler.compile_or_get_cached(" in source, (
        "jax._src.interpreters.pxla no longer calls compiler.compile_or_get_cached(...) "
        "through the module attribute; the pool3d_pass hook would never run")
    assert pxla.compiler is compiler
    compile_hook.install()
    assert compile_hook.installed()
    assert getattr(compiler.compile_or_get_cached, compile_hook.HOOK_MARKER)


def test_internals_check_names_what_moved(monkeypatch):
    from jax._src import compiler

    def moved(client, module, devices, options, callbacks, executable_devices, pgle=None):
        pass

    monkeypatch.setattr(compiler, "compile_or_get_cached", moved)
    with pytest.raises(compile_hook.JaxInternalsChanged, match="compile_or_get_cached parameters"):
        compile_hook.check_jax_internals()


# --- pool3d_pass.jit -------------------------------------------------------------------


def test_jit_rewrites_max_pool_gradient_and_matches_jax_jit():
    grad = make_grad()
    x = rand()
    expected = jax.jit(grad)(x)
    got = pool3d_pass.jit(grad)(x)
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)
    assert is_rewritten(pool3d_pass.jit(grad).lower(x).compile().as_text())
    assert is_plain(jax.jit(grad).lower(x).compile().as_text())


def test_jit_trace_lower_compile():
    grad = make_grad()
    x = rand()
    compiled = pool3d_pass.jit(grad).trace(x).lower().compile()
    assert is_rewritten(compiled.as_text())
    np.testing.assert_allclose(compiled(x), jax.jit(grad)(x), rtol=1e-6, atol=1e-6)


def test_jit_static_and_pytree_args():
    def loss(params, batch, k, *, scale):
        y = max_pool(params["w"] * batch[0] + batch[1], k=k)
        return scale * (y**2).sum()

    grad = jax.grad(loss)
    params = {"w": rand(seed=1)}
    batch = (rand(seed=2), rand(seed=3))
    plain = jax.jit(grad, static_argnums=2, static_argnames="scale")
    ours = pool3d_pass.jit(grad, static_argnums=2, static_argnames="scale")
    for k in (2, 3):
        got = ours(params, batch, k, scale=0.5)
        expected = plain(params, batch, k, scale=0.5)
        assert jax.tree.structure(got) == jax.tree.structure(params)
        np.testing.assert_allclose(got["w"], expected["w"], rtol=1e-5, atol=1e-5)
    text = ours.lower(params, batch, 2, scale=0.5).compile().as_text()
    assert is_rewritten(text)


def test_jit_donation():
    grad = make_grad()
    x = rand()
    expected = jax.jit(grad)(x)
    donated = x + 0.0
    got = pool3d_pass.jit(grad, donate_argnums=0)(donated)
    assert donated.is_deleted()
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


def test_jit_as_decorator_with_options():
    @pool3d_pass.jit(static_argnames="k")
    def grad(x, k):
        return jax.grad(lambda x: (max_pool(x, k=k) ** 2).sum())(x)

    x = rand()
    assert is_rewritten(grad.lower(x, k=2).compile().as_text())
    expected = jax.jit(jax.grad(lambda x: (max_pool(x, k=2) ** 2).sum()))(x)
    np.testing.assert_allclose(grad(x, k=2), expected, rtol=1e-6, atol=1e-6)


def test_function_without_pooling_compiles_to_identical_text():
    def f(x, y):
        return jnp.tanh(x) @ y + 1.0

    x = jnp.ones((8, 8))
    # One call site for both, so the recorded source locations agree.
    plain, ours = [jit(f).lower(x, x).compile().as_text() for jit in (jax.jit, pool3d_pass.jit)]
    assert plain == ours


def test_module_without_select_and_scatter_is_handed_on_uncopied(monkeypatch):
    def no_copy(module):
        raise AssertionError("copied a module that has no select_and_scatter")

    monkeypatch.setattr(module_rewrite, "copy_module", no_copy)
    module = jax.jit(lambda x: jnp.sin(x) * 2).lower(jnp.ones(3)).compiler_ir("stablehlo")
    assert module_rewrite.rewrite_for_platform(module, "cpu") is module


def test_plain_jit_of_the_same_function_is_never_rewritten():
    """The pitfall: JAX caches the lowered module object; the pass must work on a copy."""
    grad = make_grad()
    x = rand()
    module_before = jax.jit(grad).lower(x).compiler_ir("stablehlo")
    text_before = str(module_before)
    assert is_plain(jax.jit(grad).lower(x).compile().as_text())

    assert is_rewritten(pool3d_pass.jit(grad).lower(x).compile().as_text())
    pool3d_pass.jit(grad)(x)

    lowered_after = jax.jit(grad).lower(x)
    assert str(lowered_after.compiler_ir("stablehlo")) == text_before
    assert "select_and_scatter" in str(module_before)
    assert is_plain(lowered_after.compile().as_text())
    # ...and the other way round: a plain executable compiled first is not reused.
    plain_first = make_grad()
    jax.jit(plain_first)(x)
    assert is_rewritten(pool3d_pass.jit(plain_first).lower(x).compile().as_text())


# --- enable() / disable() / enabled() --------------------------------------------------


def test_enable_disable_route_plain_jax_jit():
    grad = make_grad()
    x = rand()
    jitted = jax.jit(grad)
    expected = jitted(x)
    assert is_plain(jitted.lower(x).compile().as_text())

    pool3d_pass.enable()
    assert jitted._cache_size() == 0, "enable() must drop executables compiled before"
    assert is_rewritten(jitted.lower(x).compile().as_text())
    np.testing.assert_allclose(jitted(x), expected, rtol=1e-6, atol=1e-6)

    pool3d_pass.disable()
    assert jitted._cache_size() == 0, "disable() must drop rewritten executables"
    assert is_plain(jitted.lower(x).compile().as_text())
    np.testing.assert_allclose(jitted(x), expected, rtol=1e-6, atol=1e-6)


def test_enabled_context_restores_previous_state():
    grad = make_grad()
    x = rand()
    with pool3d_pass.enabled():
        assert routing.is_enabled()
        assert is_rewritten(jax.jit(grad).lower(x).compile().as_text())
        with pool3d_pass.enabled():
            pass
        assert routing.is_enabled(), "a nested enabled() must not switch off the outer one"
    assert not routing.is_enabled()
    assert is_plain(jax.jit(grad).lower(x).compile().as_text())


def test_enabled_rewrites_eager_gradients_and_logs_them_at_debug(caplog):
    x = rand()
    expected = jax.jit(make_grad())(x)
    with caplog.at_level(logging.DEBUG, logger="pool3d_pass"), pool3d_pass.enabled():
        got = make_grad()(x)  # op by op: the forward pool and select_and_scatter_add are compiled on their own
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)
    (done,) = [r for r in caplog.records if "1 select_and_scatter found, 1 rewritten, 0 missed" in r.getMessage()]
    assert done.getMessage().startswith("jit_select_and_scatter_add (cpu)")
    # a line per eagerly run pool (Flax's init runs every pool so) would drown the program's own lines
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]


# --- strategy (pool3d_pass.jit(..., strategy=), enable(strategy=)) ----------------------


def kernel_targets(text: str) -> list[str]:
    """The pool3d calls in compiled HLO (custom_call_target="...") or StableHLO (@...) text."""
    return sorted(re.findall(r'(?:custom_call_target="|stablehlo\.custom_call @)(pool3d\.[a-z0-9_]+)', text))


def rewritten_by_the_pass(fun, x, strategy: str) -> list[str]:
    """The calls `pool3d_pass.rewrite(..., strategy=)` itself puts into the same program."""
    module = module_rewrite.copy_module(jax.jit(fun).lower(x).compiler_ir("stablehlo"))
    pool3d_pass.rewrite(module, target="cpu", strategy=strategy)
    return kernel_targets(str(module))


def resolved(strategy: str) -> str:
    from pool3d_pass.bindings.registry import binding_for

    return preferred_strategy(binding_for("cpu")) if strategy == "auto" else strategy


@pytest.mark.parametrize("strategy", ["auto", "recompute", "indices"])
def test_jit_strategy_reaches_the_pass(caplog, strategy):
    grad, x = make_grad(), rand()
    with caplog.at_level(logging.INFO, logger="pool3d_pass"):
        compiled = pool3d_pass.jit(grad, strategy=strategy).lower(x).compile()
    assert kernel_targets(compiled.as_text()) == rewritten_by_the_pass(grad, x, strategy)
    assert any(f"{resolved(strategy)} strategy" in r.getMessage() for r in caplog.records)
    np.testing.assert_allclose(compiled(x), jax.jit(grad)(x), rtol=1e-6, atol=1e-6)


def test_recompute_strategy_gives_the_backward_call_only():
    for compiled_text in (
        pool3d_pass.jit(make_grad(), strategy="recompute").lower(rand()).compile().as_text(),
        pool3d_pass.jit(strategy="recompute")(make_grad()).trace(rand()).lower().compile().as_text(),
    ):
        assert kernel_targets(compiled_text) == [TARGET]


def test_enable_strategy_routes_plain_jax_jit_and_is_restored(caplog):
    grad, x = make_grad(), rand()
    jitted = jax.jit(grad)
    with caplog.at_level(logging.INFO, logger="pool3d_pass"), pool3d_pass.enabled(strategy="recompute"):
        assert routing.global_strategy() == "recompute"
        assert kernel_targets(jitted.lower(x).compile().as_text()) == [TARGET]
        jitted(x)
        with pool3d_pass.enabled(strategy="indices"):
            assert jitted._cache_size() == 0, "a new strategy must drop executables compiled under the old one"
            assert kernel_targets(jitted.lower(x).compile().as_text()) == rewritten_by_the_pass(grad, x, "indices")
        assert routing.global_strategy() == "recompute"
    assert any("recompute strategy" in r.getMessage() for r in caplog.records)
    assert not routing.is_enabled() and routing.global_strategy() == "auto"


def test_unknown_strategy_is_refused_up_front():
    with pytest.raises(ValueError, match="unknown strategy 'fastest'"):
        pool3d_pass.jit(make_grad(), strategy="fastest")
    with pytest.raises(ValueError, match="unknown strategy 'fastest'"):
        pool3d_pass.enable(strategy="fastest")
    assert not routing.is_enabled()


# --- logging and failure handling ------------------------------------------------------


def test_info_log_says_what_was_rewritten(caplog):
    with caplog.at_level(logging.INFO, logger="pool3d_pass"):
        pool3d_pass.jit(make_grad()).lower(rand()).compile()
    messages = [r.getMessage() for r in caplog.records if r.name == "pool3d_pass"]
    (line,) = [m for m in messages if "(cpu): 1 select_and_scatter found, 1 rewritten, 0 missed" in m]
    # the strategy used says what it did; no recompute counts beside it (the demo read "reused 0, inserted 0")
    assert line.endswith("(indices strategy: 1 forward max-pool(s) replaced, 1 gradient(s) from indices, "
                         "0 from the input)"), line


def test_info_log_lists_misses_with_reasons(caplog):
    def min_pool_grad(x):
        pool = lambda x: lax.reduce_window(x, jnp.inf, lax.min, (1, 1, 2, 2, 2), (1, 1, 2, 2, 2), "VALID")
        return jax.grad(lambda x: jnp.sum(pool(x) ** 2))(x)

    x = rand()
    with caplog.at_level(logging.INFO, logger="pool3d_pass"):
        text = pool3d_pass.jit(min_pool_grad).lower(x).compile().as_text()
    messages = [r.getMessage() for r in caplog.records if r.name == "pool3d_pass"]
    assert any("1 select_and_scatter found, 0 rewritten, 1 missed" in m for m in messages), messages
    # a miss that is no speed rule's choice: one WARNING (seen with Python's default logging), where and why
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "did not rewrite 1 of 1 max-pool gradient(s)" in warning
    assert re.search(r"not rewritten at .*test_integration.py:\d+:\d+: select is compare LE \(min pooling\)", warning)
    assert is_plain(text)  # nothing rewritten: the original module was compiled


def test_jit_keeps_the_report_of_its_last_compile():
    def min_pool_grad(x):
        pool = lambda x: lax.reduce_window(x, jnp.inf, lax.min, (1, 1, 2, 2, 2), (1, 1, 2, 2, 2), "VALID")
        return jax.grad(lambda x: jnp.sum(pool(x) ** 2))(x)

    rewritten, missed = pool3d_pass.jit(make_grad()), pool3d_pass.jit(min_pool_grad)
    assert rewritten.last_report is None  # nothing compiled yet
    x = rand()
    rewritten(x)
    report = rewritten.last_report
    assert (report.candidates, report.rewritten, report.gradients_missed) == (1, 1, 0)
    assert re.search(r"test_integration.py:\d+:\d+: remark: max-pool gradient rewritten: NCDHW", str(report))
    rewritten(x)  # the compiled program again: no compile, the report stays
    assert rewritten.last_report is report
    rewritten.lower(rand((1, 3, 4, 4, 4))).compile()  # another compile, through .lower(): a new report
    assert rewritten.last_report is not report and rewritten.last_report.rewritten == 1
    missed.trace(x).lower().compile()
    report = missed.last_report
    assert (report.candidates, report.rewritten, report.gradients_missed) == (1, 0, 1)
    (line,) = [line for line in str(report).splitlines() if "not rewritten" in line]
    assert re.search(r"test_integration.py:\d+:\d+: remark: max-pool gradient not rewritten: select is compare LE",
                     line), line
    assert rewritten.last_report.rewritten == 1  # each object its own


@pytest.mark.gpu  # the gpu binding's speed rule, on a host where its kernels were never measured
def test_a_speed_rules_miss_is_a_remark_and_any_other_miss_one_warning(caplog):
    module = jax.jit(make_grad()).lower(rand()).compiler_ir("stablehlo")
    report = pool3d_pass.rewrite(module, target="gpu")  # strategy auto: left to XLA:GPU by its speed rule
    assert report.gradients_missed == 1 and all(miss.speed_rule for miss in report.missed), report.missed
    report.candidates += 1
    report.add(pool3d_pass.Miss("model.py:7:3", "element type f64 is not one of f32, bf16, f16"))
    with caplog.at_level(logging.INFO, logger="pool3d_pass"):
        module_rewrite.log_report("jit_step", "cuda", report)
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
        "jit_step (cuda): pool3d_pass did not rewrite 1 of 2 max-pool gradient(s); XLA's select_and_scatter runs "
        "them:\n  max-pool gradient not rewritten at model.py:7:3: element type f64 is not one of f32, bf16, f16"]
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert any("max-pool gradient not rewritten at" in m and report.missed[0].reason in m for m in infos), infos


def test_failed_rewrite_compiles_the_original_and_says_how_to_reproduce(caplog, monkeypatch):
    def broken(module, *options, **keywords):
        raise RuntimeError("boom")

    monkeypatch.setattr(module_rewrite, "rewrite", broken)  # the pass, as the hook calls it
    grad = make_grad()
    x = rand()
    with caplog.at_level(logging.INFO, logger="pool3d_pass"):
        got = pool3d_pass.jit(grad)(x)
    np.testing.assert_allclose(got, jax.jit(grad)(x), rtol=1e-6, atol=1e-6)
    warning = next(r for r in caplog.records if r.levelno == logging.WARNING)
    assert "pool3d_pass.rewrite failed" in warning.getMessage()
    command = re.search(r"Reproduce with: (pool3d-opt .*\.mlir)", warning.getMessage()).group(1)
    assert "--target=cpu" in command and "--strategy=auto" in command
    saved = command.split()[-1]
    with open(saved) as file:
        assert "select_and_scatter" in file.read()
    os.remove(saved)


def test_other_platforms_are_left_untouched_and_logged(caplog):
    module = jax.jit(make_grad()).lower(rand()).compiler_ir("stablehlo")
    with caplog.at_level(logging.INFO, logger="pool3d_pass"):
        assert module_rewrite.rewrite_for_platform(module, "cuda") is module
    assert any("no pool3d binding for platform 'cuda'" in r.getMessage() for r in caplog.records)


def test_jit_on_a_method():
    class Model:
        scale = 2.0

        @pool3d_pass.jit(static_argnums=0)  # as with jax.jit, `self` must be static or a pytree
        def grad(self, x):
            return jax.grad(lambda x: self.scale * (max_pool(x) ** 2).sum())(x)

    x = rand()
    np.testing.assert_allclose(Model().grad(x), 2.0 * jax.jit(make_grad())(x), rtol=1e-6, atol=1e-6)
