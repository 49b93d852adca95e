"""The gpu binding's CUDA kernels without a GPU: which implementation serves, the build, registration, lowering.

Where `pool3d_pass/bindings/gpu/cuda/_cuda_kernels.so` is built (CMakeLists.txt
builds it when nvcc is found), the gpu binding's calls lower for cuda to exactly
the contract's custom calls (`pool3d.max_pooling_3d_*`, typed FFI), with no
Triton call: every positive fixture, rewritten for `--target=gpu`, holds
only those; a `jax.export` of such a program serializes them and nothing
else. Without the library those tests skip, saying so; the Pallas kernels
then serve (tests/bindings/gpu/test_gpu_lowering.py). The deviceless compile of
the rewritten bench programs with the CUDA kernels is in
tests/bindings/gpu/test_cuda_deviceless.py; the kernels' per-element code is
checked against the CPU kernels in tests/bindings/gpu/test_cuda_elements.py.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import re
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

import pool3d_pass
from pool3d_pass.bindings.gpu import calls, implementation
from pool3d_pass.bindings.gpu.cuda import build as cuda_build
from pool3d_pass.bindings.gpu.cuda import library as cuda_library
from pool3d_pass.contract import TARGETS

from corpus import ENTRIES, FIXTURES

# These tests lower the Pallas kernels directly, not through the pass (which logs JAX's
# deprecation of its Triton backend once instead: tests/bindings/gpu/test_gpu_auto.py).
pytestmark = [pytest.mark.gpu, pytest.mark.filterwarnings("ignore:The Pallas Triton backend is deprecated:DeprecationWarning")]

POSITIVE = [e for e in ENTRIES if not e["negative"]]
UNAVAILABLE = cuda_library.unavailable()
needs_library = pytest.mark.skipif(UNAVAILABLE is not None, reason=f"CUDA kernels not tested: {UNAVAILABLE}")
NVCC = cuda_build.find_nvcc()
CONTRACT_CALL = re.compile(r"stablehlo\.custom_call @([\w.$]+)")
ATTRS = dict(kernel_size=(3, 3, 3), stride=(2, 2, 2), padding=(1, 1, 1))


@pytest.fixture(autouse=True)
def cuda_chosen(monkeypatch):
    """The CUDA kernels (where built), lowered for cuda; pool3d's lowering caches cleared on each switch."""
    monkeypatch.delenv(calls.INTERPRET_ENV, raising=False)
    monkeypatch.setenv(implementation.IMPL_ENV, "cuda")
    pool3d_pass.clear_caches()
    yield
    pool3d_pass.clear_caches()


def custom_call_targets(text: str) -> list[str]:
    return CONTRACT_CALL.findall(text)


# --- which implementation serves ------------------------------------------------


def test_pallas_when_asked(monkeypatch):
    monkeypatch.setenv(implementation.IMPL_ENV, "pallas")
    assert implementation.implementation() == "pallas"


def test_interpret_mode_keeps_pallas_under_auto(monkeypatch):
    monkeypatch.setenv(implementation.IMPL_ENV, "auto")
    monkeypatch.setenv(calls.INTERPRET_ENV, "1")
    assert implementation.implementation() == "pallas"


def test_a_missing_library_falls_back_to_pallas_with_a_warning(monkeypatch, tmp_path, caplog):
    monkeypatch.setenv(cuda_library.LIBRARY_ENV, str(tmp_path / "absent.so"))
    assert "not built" in cuda_library.unavailable()
    with caplog.at_level(logging.WARNING, logger="pool3d_pass"):
        assert implementation.implementation() == "pallas"
    assert any("gpu_kernels=cuda, but" in r.getMessage() and "not built" in r.getMessage() for r in caplog.records)
    monkeypatch.setenv(implementation.IMPL_ENV, "auto")
    assert implementation.implementation() == "pallas"
    assert implementation.describe().startswith("Pallas kernels (the CUDA kernels' library is not built")


def test_a_library_that_does_not_load_falls_back(monkeypatch, tmp_path):
    broken = tmp_path / "broken.so"
    broken.write_bytes(b"not an ELF file")
    monkeypatch.setenv(cuda_library.LIBRARY_ENV, str(broken))
    assert "does not load" in cuda_library.unavailable()
    with pytest.raises(ImportError, match="does not load"):
        cuda_library.load()
    assert implementation.implementation() == "pallas"
    # and the binding's calls still lower (by the Pallas kernels: Triton calls)
    x = jax.ShapeDtypeStruct((1, 2, 6, 6, 6), jnp.float32)
    text = jax.jit(lambda x: calls.max_pooling_3d_forward(x, **ATTRS)).trace(x).lower(
        lowering_platforms=("cuda",)).as_text()
    assert custom_call_targets(text) == ["__gpu$xla.gpu.triton"]


