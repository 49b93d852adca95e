"""The deviceless XLA:GPU compile of the rewritten bench programs with the CUDA kernels, for an NVIDIA H200.

Needs JAX's CUDA plugin (`make gpu-compile-check` installs it into
.venv-gpu and runs this file there) and the CUDA kernels' library (built by
CMakeLists.txt where nvcc is found); elsewhere these tests skip, saying which is
missing. For every bench case (bench/cases.py FULL_CASES), both jobs and both
explicit strategies, `pool3d_pass.jit` with the CUDA kernels is compiled by
XLA:GPU for a compile-only H200: the compiled program holds the contract's
calls (which XLA:GPU resolves to the library's FFI handlers: an unregistered
target fails this compile), no Triton call and no scatter. The kernels are
SASS in the library, so ptxas does not run here; their register report is
tests/pass_/test_cuda_binding.py's.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from pool3d_pass.bindings.gpu import cuda_library, deviceless

ROOT = Path(__file__).resolve().parents[2]
MISSING = deviceless.missing_wheels() or cuda_library.unavailable()
pytestmark = [pytest.mark.skipif(MISSING is not None, reason=f"deviceless H200 compile of the CUDA kernels skipped: {MISSING}"), pytest.mark.gpu]
JOBS = ("forward + gradient", "gradient only")
# The calls each (strategy, job) compiles to.
EXPECTED = {
    ("indices", "forward + gradient"): {"pool3d.max_pooling_3d_forward", "pool3d.max_pooling_3d_backward_from_indices"},
    ("indices", "gradient only"): {"pool3d.max_pooling_3d_backward_from_input"},
    ("recompute", "forward + gradient"): {"pool3d.max_pooling_3d_backward"},
    ("recompute", "gradient only"): {"pool3d.max_pooling_3d_backward"},
}


def _cases():
    if str(ROOT / "bench") not in sys.path:
        sys.path.insert(0, str(ROOT / "bench"))
    import cases

    return cases


@pytest.fixture(scope="module")
def h200():
    return deviceless.replicated_on(deviceless.h200_devices())


@pytest.fixture(autouse=True)
def cuda_kernels(monkeypatch):
    import pool3d_pass

    monkeypatch.setenv("POOL3D_GPU_IMPL", "cuda")
    monkeypatch.delenv("POOL3D_GPU_INTERPRET", raising=False)
    pool3d_pass.clear_caches()
    yield
    pool3d_pass.clear_caches()


@pytest.mark.parametrize("strategy", ["indices", "recompute"])
@pytest.mark.parametrize("job", JOBS)
def test_rewritten_bench_programs_compile_for_h200_with_the_cuda_kernels(h200, job, strategy):
    import jax
    import jax.numpy as jnp

    import pool3d_pass

    cases = _cases()
    for case in cases.FULL_CASES:
        dtype = jnp.dtype(cases.np_dtype(case.dtype))
        x = jax.ShapeDtypeStruct(case.shape, dtype, sharding=h200)
        g = jax.ShapeDtypeStruct(case.out_shape(), dtype, sharding=h200)
        hlo = pool3d_pass.jit(cases.jax_job(job, cases.pool_fn(case)), strategy=strategy).lower(x, g).compile().as_text()
        targets = set(re.findall(r'custom_call_target="([^"]+)"', hlo))
        assert EXPECTED[(strategy, job)] <= targets, (case.name, sorted(targets))
        assert not any("triton" in t for t in targets), (case.name, sorted(targets))
        assert not re.search(r"\s(scatter|select-and-scatter)\(", hlo), case.name
