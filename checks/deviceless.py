"""Compiling for an NVIDIA H200 with no GPU present: XLA:GPU's deviceless compile, and what ptxas said.

A development helper of the deviceless checks (checks/gpu_compile_check.py, the deviceless
tests), not part of the installed package.

Needs JAX's CUDA plugin of the installed JAX's version, for CUDA 12
(`jax-cuda12-plugin`, `jax-cuda12-pjrt`, with `nvidia-cuda-nvcc-cu12` for
ptxas) or CUDA 13 (`jax-cuda13-plugin`, `jax-cuda13-pjrt`, with
`nvidia-cuda-nvcc` 13.x), without `[with-cuda]`; `make gpu-compile-check
GPU_CUDA=12|13` installs them into their own environment. Then

    devices = h200_devices()              # compile-only devices, no GPU needed
    jax.jit(f).lower(x_on(devices)).compile()

runs all of XLA:GPU, Triton's pipeline for the Pallas kernels included, down to
ptxas for sm_90a. With `COMPILE_LOG_ENV` in the environment before JAX starts,
XLA logs ptxas' `-v` report on stderr (`parse_ptxas` reads it: registers and
spills per kernel). `compile_spatial_step` compiles a depth-sharded training
step for several H200s, by XLA and rewritten, and counts what each moves
between the GPUs.

No JAX is imported until a function needs it.
"""

from __future__ import annotations

import importlib.util
import os
import re

# XLA's GpuTargetConfigProto for an H200 SXM (141 GB HBM3e, 4.8 TB/s, 132 SMs,
# sm_90), in the text format of XLA's own specs (xla/tools/hlo_opt/gpu_specs).
H200_TARGET_CONFIG = """\
gpu_device_info {
  threads_per_block_limit: 1024
  threads_per_warp: 32
  shared_memory_per_block: 49152
  shared_memory_per_core: 233472
  threads_per_core_limit: 2048
  core_count: 132
  fpus_per_core: 128
  block_dim_limit_x: 2147483647
  block_dim_limit_y: 65535
  block_dim_limit_z: 65535
  memory_bandwidth: 4800000000000
  l2_cache_size: 52428800
  clock_rate_ghz: 1.98
  device_memory_size: 150754820096
  shared_memory_per_block_optin: 232448
  cuda_compute_capability { major: 9 }
  registers_per_core_limit: 65536
  registers_per_block_limit: 65536
}
platform_name: "CUDA"
device_description_str: "NVIDIA H200"
"""

# Per CUDA major version: JAX's plugin module, and the package folder of the nvcc wheel holding
# bin/ptxas (CUDA 12: nvidia-cuda-nvcc-cu12 -> nvidia/cuda_nvcc; CUDA 13: nvidia-cuda-nvcc 13.x
# -> nvidia/cu13).
CUDA_PLUGINS = {
    "12": ("jax_plugins.xla_cuda12", "nvidia.cuda_nvcc", "jax-cuda12-plugin, jax-cuda12-pjrt", "nvidia-cuda-nvcc-cu12"),
    "13": ("jax_plugins.xla_cuda13", "nvidia.cu13", "jax-cuda13-plugin, jax-cuda13-pjrt", "'nvidia-cuda-nvcc>=13,<14'"),
}
WHEELS = " or ".join(f"{plugins} (the installed JAX's version) and {nvcc}" for _, _, plugins, nvcc in
                     CUDA_PLUGINS.values())
# Set before JAX starts: XLA logs ptxas' -v report (registers, spills) on stderr.
COMPILE_LOG_ENV = {
    "JAX_SKIP_CUDA_CONSTRAINTS_CHECK": "1",
    "TF_CPP_MIN_LOG_LEVEL": "0",
    "TF_CPP_VMODULE": "subprocess_compilation=3",
    "XLA_FLAGS": "--xla_gpu_ptx_compiler_extra_flags=-v",
}


def missing_wheels() -> str | None:
    """Why a deviceless compile cannot run here (None: it can), for either CUDA plugin."""
    installed = [major for major, (plugin, *_) in CUDA_PLUGINS.items() if _has_module(plugin)]
    if not installed:
        return f"no JAX CUDA plugin installed; a deviceless compile needs {WHEELS}"
    for major in installed:
        _, nvcc_package, _, nvcc_wheel = CUDA_PLUGINS[major]
        if _has_file(nvcc_package, "bin/ptxas"):
            return None
    majors = " / ".join(f"CUDA {m}: {CUDA_PLUGINS[m][3]}" for m in installed)
    return f"no ptxas: a deviceless compile needs the nvcc wheel of the installed plugin ({majors})"


