"""The gpu binding's settings as PassOptions fields: they reach the lowering, win over the environment, are checked.

`gpu_kernels` ("auto", "cuda", "pallas") and `gpu_interpret` are options of
the pass (options.py); POOL3D_GPU_IMPL and POOL3D_GPU_INTERPRET only fill in
where an option is not given (environment.py). The pass keys its cached
lowerings by them, so switching needs no cache clearing.
"""

from __future__ import annotations

import pytest

import pool3d_pass
from pool3d_pass import environment
from pool3d_pass.bindings.gpu.cuda import library as cuda_library
from pool3d_pass.cli.pool3d_opt import main
from pool3d_pass.contract import TARGETS
from pool3d_pass.options import BindingSettings, PassOptions

from corpus import FIXTURES

pytestmark = [pytest.mark.gpu, pytest.mark.filterwarnings("ignore:The Pallas Triton backend is deprecated:DeprecationWarning")]
TRITON = "__gpu$xla.gpu.triton"
FIXTURE = FIXTURES / "jax_ncdhw_k3s2_p1_f32.mlir"


def contract_calls(text: str) -> list[str]:
    return [target for target in TARGETS.values() if f"@{target}(" in text or f'@"{target}"' in text]


@pytest.fixture(autouse=True)
def opposite_environment(monkeypatch):
    """The environment asks for the other thing in each test: the option must win."""
    monkeypatch.setenv(environment.GPU_KERNELS, "cuda")
    monkeypatch.setenv(environment.GPU_INTERPRET, "1")


def test_interpret_option_off_gives_triton_calls_despite_the_environment():
    text, report = pool3d_pass.rewrite_text(FIXTURE.read_text(), target="gpu", strategy="indices", gpu_kernels="pallas",
                                            gpu_interpret=False)
    assert report.rewritten and TRITON in text


def test_interpret_option_on_gives_plain_stablehlo(monkeypatch):
    monkeypatch.setenv(environment.GPU_INTERPRET, "0")
    text, report = pool3d_pass.rewrite_text(FIXTURE.read_text(), target="gpu", strategy="indices", gpu_kernels="pallas",
                                            gpu_interpret=True)
    assert report.rewritten and TRITON not in text and not contract_calls(text)


@pytest.mark.skipif(cuda_library.unavailable() is not None, reason=f"CUDA kernels: {cuda_library.unavailable()}")
def test_cuda_option_gives_the_contract_calls(monkeypatch):
    monkeypatch.setenv(environment.GPU_KERNELS, "pallas")
    monkeypatch.delenv(environment.GPU_INTERPRET)
    text, report = pool3d_pass.rewrite_text(FIXTURE.read_text(), target="gpu", strategy="indices", gpu_kernels="cuda")
    assert report.rewritten and contract_calls(text) and TRITON not in text


def test_unset_options_take_the_environment(monkeypatch):
    monkeypatch.setenv(environment.GPU_KERNELS, "pallas")
    monkeypatch.setenv(environment.GPU_INTERPRET, "1")
    text, report = pool3d_pass.rewrite_text(FIXTURE.read_text(), target="gpu", strategy="indices")
    assert report.rewritten and TRITON not in text and not contract_calls(text)
    monkeypatch.setenv(environment.GPU_INTERPRET, "0")
    text, _ = pool3d_pass.rewrite_text(FIXTURE.read_text(), target="gpu", strategy="indices")
    assert TRITON in text


def test_options_are_checked():
    with pytest.raises(ValueError, match="unknown gpu_kernels 'triton'"):
        PassOptions(gpu_kernels="triton")
    with pytest.raises(TypeError, match="gpu_interpret must be"):
        PassOptions(gpu_interpret="yes")


def test_cli_flags(tmp_path, capsys):
    out = tmp_path / "out.mlir"
    assert main([str(FIXTURE), "--target=gpu", "--strategy=indices", "--gpu-kernels=pallas", "-o", str(out)]) == 0
    assert TRITON not in out.read_text()  # the environment's interpret mode: no flag given
    assert main([str(FIXTURE), "--target=gpu", "--strategy=indices", "--gpu-kernels=pallas", "--gpu-interpret", "-o", str(out)]) == 0
    assert TRITON not in out.read_text()
    with pytest.raises(SystemExit) as exit_:
        main([str(FIXTURE), "--target=gpu", "--strategy=indices", "--gpu-kernels=triton", "-o", str(tmp_path / "bad.mlir")])
    assert exit_.value.code != 0 and "--gpu-kernels" in capsys.readouterr().err
    assert not (tmp_path / "bad.mlir").exists()


def test_the_settings_reach_the_binding_as_its_argument():
    """`Binding.function(call, settings=)` binds the run's settings: the environment (interpret on) is not read."""
    import functools

    import jax
    import jax.numpy as jnp

    from pool3d_pass.bindings.registry import binding_for

    attributes = dict(kernel_size=(2, 2, 2), stride=(2, 2, 2), padding=(0, 0, 0))
    x = jax.ShapeDtypeStruct((1, 1, 4, 4, 4), jnp.float32)
    texts = {}
    for interpret in (False, True):
        settings = BindingSettings(gpu_kernels="pallas", gpu_interpret=interpret)
        function = functools.partial(binding_for("gpu").function("forward_output", settings=settings), **attributes)
        texts[interpret] = jax.jit(function).trace(x).lower(lowering_platforms=("cuda",)).as_text()
    assert TRITON in texts[False] and TRITON not in texts[True]
