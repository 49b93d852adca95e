"""The neuron binding's glue, driven through a Neuron SDK STAND-IN (no Neuron host here).

`tests/support/neuron_sdk_standin/` has the documented Python shape of `nki`
and `nkilib` (README there) and lowers a kernel launch to the custom call
`AwsNeuronCustomNativeKernel`, recording the launch's LNC, argument names and
attribute values in its backend_config; launched eagerly, it runs the kernel's
algorithm (the numpy transcription of its source) on the tensors it is given.
These tests prove the glue: what the binding imports, how it launches the
kernel (which tensor goes where, with which attributes, by value against the
contract's reference), which calls reach the module, what it refuses and how it
fails without the SDK. What the kernel's algorithm computes over drawn inputs
is tests/bindings/neuron/test_neuron_transcription.py's; what the engines compute is
`make neuron-check`'s.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import re
import subprocess
import sys

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import pool3d_pass
from oracles.contract_numpy import max_pool_grad_reference, output_shape
from pool3d_pass.bindings import neuron, registry
from pool3d_pass.bindings.neuron import sdk
from pool3d_pass.bindings.registry import CallSignature
from pool3d_pass.cli.pool3d_opt import main
from pool3d_pass.contract.pool_config import PoolConfig
from pool3d_pass.integration import module_rewrite
from pool3d_pass.ir.context import make_context

from corpus import ENTRIES, EXAMPLE, ROOT, SUPPORT, fixture_text

STANDIN = SUPPORT / "neuron_sdk_standin"
PLACEHOLDER = SUPPORT / "neuron_registry_placeholder"
# The kernel's parameters, as its API page (SDK 2.33) and source name them.
KERNEL_PARAMETERS = sorted(
    ["grad_output", "input_tensor", "output_tensor", "kernel_size", "stride", "padding", "data_format", "output_format"]
)
NKI_CALL = "stablehlo.custom_call @AwsNeuronCustomNativeKernel"


def _forget_neuron_modules() -> dict:
    gone = {name: module for name, module in sys.modules.items() if name.split(".")[0] in ("nki", "nkilib")}
    for name in gone:
        del sys.modules[name]
    return gone


@contextlib.contextmanager
def sdk_on_path(*folders):
    """`folders` first on the import path, as an installed SDK would be (stand-in or placeholder; pytest's
    monkeypatch puts them there and takes them away), the binding's checks and lowerings forgotten."""
    saved = _forget_neuron_modules()
    with pytest.MonkeyPatch.context() as patch:
        for folder in reversed(folders):
            patch.syspath_prepend(str(folder))  # (and invalidates the import caches)
        sdk._checked = False
        pool3d_pass.clear_caches()  # lowerings are cached per call, not per LNC
        try:
            yield
        finally:
            _forget_neuron_modules()
            sys.modules.update(saved)
            sdk._checked = False
            pool3d_pass.clear_caches()
    importlib.invalidate_caches()


@pytest.fixture
def standin(monkeypatch, tmp_path):
    monkeypatch.setenv("POOL3D_NKI_STANDIN_ARTIFACTS", str(tmp_path / "artifacts"))
    with sdk_on_path(STANDIN):
        yield importlib.import_module("nki")


def launches_in(text: str, nki) -> list[dict]:
    """The stand-in's backend_config of every NKI call in printed IR."""
    configs = []
    for line in text.splitlines():
        if NKI_CALL in line:
            encoded = line.split('backend_config = "', 1)[1].split('"', 1)[0]
            configs.append(nki.decode_backend_config(encoded))
    return configs


def assert_launched_as_documented(configs: list[dict], lnc: int) -> None:
    assert configs
    for config in configs:
        assert config["kernel"] == "nkilib.experimental.pooling.max_pooling_3d_backward.max_pooling_3d_backward"
        assert config["lnc"] == lnc
        assert config["keywords"] == KERNEL_PARAMETERS and config["positional"] == []
        assert config["tensors"] == ["grad_output", "input_tensor", "output_tensor"]
        assert os.path.isabs(config["artifact"])


def recorded_attributes(kernel_size, stride, padding, data_format, output_format=None) -> dict:
    """A launch's attributes as the stand-in records them (JSON: lists for tuples)."""
    return {"kernel_size": list(kernel_size), "stride": list(stride), "padding": list(padding),
            "data_format": data_format, "output_format": output_format or data_format}