def test_a_gpu_older_than_compute_capability_8_is_refused_at_load(monkeypatch):
    """On a V100 or a T4 every launch would fail: the library says so at load, and the Pallas kernels serve."""
    monkeypatch.setattr(cuda_library, "compute_capabilities", lambda: (("Tesla V100-SXM2-16GB", 7, 0),))
    reason = cuda_library.capability_problem()
    assert reason == ("the CUDA kernels need a GPU of compute capability 8.0 or newer; Tesla V100-SXM2-16GB is 7.0 "
                      "(the Pallas kernels, or XLA, serve instead)")
    if cuda_library.is_built() and cuda_library._load(cuda_library.library_path())[0] is not None:
        assert cuda_library.unavailable() == reason or cuda_library.driver_problem(cuda_library.load())
        assert implementation.implementation() == "pallas"
    monkeypatch.setattr(cuda_library, "compute_capabilities", lambda: (("NVIDIA A100", 8, 0), ("NVIDIA H200", 9, 0)))
    assert cuda_library.capability_problem() is None
    monkeypatch.setattr(cuda_library, "compute_capabilities", lambda: ())  # no driver, no GPU: nothing to refuse
    assert cuda_library.capability_problem() is None


def test_a_cuda_12_driver_loads_the_cuda_12_build_where_the_package_holds_one(monkeypatch, tmp_path):
    monkeypatch.delenv(cuda_library.LIBRARY_ENV, raising=False)
    here = os.path.dirname(cuda_library.__file__)
    cuda12 = os.path.join(here, cuda_library.CUDA12_LIBRARY_NAME)
    cuda13 = os.path.join(here, cuda_library.LIBRARY_NAME)
    exists = os.path.isfile
    monkeypatch.setattr(cuda_library.os.path, "isfile", lambda p: p == cuda12 or exists(p))
    for driver, want in ((12080, cuda12), (13000, cuda13), (None, cuda13)):
        monkeypatch.setattr(cuda_library, "driver_version", lambda d=driver: d)
        assert cuda_library.library_path() == want, driver
    monkeypatch.setattr(cuda_library.os.path, "isfile", lambda p: p != cuda12 and exists(p))  # no CUDA 12 build
    monkeypatch.setattr(cuda_library, "driver_version", lambda: 12080)
    assert cuda_library.library_path() == cuda13  # (then unavailable() names the driver: test below)


def test_an_unknown_choice_in_the_environment_is_refused_naming_it(monkeypatch):
    monkeypatch.setenv(implementation.IMPL_ENV, "triton")
    with pytest.raises(ValueError, match=r"POOL3D_GPU_IMPL='triton' \(the default of gpu_kernels\)"):
        implementation.requested()


def test_use_switches_and_clears_caches(monkeypatch):
    implementation.use("pallas")
    assert implementation.implementation() == "pallas"
    with pytest.raises(ValueError, match="one of"):
        implementation.use("mosaic")


# --- the build ------------------------------------------------------------------


def test_build_without_nvcc_is_skipped_cleanly(monkeypatch, tmp_path):
    monkeypatch.setenv("NVCC", str(tmp_path / "no-nvcc"))
    assert cuda_build.find_nvcc() is None
    built, why = cuda_build.build(str(tmp_path / "lib.so"), str(tmp_path))
    assert not built and "no nvcc" in why and not (tmp_path / "lib.so").exists()
    monkeypatch.setenv(cuda_build.SKIP_ENV, "0")
    assert cuda_build.build(str(tmp_path / "lib.so"), str(tmp_path)) == (False, f"{cuda_build.SKIP_ENV}=0")


def test_the_build_step_reports_a_missing_nvcc_and_succeeds(monkeypatch, tmp_path, capsys):
    """What CMakeLists.txt runs: asked to build, without nvcc it says why and exits 0, so the install goes on."""
    monkeypatch.setenv("NVCC", str(tmp_path / "no-nvcc"))
    monkeypatch.setenv(cuda_build.SKIP_ENV, "1")
    monkeypatch.delenv(cuda_build.REQUIRE_ENV, raising=False)
    assert cuda_build.main(["--output", str(tmp_path / "lib.so"), "--ffi-include", str(tmp_path)]) == 0
    assert "not built (no nvcc found" in capsys.readouterr().out and not (tmp_path / "lib.so").exists()
    assert cuda_build.main(["--depends"]) == 0
    assert set(capsys.readouterr().out.split()) == set(cuda_build.depends())


def test_cmake_builds_the_library_through_cuda_build_only():
    """nvcc's discovery and flags live in cuda/build.py alone: CMakeLists.txt runs it, with no nvcc line of its own."""
    cmake = (Path(cuda_build.__file__).resolve().parents[4] / "CMakeLists.txt").read_text(encoding="utf-8")
    assert '"${cuda_dir}/build.py"' in cmake and "--output" in cmake
    assert "gencode" not in cmake and "sm_90" not in cmake and "enable_language(CUDA" not in cmake


