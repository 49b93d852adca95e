"""The deviceless XLA:GPU compile of the rewritten bench programs with the CUDA kernels, for an NVIDIA H200.

Needs JAX's CUDA plugin (`make gpu-compile-check` installs it into
.venv-gpu and runs this file there) and the CUDA kernels' library (built by
CMakeLists.txt where nvcc is found); elsewhere these tests skip, saying which is
missing. For every bench case (cases/pooling.py FULL_CASES), both jobs and both
explicit strategies, `pool3d_pass.jit` with the CUDA kernels is compiled by
XLA:GPU for a compile-only H200: the compiled program holds the contract's
calls (which XLA:GPU resolves to the library's FFI handlers: an unregistered
target fails this compile), no Triton call and no scatter. The kernels are
SASS in the library, so ptxas does not run here; their register report is
tests/bindings/gpu/test_cuda_binding.py's.
"""

from __future__ import annotations

import re

import pytest

from checks import deviceless
from pool3d_pass.bindings.gpu.cuda import library as cuda_library

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
    from cases import pooling

    for case in pooling.FULL_CASES:
        dtype = jnp.dtype(pooling.np_dtype(case.dtype))
        x = jax.ShapeDtypeStruct(case.shape, dtype, sharding=h200)
        g = jax.ShapeDtypeStruct(case.out_shape(), dtype, sharding=h200)
        hlo = pool3d_pass.jit(pooling.jax_job(job, pooling.pool_fn(case)), strategy=strategy).lower(x, g).compile().as_text()
        targets = set(re.findall(r'custom_call_target="([^"]+)"', hlo))
        assert EXPECTED[(strategy, job)] <= targets, (case.name, sorted(targets))
        assert not any("triton" in t for t in targets), (case.name, sorted(targets))
        assert not re.search(r"\s(scatter|select-and-scatter)\(", hlo), case.name


# --- programs compiled for several H200s (bindings/partitioned.py) ---------------------------------------

def _max_pool(x):
    from jax import lax

    return lax.reduce_window(x, -float("inf"), lax.max, (1, 1, 3, 3, 3), (1, 1, 2, 2, 2),
                             ((0, 0), (0, 0), (1, 1), (1, 1), (1, 1)))


def _pool_grad(x):
    import jax
    import jax.numpy as jnp

    return jax.grad(lambda x: jnp.sum(_max_pool(x) ** 2))(x)


def _bare_pool_grad(x):
    import jax
    import jax.numpy as jnp

    return jax.grad(lambda x: jnp.sum(_max_pool(x)))(x)


def _forward_and_grad(x):
    import jax

    y, vjp = jax.vjp(_max_pool, x)
    return y, vjp(2 * y - 1)[0]


SHAPE, POOLED = (8, 4, 16, 16, 16), (8, 4, 8, 8, 8)
# (strategy, program, the calls it compiles to, whether each call's operands have the input's shape)
SHARDED_PROGRAMS = {
    "backward": ("recompute", _pool_grad, {"backward": [False, True, False]}),
    "forward_and_backward_from_indices": ("indices", _forward_and_grad,
                                          {"forward": [True], "backward_from_indices": [False, False]}),
    "backward_from_input": ("indices", _bare_pool_grad, {"backward_from_input": [False, True]}),
    "forward_output": ("indices", _max_pool, {"forward_output": [True]}),
}
COLLECTIVES = ("all-gather", "all-to-all", "collective-permute", "all-reduce", "reduce-scatter")


def _collectives(hlo: str) -> dict[str, int]:
    return {name: len(re.findall(rf"\b{name}(-start)?\(", hlo)) for name in COLLECTIVES}


@pytest.fixture(params=["shardy", "gspmd"])
def partitioner(request):
    import jax

    jax.config.update("jax_use_shardy_partitioner", request.param == "shardy")
    jax.clear_caches()
    yield request.param
    jax.config.update("jax_use_shardy_partitioner", True)
    jax.clear_caches()