_BACKWARD_CALL = re.compile(r"@pool3d\.max_pooling_3d_backward\(.*?backend_config = \{(.*?)\}")
_VECTOR = re.compile(r"(kernel_size|stride|padding) = dense<(\[[^\]]*\]|\d+)> : tensor<3xi64>")
_LAYOUT = re.compile(r'(data_format|output_format) = "(\w+)"')


def _dense(value: str) -> list[int]:
    """An i64 vector attribute's values; a splat (`dense<2>`) holds one value for the 3 axes."""
    return [int(v) for v in value.strip("[]").split(",")] if value.startswith("[") else [int(value)] * 3


def neutral_call_attributes(text: str) -> list[dict]:
    """The attributes of every neutral backward call in printed IR, in order, as the stand-in records them."""
    calls = []
    for body in _BACKWARD_CALL.findall(text):
        attributes = {name: _dense(value) for name, value in _VECTOR.findall(body)}
        attributes.update(_LAYOUT.findall(body))
        calls.append(attributes)
    return calls


# --- the launch -------------------------------------------------------------------------------


@pytest.mark.parametrize("variable, lnc", [(None, neuron.DEFAULT_LNC), ("1", 1), ("2", 2)])
def test_the_kernel_is_launched_with_the_configured_lnc_and_its_parameter_names(standin, monkeypatch, variable, lnc):
    if variable is None:
        monkeypatch.delenv(neuron.LNC_VARIABLE, raising=False)
    else:
        monkeypatch.setenv(neuron.LNC_VARIABLE, variable)
    text, report = pool3d_pass.rewrite_text(fixture_text("jax_ncdhw_k3s2_p1_f32"), target="neuron")
    assert report.rewritten == 1 and report.strategy == "recompute"
    assert "select_and_scatter" not in text and text.count(NKI_CALL) == 1
    # Unset, the stand-in (like nki.jit) would launch with 1: LNC 2 here is the binding's kernel[2].
    (launch,) = launches_in(text, standin)
    assert_launched_as_documented([launch], lnc)
    assert launch["attributes"] == recorded_attributes((3, 3, 3), (2, 2, 2), (1, 1, 1), "NCDHW")
    assert launch["shapes"] == {"grad_output": [2, 3, 4, 4, 4], "input_tensor": [2, 3, 8, 8, 8],
                                "output_tensor": [2, 3, 4, 4, 4]}


def test_a_bad_lnc_fails_with_one_line(standin, monkeypatch):
    monkeypatch.setenv(neuron.LNC_VARIABLE, "4")
    with pytest.raises(neuron.NeuronSdkUnavailable) as raised:
        pool3d_pass.rewrite_text(fixture_text("jax_ncdhw_k3s2_p1_f32"), target="neuron")
    assert "\n" not in str(raised.value) and "NEURON_LOGICAL_NC_CONFIG='4'" in str(raised.value)


def test_the_compile_hooks_lowering_for_neuron_splices_the_kernel(standin, monkeypatch):
    monkeypatch.setenv(neuron.LNC_VARIABLE, "2")

    def pool(x):
        return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 1, 2, 2, 2), (1, 1, 2, 2, 2), "VALID")

    def grad(x, g):
        return jax.vjp(pool, x)[1](g)[0]

    x = jax.ShapeDtypeStruct((2, 3, 8, 8, 8), jnp.float32)
    g = jax.ShapeDtypeStruct((2, 3, 4, 4, 4), jnp.float32)
    lowered = jax.jit(grad).trace(x, g).lower(lowering_platforms=("neuron",))
    with make_context() as context:
        from jaxlib.mlir import ir

        module = ir.Module.parse(lowered.as_text(), context)
        rewritten = module_rewrite.rewrite_for_platform(module, "neuron")
        assert rewritten is not module
        text = str(rewritten)
    assert "select_and_scatter" not in text and text.count(NKI_CALL) == 1
    assert_launched_as_documented(launches_in(text, standin), 2)


def lowered_k2s2_backward(*shapes):
    """The neuron binding's NCDHW k2 s2 backward call on f32 operands of these (g, x, y) shapes, lowered for neuron."""
    function = registry.binding_for("neuron").function()
    args = [jax.ShapeDtypeStruct(shape, jnp.float32) for shape in shapes]

    def backward(g, x, y):
        return function(g, x, y, kernel_size=(2, 2, 2), stride=(2, 2, 2), padding=(0, 0, 0), data_format="NCDHW")

    return jax.jit(backward).trace(*args).lower(lowering_platforms=("neuron",)).as_text()