def _has_file(package: str, relative: str) -> bool:
    """Whether `relative` exists under an installed (possibly namespace) package's folder."""
    try:
        spec = importlib.util.find_spec(package)
    except ModuleNotFoundError:
        return False
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    return any(os.path.exists(os.path.join(folder, relative)) for folder in folders)


def _has_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def h200_devices(count: int = 1):
    """Compile-only CUDA devices (`count` H200s on one host): XLA:GPU compiles for them without a GPU.

    XLA's CUDA topology is "<slices>x<hosts per slice>x<devices per host>";
    several devices compile SPMD programs, partitioner included.
    """
    os.environ.setdefault("JAX_SKIP_CUDA_CONSTRAINTS_CHECK", "1")
    from jax.experimental import topologies

    return topologies.get_topology_desc(platform="cuda", topology=f"1x1x{count}",
                                        target_config=H200_TARGET_CONFIG).devices


def replicated_on(devices):
    """A sharding placing arguments on the compile-only devices."""
    import jax
    import numpy as np

    mesh = jax.sharding.Mesh(np.array(devices).reshape(len(devices)), ("x",))
    return jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())


def compile_spatial_step(gpus: int, layout: str, window: str) -> dict:
    """A depth-sharded training step (cases/spatial.py) compiled for `gpus` H200s by
    plain jax.jit and through pool3d_pass.jit (strategy indices): the collectives and bytes between GPUs of
    each (oracles/compiled_hlo.py), the rewritten one's kernel calls, and its problems: no kernel of
    the gpu binding, a scatter left, more bytes than XLA's, or, windows aligned with the shards (k2 s2),
    other bytes than XLA's convolutions move."""
    import time

    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    import pool3d_pass
    from cases.spatial import conv_pool_step, step_shapes
    from oracles.compiled_hlo import collectives, kernel_calls, total_bytes

    mesh = Mesh(np.array(h200_devices(gpus)), ("d",))
    step, split = conv_pool_step(layout, window, mesh)
    shapes = step_shapes(layout)
    kernel = jax.ShapeDtypeStruct(shapes["kernel"], jnp.float32, sharding=NamedSharding(mesh, PartitionSpec()))
    x = jax.ShapeDtypeStruct(shapes["x"], jnp.float32, sharding=split)
    start = time.perf_counter()
    plain = jax.jit(step).lower(kernel, x).compile().as_text()
    rewritten = pool3d_pass.jit(step, strategy="indices").lower(kernel, x).compile().as_text()
    seconds = time.perf_counter() - start
    calls = {k: n for k, n in kernel_calls(rewritten).items() if n}
    triton_calls = rewritten.count('custom_call_target="__gpu$xla.gpu.triton"')
    plain_bytes, rewritten_bytes = total_bytes(plain), total_bytes(rewritten)
    problems = []
    if not calls and not triton_calls:
        problems.append("no kernel of the gpu binding in the rewritten program")
    if re.search(r"\s(scatter|select-and-scatter)\(", rewritten):
        problems.append("a scatter is left in the compiled program")
    if rewritten_bytes > plain_bytes:
        problems.append(f"moves {rewritten_bytes} bytes between GPUs, XLA's program {plain_bytes}")
    if window == "k2s2" and rewritten_bytes != plain_bytes:
        problems.append(f"aligned windows: {rewritten_bytes} bytes, XLA's convolutions {plain_bytes}")
    return {
        "case": f"{layout} {window} step, depth 32 over {gpus} H200s", "gpus": gpus, "layout": layout,
        "window": window, "compile_s": round(seconds, 2), "kernel_calls": calls, "triton_calls": triton_calls,
        "plain_collectives": collectives(plain), "rewritten_collectives": collectives(rewritten),
        "plain_bytes": plain_bytes, "rewritten_bytes": rewritten_bytes, "problems": problems,
    }


_PTXAS_FUNCTION = re.compile(r"Compiling entry function '([^']+)' for '(sm_\w+)'")
_PTXAS_SPILLS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_PTXAS_REGISTERS = re.compile(r"Used (\d+) registers")


def parse_ptxas(log: str) -> dict[str, dict]:
    """Per kernel ptxas compiled: arch, registers, stack frame and spill bytes (last report wins)."""
    kernels: dict[str, dict] = {}
    current = None
    for line in log.splitlines():
        if m := _PTXAS_FUNCTION.search(line):
            current = kernels[m.group(1)] = {"arch": m.group(2)}
        elif current is not None and (m := _PTXAS_SPILLS.search(line)):
            current.update(stack_bytes=int(m.group(1)), spill_stores=int(m.group(2)), spill_loads=int(m.group(3)))
        elif current is not None and (m := _PTXAS_REGISTERS.search(line)):
            current["registers"] = int(m.group(1))
    return kernels
