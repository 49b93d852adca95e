"""The gpu binding lowered for cuda on a CPU machine: Triton calls, their IR, the splice, the opt-in, refusals.

No GPU and no CUDA wheels needed: Pallas' Triton backend lowers for "cuda"
with plain jaxlib (JAX >= 0.11 through an abstract H200 device, see
bindings/gpu/calls.py). The Triton IR inside each call is decoded and checked
for what the NaN rule forbids (`maxnumf` and friends drop NaN). Every
positive fixture is rewritten for the gpu target; the numerics of those
programs run in tests/bindings/gpu/test_gpu_fixtures.py (interpret mode).
"""

from __future__ import annotations

import re
import sys
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pool3d_pass
from pool3d_pass.bindings import registry
from pool3d_pass.bindings.gpu import binding as gpu_binding
from pool3d_pass.bindings.gpu import calls
from pool3d_pass.bindings.gpu.pallas import kernels
from pool3d_pass.bindings.registry import CallSignature
from pool3d_pass.contract.pool_config import PoolConfig
from pool3d_pass.integration import module_rewrite
from pool3d_pass.rewriting.strategy import preferred_strategy

from corpus import ENTRIES, FIXTURES

# These tests lower the Pallas kernels directly, not through the pass (which logs JAX's
# deprecation of its Triton backend once instead: tests/bindings/gpu/test_gpu_auto.py).
pytestmark = [pytest.mark.gpu, pytest.mark.filterwarnings("ignore:The Pallas Triton backend is deprecated:DeprecationWarning")]
POSITIVE = [e for e in ENTRIES if not e["negative"]]
TRITON = "__gpu$xla.gpu.triton"
NAN_DROPPING = ("maxnumf", "minnumf", "maximumf", "minimumf")  # Triton's lax.max/min: never in a kernel
ATTRS = dict(kernel_size=(3, 3, 3), stride=(2, 2, 2), padding=(1, 1, 1))


@pytest.fixture(autouse=True)
def not_interpreted(monkeypatch):
    monkeypatch.delenv(calls.INTERPRET_ENV, raising=False)
    # The Pallas kernels, also where the CUDA library is built (tests/bindings/gpu/test_cuda_binding.py
    # covers that one); the pass caches lowerings, so each switch clears them.
    monkeypatch.setenv("POOL3D_GPU_IMPL", "pallas")
    pool3d_pass.clear_caches()
    yield
    pool3d_pass.clear_caches()


def lowered(fn, *avals):
    return jax.jit(fn).trace(*avals).lower(lowering_platforms=("cuda",)).compiler_ir("stablehlo")


def triton_calls(module):
    """(backend_config dict, decoded Triton IR text) of every Triton call in `module`."""
    from jax._src.interpreters import mlir
    from jax._src.lib.mlir import ir
    from jax._src.lib.triton import dialect as tt_dialect

    found = []

    def visit(op):
        if op.name == "stablehlo.custom_call" and ir.StringAttr(op.attributes["call_target_name"]).value == TRITON:
            found.append(op.attributes["mhlo.backend_config"])
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    context = mlir.JaxIrContext()
    context.append_dialect_registry(mlir.upstream_dialects)
    tt_dialect.register_dialect(context)
    context.load_all_available_dialects()
    out = []
    for config in found:
        fields = {name: config[name] for name in ("name", "grid_x", "grid_y", "grid_z", "num_warps")}
        fields = {k: (ir.StringAttr(v).value if k == "name" else ir.IntegerAttr(v).value) for k, v in fields.items()}
        with context:
            text = str(ir.Module.parse(ir.StringAttr(config["ir"]).value_bytes))
        out.append((fields, text))
    return out


def specs(layout, dtype):
    x_shape = (2, 3, 9, 8, 7) if layout == "NCDHW" else (2, 9, 8, 7, 3)
    y_shape = (2, 3, 5, 4, 4) if layout == "NCDHW" else (2, 5, 4, 4, 3)
    x, y = jax.ShapeDtypeStruct(x_shape, dtype), jax.ShapeDtypeStruct(y_shape, dtype)
    return x, y, jax.ShapeDtypeStruct(y_shape, jnp.int16)