def test_the_build_targets_a100_and_hopper_with_ptx_and_static_cudart():
    cmd = " ".join(cuda_build.command("nvcc", "/ffi", "/out.so"))
    for flag in ("arch=compute_80,code=sm_80", "arch=compute_90a,code=sm_90a", "arch=compute_90,code=compute_90",
                 "-cudart static", "-Xptxas -v"):
        assert flag in cmd


def _build_report(tmp_path) -> str:
    """nvcc's report of the library: the one its build left beside it where that is newer than every
    source, else a fresh build's (minutes)."""
    library = cuda_library.library_path()
    report = cuda_build.report_path(library)
    if os.path.exists(report) and os.path.exists(library):
        newest_source = max(os.path.getmtime(f) for f in cuda_build.depends())
        if os.path.getmtime(report) >= newest_source:
            return Path(report).read_text(encoding="utf-8")
    built, log = cuda_build.build(str(tmp_path / cuda_build.LIBRARY_NAME), jax.ffi.include_dir(), NVCC)
    assert built, log
    return log


# Per specialised class, layout and element type: non-overlapping classes WindowKernel (mode 0), GatherKernel
# and FusedKernel (2 modes) at their vector width and at one lane (V = 1); overlapping classes WindowKernel
# (modes 0, 2, 3) and GatherKernel, NCDHW's window kernels at two widths (one and two vectors a row), those with
# ragged NCDHW rows (k3 s2, k2 s1 without padding) at two vectors only; every overlapping class's four NDHWC
# kernels at half a vector too for the two 16-bit types (launch_plan.h's HalfVectors). The generic kernels
# (window 3 modes, gather, fused 2 modes) per type and offset width.
SPECIALISED = {"non-overlapping": 2, "overlapping": 3, "ragged": 2}
KERNELS_PER_ARCH = (SPECIALISED["non-overlapping"] * 2 * 4 * 2 + SPECIALISED["overlapping"] * (4 * 2 + 3)
                    + SPECIALISED["ragged"] * (4 * 2)) * 3 + 3 * 2 * 6 \
    + (SPECIALISED["overlapping"] + SPECIALISED["ragged"]) * 4 * 2


@pytest.mark.skipif(NVCC is None, reason="no nvcc ($NVCC, PATH, $CUDA_HOME/bin, nvidia-cuda-nvcc wheels): ptxas report not checked")
def test_ptxas_reports_every_kernel_without_spills(tmp_path):
    """Every kernel, SASS for sm_80 and sm_90a: no spill, no stack frame (no local memory), at most 128 registers
    (kernels.cu's __launch_bounds__: every kernel launches with 512 threads a block)."""
    log = _build_report(tmp_path)
    sections = re.split(r"(?=Compiling entry function)", log)
    per_arch: dict[str, int] = {}
    for section in sections[1:]:
        name = re.search(r"Compiling entry function '(\w+)'", section).group(1)
        assert re.search(r"(WindowKernel|GatherKernel|FusedKernel)", name), name
        arch = re.search(r"for '(sm_\w+)'", section).group(1)
        frame = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", section)
        registers = re.search(r"Used (\d+) registers", section)
        assert frame and registers, section
        assert frame.groups() == ("0", "0", "0"), section
        assert int(registers.group(1)) <= 128  # __launch_bounds__(512, 1): two blocks of 256 fit an SM
        per_arch[arch] = per_arch.get(arch, 0) + 1
    assert per_arch == {"sm_80": KERNELS_PER_ARCH, "sm_90a": KERNELS_PER_ARCH}, per_arch


# --- registration and lowering (the library built) ---------------------------------


@needs_library
def test_import_registers_every_handler_for_cuda():
    from jaxlib import xla_client

    assert "gpu" not in pool3d_pass.KERNEL_REGISTRATION_FAILURES
    assert cuda_library.is_registered()
    # Without JAX's CUDA plugin the handlers wait in jaxlib's pending list for platform CUDA.
    pending = {name for name, *_ in getattr(xla_client, "_custom_callback", {}).get("CUDA", [])}
    if "CUDA" not in getattr(xla_client, "_custom_callback_handler", {}):
        assert set(TARGETS.values()) <= {n.decode() if isinstance(n, bytes) else n for n in pending}


def _lowered(fn, *avals) -> str:
    return jax.jit(fn).trace(*avals).lower(lowering_platforms=("cuda",)).as_text()