def test_an_empty_batch_returns_the_empty_result_without_a_launch(standin):
    text = lowered_k2s2_backward((0, 3, 2, 2, 2), (0, 3, 4, 4, 4), (0, 3, 2, 2, 2))
    assert "AwsNeuronCustomNativeKernel" not in text and "tensor<0x3x4x4x4xf32>" in text


def test_input_after_the_last_window_is_trimmed_before_the_kernel(standin):
    # D = 7 with k2 s2: the last window ends at 6; the kernel gets the covered 6 and the
    # result is zero-padded back (the kernel would read past its tile there).
    text = lowered_k2s2_backward((2, 3, 3, 4, 4), (2, 3, 7, 8, 8), (2, 3, 3, 4, 4))
    (launch,) = launches_in(text, standin)
    assert launch["shapes"]["input_tensor"] == [2, 3, 6, 8, 8]
    assert "stablehlo.pad" in text and "-> tensor<2x3x7x8x8xf32>" in text


def test_the_kernel_is_never_wrapped_in_nki_jit_again(standin, monkeypatch):
    # What the binding once did: nki.jit(kernel), which the SDK refuses. The binding must launch
    # the module's decorated kernel object itself, and call nki.jit on nothing.
    kernel = importlib.import_module(neuron.KERNEL_MODULE).max_pooling_3d_backward
    wrapped, launched = [], []
    monkeypatch.setattr(standin, "jit", lambda *args, **options: wrapped.append(args))
    grid = standin.Kernel.__getitem__
    monkeypatch.setattr(standin.Kernel, "__getitem__", lambda self, lnc: launched.append(self) or grid(self, lnc))
    text = lowered_k2s2_backward((2, 3, 4, 4, 4), (2, 3, 8, 8, 8), (2, 3, 4, 4, 4))
    assert wrapped == [] and len(launched) == 1 and launched[0] is kernel
    assert_launched_as_documented(launches_in(text, standin), neuron.DEFAULT_LNC)


# --- the launch by value: the stand-in runs the kernel's algorithm on what the binding hands it ---

# (layout of x, layout of g and y, dtype, kernel_size, stride, padding, x's shape in NCDHW)
BY_VALUE = {
    "ncdhw_k3s2_p1_f32": ("NCDHW", "NCDHW", np.float32, (3, 3, 3), (2, 2, 2), (1, 1, 1), (2, 3, 7, 6, 5)),
    "ndhwc_k2s2_trimmed_bf16": ("NDHWC", "NDHWC", ml_dtypes.bfloat16, (2, 2, 2), (2, 2, 2), (0, 0, 0), (1, 4, 7, 6, 5)),
    "ncdhw_k2s1_overlap_f16": ("NCDHW", "NCDHW", np.float16, (2, 2, 2), (1, 1, 1), (0, 0, 0), (2, 2, 4, 5, 3)),
    "ncdhw_to_ndhwc_k123_s122_p011_f32":
        ("NCDHW", "NDHWC", np.float32, (1, 2, 3), (1, 2, 2), (0, 1, 1), (1, 3, 3, 6, 7)),
}


def in_layout(ncdhw: np.ndarray, layout: str) -> np.ndarray:
    return np.moveaxis(ncdhw, 1, -1) if layout == "NDHWC" else ncdhw


def by_value_problem(name: str):
    """(g, x, y) in their layouts and dtype, the binding's keywords, and the contract's gradient.

    x holds ties; y is its pooled maxima; g has y's shape and dtype but values no
    x holds, so g can never stand in for y; small integers keep every sum exact.
    """
    layout, out_layout, dtype, kernel, stride, padding, shape = BY_VALUE[name]
    rng = np.random.default_rng(sorted(BY_VALUE).index(name))
    window, strides, pads = (1, 1, *kernel), (1, 1, *stride), ((0, 0), (0, 0), *((p, p) for p in padding))
    x = rng.integers(-3, 4, shape).astype(np.float64)
    g = rng.choice([-9.0, -7.0, -5.0, 5.0, 7.0, 9.0], output_shape(shape, window, strides, pads))
    reference = max_pool_grad_reference(x, g, window, strides, pads)
    g, x, y = (in_layout(a, at).astype(dtype) for a, at in ((g, out_layout), (x, layout), (reference.y, out_layout)))
    keywords = dict(kernel_size=kernel, stride=stride, padding=padding, data_format=layout, output_format=out_layout)
    return (g, x, y), keywords, in_layout(reference.grad, layout)