CALLS = {
    "forward": (lambda a: lambda x: calls.max_pooling_3d_forward(x, **a), "x", ["pool3d_gpu_forward"]),
    "forward_output": (lambda a: lambda x: calls.max_pooling_3d_forward_output(x, **a), "x",
                       ["pool3d_gpu_forward_output"]),
    "backward_from_indices": (
        lambda a: lambda g, i: calls.max_pooling_3d_backward_from_indices(g, i, input_shape=X_SHAPES[a["data_format"]], **a),
        "yi", ["pool3d_gpu_gather"]),
    "backward": (lambda a: lambda g, x, y: calls.max_pooling_3d_backward(g, x, y, **a), "yxy",
                 ["pool3d_gpu_select", "pool3d_gpu_gather"]),
    "backward_from_input": (lambda a: lambda g, x: calls.max_pooling_3d_backward_from_input(g, x, **a), "yx",
                            ["pool3d_gpu_indices", "pool3d_gpu_gather"]),
}
X_SHAPES = {"NCDHW": (2, 3, 9, 8, 7), "NDHWC": (2, 9, 8, 7, 3)}


@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16, jnp.float16], ids=["f32", "bf16", "f16"])
@pytest.mark.parametrize("call", sorted(CALLS))
def test_each_call_lowers_to_triton_kernels(call, dtype, layout):
    make, operands, names = CALLS[call]
    x, y, i = specs(layout, dtype)
    avals = [{"x": x, "y": y, "i": i}[c] for c in operands]
    module = lowered(make(dict(ATTRS, data_format=layout)), *avals)
    text = str(module)
    assert "stablehlo.select_and_scatter" not in text and "stablehlo.scatter" not in text
    found = triton_calls(module)
    assert [fields["name"] for fields, _ in found] == names
    for fields, ir_text in found:
        assert f"tt.func public @{fields['name']}" in ir_text
        assert not [op for op in NAN_DROPPING if op in ir_text], f"{fields['name']}: a NaN-dropping max/min"
        assert fields["num_warps"] == kernels.NUM_WARPS
        assert 1 <= fields["grid_x"] <= kernels.MAX_GRID_X and fields["grid_y"] == fields["grid_z"] == 1
        assert "tt.load" in ir_text and "tt.store" in ir_text and "tt.atomic" not in ir_text  # gather, no atomics


def test_int64_offsets_where_forced(monkeypatch):
    x, y, _ = specs("NCDHW", jnp.float32)
    narrow = [t for _, t in triton_calls(lowered(CALLS["backward_from_input"][0](dict(ATTRS, data_format="NCDHW")), y, x))]
    monkeypatch.setattr(kernels, "needs_wide_offsets", lambda *sizes: True)
    wide = [t for _, t in triton_calls(lowered(CALLS["backward_from_input"][0](dict(ATTRS, data_format="NCDHW")), y, x))]
    assert all("arith.divsi" in t and "i64" not in re.sub(r"!tt\.ptr<[^>]*>", "", t) for t in narrow)
    assert all(re.search(r"arith\.(divsi|remsi) .*: tensor<\d+xi64>", t) for t in wide)


def test_grids_cover_the_tensors():
    x, y, _ = specs("NDHWC", jnp.float32)
    (fields, _), = triton_calls(lowered(CALLS["forward"][0](dict(ATTRS, data_format="NDHWC")), x))
    assert fields["grid_x"] == -(-int(np.prod(y.shape)) // kernels.BLOCK)


# --- the binding in the pass --------------------------------------------------


def test_gpu_is_registered_for_what_jax_calls_cuda():
    binding = registry.binding_for("gpu")
    assert binding.lowering_platform == "cuda" and preferred_strategy(binding) == "indices"
    assert set(binding.functions) == set(pool3d_pass.contract.TARGETS)
    assert binding.calibration.prior is gpu_binding.prior and binding.calibration.verify_first


@pytest.mark.parametrize("entry", POSITIVE, ids=[e["name"] for e in POSITIVE])
def test_every_positive_fixture_becomes_triton_calls(entry):
    new_text, report = pool3d_pass.rewrite_text((FIXTURES / entry["file"]).read_text(), target="gpu",
                                                strategy="indices")
    assert report.rewritten == entry["expected_pool_gradients"], [m.reason for m in report.missed]
    assert "stablehlo.select_and_scatter" not in new_text
    assert "@pool3d." not in new_text, "a neutral call is left"
    # one gather per gradient, and a forward (shared by its gradients) or a fused selection
    assert new_text.count(f"custom_call @{TRITON}") >= entry["expected_pool_gradients"] + 1


def test_auto_leaves_gpu_programs_measured_slower_unchanged_with_a_remark():
    # NCDHW f32 k3 s2 p1, small: the stored H200 run measured the Pallas kernels slower than XLA:GPU
    text = (FIXTURES / "jax_ncdhw_k3s2_p1_f32.mlir").read_text()
    new_text, report = pool3d_pass.rewrite_text(text, target="gpu")
    assert report.rewritten == 0 and "stablehlo.select_and_scatter" in new_text and TRITON not in new_text
    # the gradient, and the forward max pool (which an inference rewrite would take)
    prefix = ("gpu binding: XLA:GPU measured faster for NCDHW f32 overlapping windows, small input (XLA time / "
              "kernel time {}x on NVIDIA H200")
    reasons = sorted(m.reason for m in report.missed)  # the gradient's jobs 0.78x, the inference job's 0.90x
    assert len(reasons) == 2
    assert reasons[0].startswith(prefix.format("0.78")) and reasons[1].startswith(prefix.format("0.90"))
    _, recompute = pool3d_pass.rewrite_text(text, target="gpu", strategy="recompute")
    assert recompute.rewritten == 1

def test_auto_leaves_an_inference_forward_unchanged():
    """Guard for call kinds added later (an inference forward call): auto still emits no gpu kernel."""
    from jax import lax

    def pool(x):
        return lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 2, 2, 2), (1, 1, 2, 2, 2), "VALID")

    text = jax.jit(pool).lower(jax.ShapeDtypeStruct((1, 2, 4, 4, 4), jnp.float32)).as_text()
    new_text, report = pool3d_pass.rewrite_text(text, target="gpu")
    assert TRITON not in new_text and report.rewritten == 0


