"""Every setting of PassOptions reaches every entry: jit, enable, enabled, rewrite, add_pass and pool3d-opt.

Driven by options.SETTINGS, so a setting added to PassOptions is covered here
without a new test: each entry is given a value other than the setting's
default and the options the pass then runs with must carry it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

import pool3d_pass
from pool3d_pass import environment
from pool3d_pass.integration import module_rewrite, routing
from pool3d_pass.options import BOOLEAN, INPUT_FIELDS, SETTING_SPECS, SETTINGS, PassOptions

from corpus import EXAMPLE


def _other_value(name: str):
    """A value of the setting `name` that is not its default."""
    spec = SETTING_SPECS[name]
    words = (True, False) if spec["words"] is BOOLEAN else spec["words"]
    return next(word for word in words if word != spec["default"])


def _loss(x):
    pool = jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 1, 2, 2, 2), (1, 1, 2, 2, 2), "VALID")
    return pool.sum()


@pytest.fixture
def seen_by_the_hook(monkeypatch):
    """The options each compile through the hook was rewritten with."""
    seen = []
    original = module_rewrite.rewrite_for_platform

    def spy(module, platform, devices=None, options=None, **kwargs):
        seen.append(options)
        return original(module, platform, devices=devices, options=options, **kwargs)

    monkeypatch.setattr(module_rewrite, "rewrite_for_platform", spy)
    return seen


@pytest.mark.parametrize("name", SETTINGS)
def test_jit_enable_and_enabled_carry_every_setting_to_the_compile(name, seen_by_the_hook):
    value = _other_value(name)
    x = jnp.ones((1, 1, 4, 4, 4), jnp.float32)
    pool3d_pass.jit(jax.grad(_loss), **{name: value}).lower(x).compile()
    pool3d_pass.jit(jax.grad(_loss), options=PassOptions(**{name: value}))(x)
    with pool3d_pass.enabled(**{name: value}):
        assert getattr(routing.options(), name) == value
        jax.jit(jax.grad(_loss)).lower(x).compile()
    try:
        pool3d_pass.enable(**{name: value})
        jax.jit(jax.grad(lambda x: 2 * _loss(x))).lower(x).compile()
    finally:
        pool3d_pass.disable()
    assert [getattr(options, name) for options in seen_by_the_hook] == [value] * 4


@pytest.mark.parametrize("name", SETTINGS)
def test_rewrite_add_pass_and_pool3d_opt_take_every_setting(name, monkeypatch, tmp_path):
    from pool3d_pass.cli import pool3d_opt
    from pool3d_pass.rewriting import patterns

    value = _other_value(name)
    seen = []
    original = patterns.PassRun.__init__

    def spy(self, options, *args, **kwargs):
        seen.append(options)
        original(self, options, *args, **kwargs)

    monkeypatch.setattr(patterns.PassRun, "__init__", spy)
    pool3d_pass.rewrite_text(EXAMPLE.read_text(), **{name: value})
    flag = "--" + name.replace("_", "-")
    argument = ([flag] if value else [f"--no-{flag[2:]}"]) if isinstance(value, bool) else [f"{flag}={value}"]
    assert pool3d_opt.main([str(EXAMPLE), *argument, "-o", str(tmp_path / "out.mlir")]) == 0
    assert [getattr(options, name) for options in seen] == [value, value]


def test_a_switch_with_other_settings_is_another_cache_key():
    """enable() with new settings drops executables compiled under the old ones, as a new strategy does."""
    name = next(n for n in SETTINGS if n != "strategy")
    jitted = jax.jit(jax.grad(_loss))
    x = jnp.ones((1, 1, 4, 4, 4), jnp.float32)
    with pool3d_pass.enabled():
        jitted(x)
        assert jitted._cache_size() == 1
        with pool3d_pass.enabled(**{name: _other_value(name)}):
            assert jitted._cache_size() == 0
            jitted(x)
        assert routing.global_options() == PassOptions()
    assert not routing.is_enabled()


@pytest.mark.parametrize("name", INPUT_FIELDS)
def test_the_jax_entries_refuse_what_each_compile_sets(name):
    mesh = jax.sharding.Mesh(jax.devices()[:1], ("batch",))
    value = {"target": "cpu", "filename": "model.mlir", "mesh": mesh}[name]
    message = f"{name}: set by each compile under pool3d_pass.jit and enable()"
    with pytest.raises(TypeError, match=message):
        pool3d_pass.jit(jax.grad(_loss), **{name: value})
    with pytest.raises(TypeError, match=message):
        pool3d_pass.enable(options=PassOptions(**{name: value}))
    assert not routing.is_enabled()


def test_every_field_is_checked_when_the_options_are_made(monkeypatch):
    with pytest.raises(ValueError, match="unknown target 'gpux'; expected one of neutral, cpu, gpu"):
        PassOptions(target="gpux")
    with pytest.raises(TypeError, match="mesh must be a jax.sharding.Mesh or None, got 'mesh'"):
        PassOptions(mesh="mesh")
    monkeypatch.setenv(environment.GPU_KERNELS, "triton")
    with pytest.raises(ValueError, match=r"POOL3D_GPU_IMPL='triton' \(the default of gpu_kernels\): unknown"):
        PassOptions()
    with pytest.raises(ValueError, match="POOL3D_GPU_IMPL='triton'"):
        pool3d_pass.enable()
    assert PassOptions(gpu_kernels="cuda").gpu_kernels == "cuda"  # an option given: its variable is not read
    monkeypatch.setenv(environment.GPU_KERNELS, "Pallas")
    monkeypatch.setenv(environment.GPU_INTERPRET, "maybe")
    with pytest.raises(ValueError, match="POOL3D_GPU_INTERPRET='maybe'"):
        PassOptions()
    monkeypatch.setenv(environment.GPU_INTERPRET, "yes")
    assert (PassOptions().gpu_kernels, PassOptions().gpu_interpret) == ("pallas", True)
    assert not routing.is_enabled()


def test_pool3d_opt_turns_an_environment_default_off(monkeypatch, tmp_path, capsys):
    from pool3d_pass.cli import pool3d_opt

    monkeypatch.setenv(environment.GPU_INTERPRET, "1")
    assert pool3d_opt.parse_args(["--no-gpu-interpret"]).gpu_interpret is False
    monkeypatch.setenv(environment.GPU_KERNELS, "triton")
    output = tmp_path / "out.mlir"
    assert pool3d_opt.main([str(EXAMPLE), "-o", str(output)]) == 1
    error = capsys.readouterr().err
    assert error.startswith("pool3d-opt: error: POOL3D_GPU_IMPL='triton' (the default of gpu_kernels)")
    assert error.count("\n") == 1 and not output.exists()
