"""PassOptions: every entry point takes the same settings, checked in one place; the binding resolved once."""

from __future__ import annotations

import pytest
from jaxlib.mlir import passmanager

import pool3d_pass
from pool3d_pass.ir.context import make_context
from pool3d_pass.options import NEUTRAL, PassOptions

from corpus import EXAMPLE as EXAMPLE_FILE

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
    from pool3d_pass.rewriting import max_pool_backward

    def loss(x):
        pool = jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 1, 2, 2, 2), (1, 1, 2, 2, 2), "VALID")
        return pool.sum()

    module = jax.jit(jax.grad(loss)).lower(jnp.ones((1, 1, 4, 4, 4), jnp.float32)).compiler_ir("stablehlo")
    lookups = []

    def counted(platform):
        lookups.append(platform)
        return registry.binding_for(platform)

    monkeypatch.setattr(module_rewrite, "binding_for", counted)
    monkeypatch.setattr(max_pool_backward, "binding_for", counted)
    rewritten = module_rewrite.rewrite_for_platform(module, "cpu", options=PassOptions(strategy="recompute"))
    assert rewritten is not module and "max_pooling_3d_backward" in str(rewritten)
    assert lookups == ["cpu"]


def _module():
    from jaxlib.mlir import ir

    return ir.Module.parse(EXAMPLE, context=make_context())


PLATFORMS = "neutral, cpu, gpu, neuron, reference"


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: pool3d_pass.rewrite(_module(), target="tpu"), ValueError,
         f"unknown target 'tpu'; expected one of {PLATFORMS}"),
        (lambda: pool3d_pass.rewrite(_module(), target="CPU"), ValueError,
         f"unknown target 'CPU'; expected one of {PLATFORMS} (the names are lower case: 'cpu')"),
        (lambda: pool3d_pass.rewrite(_module(), target=3), TypeError,
         "target must be a str ('neutral' or a platform name), got 3 (int)"),
        (lambda: pool3d_pass.rewrite(_module(), strategy="fastest"), ValueError, UNKNOWN),
        (lambda: pool3d_pass.rewrite(_module(), strategy=1), TypeError,
         "strategy must be a str ('auto', 'recompute', 'indices'), got 1 (int)"),
        (lambda: pool3d_pass.rewrite(_module(), "cpu"), TypeError,
         "options must be a PassOptions or None, got 'cpu' (str); the settings are keywords"),
        (lambda: pool3d_pass.rewrite(_module(), targt="cpu"), TypeError,
         "unknown keyword argument(s) targt; the options are target, strategy, mesh, filename, gpu_kernels, "
         "gpu_interpret"),
        (lambda: pool3d_pass.rewrite("module {}"), TypeError,
         "module must be a jaxlib.mlir.ir.Module (or its builtin.module operation), got 'module {}' (str); "
         "for textual MLIR use pool3d_pass.rewrite_text"),
        (lambda: pool3d_pass.rewrite(None), TypeError,
         "module must be a jaxlib.mlir.ir.Module (or its builtin.module operation), got None (NoneType)"),
        (lambda: pool3d_pass.rewrite(_module().body.operations[0]), TypeError,
         "module must be a jaxlib.mlir.ir.Module (or its builtin.module operation), got a func.func operation"),
        (lambda: pool3d_pass.rewrite_text(EXAMPLE.encode()), TypeError,
         "text must be a str of textual MLIR, got b'module @jit_loss"),
        (lambda: pool3d_pass.rewrite_text(EXAMPLE, target="tpu"), ValueError, "unknown target 'tpu'"),
        (lambda: pool3d_pass.rewrite_text(EXAMPLE, filename=3), TypeError,
         "filename must be a str (the input's name), got 3 (int)"),
        (lambda: pool3d_pass.add_pass("pm"), TypeError,
         "pm must be a jaxlib.mlir.passmanager.PassManager, got 'pm' (str)"),
        (lambda: _add_pass(target="tpu"), ValueError, "unknown target 'tpu'"),
        (lambda: _add_pass(on_report="print"), TypeError,
         "on_report must be a callable taking a RewriteReport, or None, got 'print'"),
        (lambda: pool3d_pass.jit(42), TypeError, "fun must be a callable (the function to compile), got 42 (int)"),
        (lambda: pool3d_pass.jit(strategy="fastest"), ValueError, UNKNOWN),
        (lambda: pool3d_pass.enable(strategy=3), TypeError, "strategy must be a str"),
        (lambda: PassOptions(gpu_kernels="triton"), ValueError,
         "unknown gpu_kernels 'triton'; expected one of auto, cuda, pallas"),
    ],
    ids=["rewrite-unknown-target", "rewrite-target-case", "rewrite-target-type", "rewrite-unknown-strategy",
         "rewrite-strategy-type", "rewrite-positional-target", "rewrite-misspelt-keyword", "rewrite-text",
         "rewrite-none", "rewrite-function", "rewrite_text-bytes", "rewrite_text-unknown-target",
         "rewrite_text-filename-type", "add_pass-not-a-pass-manager", "add_pass-unknown-target",
         "add_pass-on_report", "jit-not-callable", "jit-decorator-unknown-strategy", "enable-strategy-type",
         "gpu_kernels"],
)
def test_a_bad_argument_is_refused_naming_it_the_value_and_what_is_accepted(call, error, message):
    from pool3d_pass.integration import routing

    with pytest.raises(error) as raised:
        call()
    assert str(raised.value).startswith(message), str(raised.value)
    assert type(raised.value) is error  # a bad argument, never an AttributeError from inside
    assert not routing.is_enabled()


def test_the_accepted_targets_are_the_registrys_platforms():
    from pool3d_pass.bindings import registry
    from pool3d_pass.rewriting import targets

    assert targets() == [NEUTRAL, *registry.platforms()]
    assert ", ".join(targets()) == PLATFORMS


def test_none_is_the_default_as_leaving_the_argument_out():
    assert PassOptions(target=None, strategy=None) == PassOptions()
    left_out = pool3d_pass.rewrite_text(EXAMPLE)
    given_none = pool3d_pass.rewrite_text(EXAMPLE, target=None, strategy=None)
    assert given_none[0] == left_out[0] and "custom_call @pool3d.max_pooling_3d_backward" in left_out[0]
    assert given_none[1].remarks() == left_out[1].remarks() and str(given_none[1]) == str(left_out[1])
    module = _module()
    assert pool3d_pass.rewrite(module, target=None).rewritten == 1


def test_rewrite_takes_the_module_operation_too():
    module = _module()
    report = pool3d_pass.rewrite(module.operation)
    assert report.rewritten == 1 and "pool3d.max_pooling_3d_backward" in str(module)


def test_parse_errors_name_the_callers_file():
    from jaxlib.mlir import ir

    from pool3d_pass.safe_parse import InputLimitError

    broken = EXAMPLE.replace("stablehlo.select_and_scatter", "stablehlo.no_such_op", 1)
    with pytest.raises(ir.MLIRError, match='"model.mlir":23:11'):
        pool3d_pass.rewrite_text(broken, filename="model.mlir")
    with pytest.raises(InputLimitError, match="^model.mlir:1:1001: nesting deeper than 1000 levels"):
        pool3d_pass.rewrite_text("(" * 1001, filename="model.mlir")
    # a rewrite under a name: the same output, and its remarks name the file
    named, report = pool3d_pass.rewrite_text(EXAMPLE, filename="model.mlir")
    assert named == pool3d_pass.rewrite_text(EXAMPLE)[0]
    assert report.remarks()[0].startswith("model.mlir:23:11: remark: max-pool gradient rewritten")