@pytest.mark.parametrize("gpus", [2, 4])
@pytest.mark.parametrize("program", list(SHARDED_PROGRAMS))
def test_batch_sharded_programs_run_one_kernel_call_per_gpu_on_its_shard(gpus, program, partitioner):
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    import pool3d_pass
    from oracles.compiled_hlo import kernel_operand_shapes

    strategy, function, calls = SHARDED_PROGRAMS[program]
    mesh = Mesh(np.array(deviceless.h200_devices(gpus)), ("data",))
    x = jax.ShapeDtypeStruct(SHAPE, jnp.float32, sharding=NamedSharding(mesh, PartitionSpec("data")))
    hlo = pool3d_pass.jit(function, strategy=strategy).lower(x).compile().as_text()
    shapes = kernel_operand_shapes(hlo)
    assert set(shapes) == set(calls), sorted(shapes)
    for kind, operands in calls.items():
        (one,) = shapes[kind]  # one call in the per-device program
        expected = [[SHAPE[0] // gpus, *(SHAPE if is_input else POOLED)[1:]] for is_input in operands]
        assert one == expected, (kind, one)
    assert not any(_collectives(hlo).values()), _collectives(hlo)  # no all-gather of the batch, nothing else
    assert not re.search(r"\s(scatter|select-and-scatter)\(", hlo)


def _shard_map_programs(devices):
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    line = Mesh(np.array(devices), ("b",))
    grid = Mesh(np.array(devices).reshape(2, 2), ("b", "m"))
    full = jax.shard_map(_forward_and_grad, mesh=line, in_specs=P("b"), out_specs=P("b"))
    partial = jax.shard_map(_forward_and_grad, mesh=grid, in_specs=P("b"), out_specs=P("b"),
                            axis_names=frozenset({"b"}))
    return {
        "full_manual": (full, jax.ShapeDtypeStruct(SHAPE, jnp.float32, sharding=NamedSharding(line, P("b")))),
        "partially_manual": (partial, jax.ShapeDtypeStruct(SHAPE, jnp.float32, sharding=NamedSharding(grid, P("b")))),
        "pmap": (jax.pmap(_forward_and_grad, devices=list(devices)),
                 jax.ShapeDtypeStruct((len(devices), SHAPE[0] // len(devices), *SHAPE[1:]), jnp.float32)),
    }


@pytest.mark.parametrize("program", ["full_manual", "partially_manual", "pmap"])
def test_shard_map_and_pmap_bodies_get_the_single_gpu_kernels(program):
    import jax

    import pool3d_pass
    from oracles.compiled_hlo import kernel_operand_shapes

    function, x = _shard_map_programs(deviceless.h200_devices(4))[program]
    plain = jax.jit(function).lower(x).compile().as_text()
    with pool3d_pass.enabled(strategy="indices"):  # (a pmap is compiled through enable(), as users run it)
        hlo = jax.jit(function).lower(x).compile().as_text()
    shapes = kernel_operand_shapes(hlo)
    assert set(shapes) == {"forward", "backward_from_indices"}, sorted(shapes)
    assert [len(calls) for calls in shapes.values()] == [1, 1]
    manual_ways = 2 if program == "partially_manual" else 4  # the batch over the manual axes only
    assert shapes["forward"] == [[[SHAPE[0] // manual_ways, *SHAPE[1:]]]], shapes
    assert _collectives(hlo) == _collectives(plain)


# --- XLA's command buffers (kernels.cu's traits) ----------------------------------------------------------

def _thunks(fn, tmp_path, *specs) -> str:
    """XLA's thunk sequence of fn compiled for the H200s, after its thunk passes (where command buffers form),
    from XLA's dump; the sequence before them where no pass changed it."""
    import pool3d_pass

    dump = tmp_path / fn.__name__
    pool3d_pass.jit(fn, strategy="indices").lower(*specs).compile(compiler_options={"xla_dump_to": str(dump)})
    after = sorted(dump.glob("*thunk_sequence_after_thunk_passes.txt"))
    return (after or sorted(dump.glob("*thunk_sequence.txt")))[0].read_text()


def _calls_in_command_buffers(text: str) -> tuple[int, int]:
    """(custom calls inside a command buffer, custom calls outside) in a thunk sequence dump (a command buffer's
    thunks are the indented lines after its kCommandBuffer line)."""
    inside = outside = 0
    in_buffer = False
    for line in text.splitlines():
        if "kCommandBuffer" in line:
            in_buffer = True
        elif line.strip() and not line.startswith(" "):
            in_buffer = False
        if "kCustomCall" in line:
            if in_buffer and line.startswith(" "):
                inside += 1
            else:
                outside += 1
    return inside, outside


def test_the_calls_without_scratch_run_inside_xla_command_buffers(h200, tmp_path):
    """forward_output (and forward, backward_from_indices) declare Traits::kCmdBufferCompatible: XLA:GPU puts
    them in its command buffers (CUDA graphs) with the fusions around them. backward_from_input takes scratch
    from XLA's allocator, freed when the handler returns, so it declares no trait and runs outside."""
    import jax
    import jax.numpy as jnp

    x = jax.ShapeDtypeStruct((2, 4, 32, 32, 32), jnp.float32, sharding=h200)
    g = jax.ShapeDtypeStruct((2, 4, 16, 16, 16), jnp.float32, sharding=h200)

    def three_pools(x):
        for _ in range(3):
            x = _max_pool(jnp.tanh(x) * 2.0 + 1.0)
        return x

    def forward_and_gradient(x, g):  # (g unused: the gradient of a loss)
        return jax.grad(lambda x: jnp.sum(_max_pool(jnp.tanh(x) * 2.0 + 1.0) ** 2))(x)

    def gradient_only(x, g):
        _, vjp = jax.vjp(lambda x: _max_pool(jnp.tanh(x) * 2.0 + 1.0), x)
        return jnp.tanh(vjp(g)[0]) * 3.0

    assert _calls_in_command_buffers(_thunks(three_pools, tmp_path, x)) == (3, 0)  # forward_output
    assert _calls_in_command_buffers(_thunks(forward_and_gradient, tmp_path, x, g)) == (2, 0)  # forward, gather
    assert _calls_in_command_buffers(_thunks(gradient_only, tmp_path, x, g)) == (0, 1)  # backward_from_input


@pytest.mark.parametrize("gpus", [4, 8])
@pytest.mark.parametrize(("layout", "window"), [("NCDHW", "k2s2"), ("NDHWC", "k3s2p1")])
def test_depth_sharded_training_steps_run_per_gpu_with_halos_moving_no_more_than_xla(gpus, layout, window):
    # depth 32 over the GPUs: k2 s2 windows stay inside each GPU's planes (only XLA's convolutions
    # exchange planes); k3 s2 p1 windows take one plane from the GPU below (docs/jax_integration.md)
    record = deviceless.compile_spatial_step(gpus, layout, window)
    assert not record["problems"], record
    assert record["kernel_calls"] == {"forward": 1, "backward_from_indices": 1}, record
    assert "all-gather" not in record["rewritten_collectives"], record