@pytest.mark.parametrize("name", sorted(BY_VALUE))
def test_the_binding_hands_the_kernel_each_tensor_and_attribute_in_its_place(standin, name):
    (g, x, y), keywords, expected = by_value_problem(name)
    assert g.shape == y.shape and g.dtype == y.dtype and not np.array_equal(g, y)
    function = registry.binding_for("neuron").function()
    grad = np.asarray(function(jnp.asarray(g), jnp.asarray(x), jnp.asarray(y), **keywords))  # eager: the launch runs
    assert grad.dtype == x.dtype and grad.shape == x.shape
    np.testing.assert_array_equal(grad.astype(np.float64), expected)
    # The same call lowered: what the launch records is what computed the values above.
    lowered = jax.jit(functools.partial(function, **keywords)).trace(g, x, y).lower(lowering_platforms=("neuron",))
    (launch,) = launches_in(lowered.as_text(), standin)
    assert launch["attributes"] == recorded_attributes(**keywords)
    assert launch["shapes"]["grad_output"] == list(g.shape) == launch["shapes"]["output_tensor"]


# --- pool3d-opt on the fixtures and the bench's programs ---------------------------------------


def bench_programs() -> list[str]:
    """The bench's pooling problems (quick set), both jobs, lowered by JAX for neuron."""
    from cases.pooling import JOBS, QUICK_CASES, jax_job, np_dtype, pool_fn

    programs = []
    for case in QUICK_CASES:
        x = jax.ShapeDtypeStruct(case.shape, np_dtype(case.dtype))
        g = jax.ShapeDtypeStruct(case.out_shape(), np_dtype(case.dtype))
        for job in JOBS:
            lowered = jax.jit(jax_job(job, pool_fn(case))).trace(x, g).lower(lowering_platforms=("neuron",))
            programs.append(lowered.as_text())
    return programs


def test_pool3d_opt_turns_every_bench_and_fixture_gradient_into_one_nki_call_with_lnc_2(
    standin, monkeypatch, tmp_path, capsys
):
    monkeypatch.setenv(neuron.LNC_VARIABLE, "2")
    bench = bench_programs()
    chunks = bench + [fixture_text(entry["name"]) for entry in ENTRIES]
    source = tmp_path / "all.mlir"
    source.write_text("\n// -----\n".join(chunks))
    output = tmp_path / "out.mlir"
    assert main([str(source), "--split-input-file", "--target=neuron", "-o", str(output)]) == 0
    stderr = capsys.readouterr().err
    rewritten = output.read_text().split("// -----\n")
    assert len(rewritten) == len(chunks)
    for number, (before, after) in enumerate(zip(chunks, rewritten)):
        # The same run with the neutral call: one backward call per gradient the pass rewrites.
        neutral, _ = pool3d_pass.rewrite_text(before, strategy="recompute")
        assert after.count(NKI_CALL) == neutral.count("@pool3d.max_pooling_3d_backward("), number
        assert after.count("select_and_scatter") == neutral.count("select_and_scatter"), number
        # Each launch with its gradient's attributes, as the neutral call carries them.
        launched = [launch["attributes"] for launch in launches_in(after, standin)]
        assert launched == neutral_call_attributes(neutral), number
    # Each bench program holds one gradient: one NKI call, no select_and_scatter left.
    assert all(chunk.count(NKI_CALL) == 1 and "select_and_scatter" not in chunk for chunk in rewritten[: len(bench)])
    fixture_calls = sum(chunk.count(NKI_CALL) for chunk in rewritten[len(bench) :])
    assert fixture_calls == sum(entry["expected_pool_gradients"] or 0 for entry in ENTRIES)  # every one
    assert_launched_as_documented(launches_in(output.read_text(), standin), 2)
    assert stderr.count("\n") == 1 and "NCC_EVRF059" in stderr and "only on this host" in stderr


def test_pool3d_opt_adds_no_remark_where_no_nki_call_was_made(standin, tmp_path, capsys):
    source = tmp_path / "plain.mlir"
    source.write_text("func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n  return %x : tensor<4xf32>\n}\n")
    assert main([str(source), "--target=neuron", "-o", str(tmp_path / "out.mlir")]) == 0
    assert capsys.readouterr().err == ""