def test_the_compile_hook_routes_platform_gpu(caplog):
    from jax import lax

    def grad(x):
        pool = lambda v: lax.reduce_window(v, -jnp.inf, lax.max, (1, 1, 2, 2, 2), (1, 1, 2, 2, 2), "VALID")
        return jax.grad(lambda v: jnp.sum(pool(v).astype(jnp.float32) ** 2))(x)

    # bf16 NCDHW k2 s2: measured slower than XLA:GPU, so auto leaves it (bindings/gpu/measured.py)
    module = jax.jit(grad).trace(jax.ShapeDtypeStruct((1, 2, 4, 4, 4), jnp.bfloat16)).lower(
        lowering_platforms=("cuda",)).compiler_ir("stablehlo")
    assert module_rewrite.rewrite_for_platform(module, "gpu") is module
    rewritten = module_rewrite.rewrite_for_platform(module, "gpu", options=pool3d_pass.PassOptions(strategy="indices"))
    assert rewritten is not module and TRITON in str(rewritten)
    assert "select_and_scatter" in str(module)  # JAX's cached module is untouched


def test_refusals_are_named():
    k2 = PoolConfig((2, 2, 2), (2, 2, 2), (0, 0, 0), "NCDHW")
    base = dict(grad_output_type="f32", input_type="f32", output_type="f32", pool=k2)
    refuse = registry.binding_for("gpu").unsupported
    assert refuse(CallSignature(**base)) is None
    assert "not f64" in refuse(CallSignature(**{**base, "grad_output_type": "f64", "input_type": "f64",
                                                "output_type": "f64"}))
    assert "differ in element type" in refuse(CallSignature(**{**base, "output_type": "bf16"}))
    assert "> 4096" in refuse(CallSignature(**{**base, "pool": PoolConfig((17, 17, 17), (2, 2, 2), (0, 0, 0))}))


def test_rocm_is_refused(monkeypatch):
    bridge = sys.modules["jax._src.xla_bridge"]
    fake = types.SimpleNamespace(platform="gpu", platform_version="rocm 6.4")
    monkeypatch.setattr(bridge, "_backends", {"rocm": fake}, raising=False)
    with pytest.raises(ImportError, match="ROCm"):
        registry.binding_for("gpu").require()


def test_several_devices_get_the_partitionable_calls():
    # bindings/gpu/partitioned.py; tests/integration/test_partitioned.py runs them on host devices
    from pool3d_pass.rewriting.strategy import binding_refusal

    mesh = types.SimpleNamespace(size=8)
    pool = PoolConfig((2, 2, 2), (2, 2, 2), (0, 0, 0), "NCDHW", "NCDHW")
    gpu = registry.binding_for("gpu")
    for call in CALLS:
        assert binding_refusal(gpu, "gpu", CallSignature("f32", "f32", "f32", pool, call), mesh) is None
        assert gpu.function(call, partitioned=True).__name__ == f"max_pooling_3d_{call}"
