"""PassOptions: every entry point takes the same settings, checked in one place; the binding resolved once."""

from __future__ import annotations


import pytest
from jaxlib.mlir import passmanager

import pool3d_pass
from pool3d_pass.ir_context import make_context
from pool3d_pass.options import NEUTRAL, PassOptions

from corpus import EXAMPLE as EXAMPLE_FILE  # noqa: E402

EXAMPLE = EXAMPLE_FILE.read_text()
UNKNOWN = "unknown strategy 'fastest'; expected one of auto, recompute, indices"


def test_options_check_the_strategy_when_made():
    with pytest.raises(ValueError, match=UNKNOWN):
        PassOptions(strategy="fastest")
    options = PassOptions()
    assert (options.target, options.strategy, options.mesh, options.filename) == (NEUTRAL, "auto", None, None)
    assert options.neutral and not options.partitioned
    assert not PassOptions(target="cpu").neutral
    with pytest.raises(AttributeError):
        options.target = "cpu"  # frozen


def _add_pass(**keywords):
    with make_context():
        pool3d_pass.add_pass(passmanager.PassManager("builtin.module"), **keywords)


@pytest.mark.parametrize(
    "entry",
    [
        lambda: pool3d_pass.rewrite_text(EXAMPLE, strategy="fastest"),
        lambda: _add_pass(strategy="fastest"),
        lambda: pool3d_pass.jit(lambda x: x, strategy="fastest"),
        lambda: pool3d_pass.enable("fastest"),
    ],
    ids=["rewrite_text", "add_pass", "jit", "enable"],
)
def test_every_entry_point_refuses_an_unknown_strategy_alike(entry):
    from pool3d_pass.integration import routing

    with pytest.raises(ValueError, match=UNKNOWN):
        entry()
    assert not routing.is_enabled()


def test_the_options_object_and_the_keywords_are_one_thing():
    options = PassOptions(target="reference", strategy="indices", filename="example.mlir")
    by_object = pool3d_pass.rewrite_text(EXAMPLE, options)
    by_keywords = pool3d_pass.rewrite_text(EXAMPLE, target="reference", strategy="indices", filename="example.mlir")
    assert by_object[0] == by_keywords[0]
    assert str(by_object[1]) == str(by_keywords[1]) and by_object[1].remarks() == by_keywords[1].remarks()
    with pytest.raises(TypeError, match="not both"):
        pool3d_pass.rewrite_text(EXAMPLE, options, strategy="recompute")


def test_the_hook_resolves_the_binding_once(monkeypatch):
    import jax
    import jax.numpy as jnp

    from pool3d_pass.bindings import registry
    from pool3d_pass.integration import module_rewrite
    from pool3d_pass.rewriting import pass_

    def loss(x):
        pool = jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 1, 2, 2, 2), (1, 1, 2, 2, 2), "VALID")
        return pool.sum()

    module = jax.jit(jax.grad(loss)).lower(jnp.ones((1, 1, 4, 4, 4), jnp.float32)).compiler_ir("stablehlo")
    lookups = []

    def counted(platform):
        lookups.append(platform)
        return registry.binding_for(platform)

    monkeypatch.setattr(module_rewrite, "binding_for", counted)
    monkeypatch.setattr(pass_, "binding_for", counted)
    rewritten = module_rewrite.rewrite_for_platform(module, "cpu", options=PassOptions(strategy="recompute"))
    assert rewritten is not module and "max_pooling_3d_backward" in str(rewritten)
    assert lookups == ["cpu"]