def test_pool3d_opt_with_the_registry_placeholder_fails_with_one_line(tmp_path):
    output = tmp_path / "out.mlir"
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PLACEHOLDER), str(ROOT)])}
    result = subprocess.run(
        [sys.executable, "-m", "pool3d_pass.cli.pool3d_opt", str(EXAMPLE), "--target=neuron", "-o", str(output)],
        capture_output=True, text=True, env=environment, cwd=tmp_path, timeout=300,
    )
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "public registry's placeholder" in result.stderr and sdk.PIP_REPOSITORY in result.stderr
    assert "2.33" in result.stderr and "Trn2/Trn3" in result.stderr
    assert not output.exists() and result.stdout == ""


# --- require(): what is missing, and what to install --------------------------------------------


def test_without_the_sdk_require_names_what_to_install_and_where():
    with sdk_on_path():
        if not neuron.missing_packages():
            pytest.skip("this Python has nki and nkilib: the missing-SDK message cannot occur")
        with pytest.raises(neuron.NeuronSdkUnavailable) as raised:
            neuron.require_neuron_packages()
    message = str(raised.value)
    assert "\n" not in message and sdk.INSTALL in message and "Neuron SDK 2.33 or later (Trn2/Trn3)" in message


def sdk_with_nki_only(folder):
    """`folder` holding the stand-in's nki and nothing else of the SDK."""
    folder.mkdir(exist_ok=True)
    (folder / "nki").symlink_to(STANDIN / "nki")
    return folder


def test_an_sdk_before_2_33_is_named(tmp_path):
    old = sdk_with_nki_only(tmp_path / "old_sdk")
    (old / "nkilib" / "experimental").mkdir(parents=True)
    (old / "nkilib" / "__init__.py").write_text("")
    (old / "nkilib" / "experimental" / "__init__.py").write_text("")
    with sdk_on_path(old):
        found = neuron.missing_packages()
    assert found == [f"{neuron.KERNEL_MODULE} is missing (Neuron SDK older than 2.33)"]


def test_an_nkilib_placeholder_is_named(tmp_path):
    folder = sdk_with_nki_only(tmp_path / "site")
    (folder / "nkilib").mkdir()
    (folder / "nkilib" / "__init__.py").write_text((PLACEHOLDER / "nki" / "__init__.py").read_text())
    with sdk_on_path(folder):
        found = neuron.missing_packages()
    assert found == ["the installed nkilib is the public registry's placeholder (its import raises 'WRONG PACKAGE')"]


def test_the_registrys_nki_library_placeholder_is_named(tmp_path):
    folder = sdk_with_nki_only(tmp_path / "site")
    dist = folder / "nki_library-0.0.2.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: nki-library\nVersion: 0.0.2\n")
    (dist / "RECORD").write_text("nki_library-0.0.2.dist-info/METADATA,,\n")
    with sdk_on_path(folder):
        found = neuron.missing_packages()
    assert found == ["nkilib is not installed", "nki-library (the public registry's placeholder, no nkilib in it)"]


# --- what the kernel needs beyond the contract ---------------------------------------------------


def signature(kernel_size, stride, dtype="f32"):
    return CallSignature(dtype, dtype, dtype, PoolConfig(kernel_size, stride, (0, 0, 0), "NCDHW", "NCDHW"))


@pytest.mark.parametrize(
    "kernel_size, stride, dtype",
    [((16, 16, 16), (1, 1, 1), "f32"), ((16, 16, 16), (1, 1, 1), "bf16"), ((1, 4, 1024), (1, 1, 1), "f32")],
)
def test_windows_whose_smallest_tile_fits_no_sbuf_partition_are_refused(kernel_size, stride, dtype):
    reason = registry.binding_for("neuron").unsupported(signature(kernel_size, stride, dtype))
    assert reason is not None and "SBUF" in reason and "Trn2/Trn3" in reason


@pytest.mark.parametrize(
    "kernel_size, stride", [((2, 2, 2), (2, 2, 2)), ((3, 3, 3), (1, 1, 1)), ((8, 8, 8), (1, 1, 1)), ((16, 16, 16), (16, 16, 16))]
)
def test_usual_windows_are_accepted(kernel_size, stride):
    assert registry.binding_for("neuron").unsupported(signature(kernel_size, stride)) is None