@needs_library
@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16, jnp.float16], ids=["f32", "bf16", "f16"])
def test_each_call_lowers_to_its_contract_call(layout, dtype):
    x_shape = (2, 3, 9, 8, 7) if layout == "NCDHW" else (2, 9, 8, 7, 3)
    y_shape = (2, 3, 5, 4, 4) if layout == "NCDHW" else (2, 5, 4, 4, 3)
    x, y = jax.ShapeDtypeStruct(x_shape, dtype), jax.ShapeDtypeStruct(y_shape, dtype)
    i = jax.ShapeDtypeStruct(y_shape, jnp.int16)
    attrs = dict(ATTRS, data_format=layout)
    cases = {
        "forward": (lambda x: calls.max_pooling_3d_forward(x, **attrs), (x,)),
        "forward_output": (lambda x: calls.max_pooling_3d_forward_output(x, **attrs), (x,)),
        "backward_from_indices": (
            lambda g, i: calls.max_pooling_3d_backward_from_indices(g, i, input_shape=x_shape, **attrs), (y, i)),
        "backward": (lambda g, x, y: calls.max_pooling_3d_backward(g, x, y, **attrs), (y, x, y)),
        "backward_from_input": (lambda g, x: calls.max_pooling_3d_backward_from_input(g, x, **attrs), (y, x)),
    }
    for kind, (fn, avals) in cases.items():
        text = _lowered(fn, *avals)
        assert custom_call_targets(text) == [TARGETS[kind]], (kind, text)
        assert f'data_format = "{layout}"' in text and "kernel_size = dense<3>" in text


@needs_library
@pytest.mark.parametrize("strategy", ["indices", "recompute"])
@pytest.mark.parametrize("entry", POSITIVE, ids=[e["name"] for e in POSITIVE])
def test_every_positive_fixture_becomes_contract_calls(entry, strategy):
    text, report = pool3d_pass.rewrite_text((FIXTURES / entry["file"]).read_text(), target="gpu", strategy=strategy)
    assert report.rewritten == entry["expected_pool_gradients"], [m.reason for m in report.missed]
    targets = custom_call_targets(text)
    assert targets and set(targets) <= set(TARGETS.values()), sorted(set(targets))
    assert "select_and_scatter" not in text and "triton" not in text


@needs_library
def test_jax_export_holds_only_the_contract_calls():
    """An exported rewritten GPU program: the contract's calls, no kernel IR; it round-trips."""
    from jax import export

    def step(x, g):
        y, indices = calls.max_pooling_3d_forward(x, **ATTRS)
        dx = calls.max_pooling_3d_backward_from_indices(g, indices, input_shape=x.shape, **ATTRS)
        return jnp.sum(y), dx + calls.max_pooling_3d_backward_from_input(g, x, **ATTRS)

    x = jax.ShapeDtypeStruct((2, 4, 9, 9, 9), jnp.bfloat16)
    g = jax.ShapeDtypeStruct((2, 4, 5, 5, 5), jnp.bfloat16)
    checks = [export.DisabledSafetyCheck.custom_call(target) for target in TARGETS.values()]
    exported = export.export(jax.jit(step), platforms=("cuda",), disabled_checks=checks)(x, g)
    restored = [exported]
    if importlib.util.find_spec("flatbuffers") is not None:  # JAX's serialization needs it
        restored.append(export.deserialize(exported.serialize()))
    for program in restored:
        text = program.mlir_module()
        assert sorted(set(custom_call_targets(text))) == sorted(
            TARGETS[k] for k in ("forward", "backward_from_indices", "backward_from_input"))
        assert "triton" not in text and program.platforms == ("cuda",)


def test_each_rewrite_remark_names_the_kernels(monkeypatch, tmp_path):
    text = (FIXTURES / "jax_ncdhw_k3s2_p1_bf16.mlir").read_text()
    monkeypatch.setenv(implementation.IMPL_ENV, "pallas")
    _, report = pool3d_pass.rewrite_text(text, target="gpu", strategy="indices")
    assert report.rewrites and all(r.summary.endswith(", gpu binding: Pallas kernels (asked for)") for r in report.rewrites)
    monkeypatch.setenv(implementation.IMPL_ENV, "cuda")
    monkeypatch.setenv(cuda_library.LIBRARY_ENV, str(tmp_path / "absent.so"))
    pool3d_pass.clear_caches()
    _, report = pool3d_pass.rewrite_text(text, target="gpu", strategy="indices")
    assert all(r.summary.endswith("gpu binding: Pallas kernels (CUDA library not built)") for r in report.rewrites)
    _, report = pool3d_pass.rewrite_text(text, target="cpu")
    assert report.rewrites and not any("binding:" in r.summary for r in report.rewrites)  # the CPU binding says nothing


@needs_library
def test_the_remark_says_cuda_where_the_library_serves():
    text = (FIXTURES / "jax_ncdhw_k3s2_p1_bf16.mlir").read_text()
    _, report = pool3d_pass.rewrite_text(text, target="gpu", strategy="recompute")
    assert report.rewrites and all(r.summary.endswith(", gpu binding: CUDA kernels") for r in report.rewrites)
