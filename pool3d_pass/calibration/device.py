"""Which device a decision is for, read from what this process already has: never a new JAX client.

The compile hook runs for a backend JAX has made, so that backend says the
device model and runtime. A rewrite without JAX's client for the platform
(`pool3d-opt`, `rewrite()` on a machine without that device) has no device
to calibrate: its decisions are the prior's, except on CPU, whose model the
operating system says. The kernels' part of the key is which kernels serve
(the binding's `describe`) and a digest of the files of the folder its
functions' loader lives in, the platform's package (sources and compiled
libraries, recursively), plus a
loaded kernel extension's file, so a rebuilt kernel is a new key.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import os
import platform as platform_module
import sys
from pathlib import Path

from pool3d_pass import environment, jax_compat
from pool3d_pass.calibration.key import Device

KERNEL_SUFFIXES = (".py", ".so", ".pyd", ".dylib", ".cu", ".cc", ".h")
JAX_PLATFORMS = {"gpu": "cuda"}  # the JAX_PLATFORMS word of a backend platform, where they differ


def jax_backend(platform: str):
    """JAX's backend for `platform` if this process has made one (None otherwise; none is made here)."""
    bridge = sys.modules.get("jax._src.xla_bridge")
    for backend in list((getattr(bridge, "_backends", None) or {}).values()):
        if getattr(backend, "platform", None) == platform:
            return backend
    return None


@functools.cache
def cpu_model() -> str:
    """The processor's model name and the cores this process may use (the kernels' thread count follows them)."""
    name = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            for line in info:
                if line.startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    name = name or platform_module.processor() or platform_module.machine() or "unknown CPU"
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return f"{name}, {cores} cores"


def _version(distribution: str) -> str:
    return jax_compat.installed_version(distribution) or "none"


@functools.cache
def versions() -> str:
    return f"pool3d_pass {_version('pool3d_pass')}, jax {_version('jax')}, jaxlib {_version('jaxlib')}"


@functools.lru_cache(maxsize=32)
def _files_digest(folders: tuple[str, ...]) -> str:
    digest = hashlib.sha256()
    for folder in folders:
        for path in sorted(Path(folder).rglob("*")):
            if path.suffix not in KERNEL_SUFFIXES or "__pycache__" in path.parts or not path.is_file():
                continue
            digest.update(str(path.relative_to(folder)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


LAUNCH_VARIABLES = (environment.KERNEL_LIBRARY, environment.CUDA_LIBRARY, environment.CUDA_THREADS,
                    environment.CUDA_VECTOR, environment.CPU_THREADS)


def kernels(binding, settings) -> str:
    """Which kernels serve and a digest of their files (the `kernels` field of `Device`)."""
    spec = importlib.util.find_spec(binding.functions.load.__module__)  # the platform's package (its binding.py)
    folders = (str(Path(spec.origin).parent),) if spec is not None and spec.origin else ()
    extensions = sorted(getattr(module, "__file__", "") or "" for name, module in list(sys.modules.items())
                        if name.startswith("pool3d_pass.bindings.") and str(getattr(module, "__file__", "")).endswith(
                            (".so", ".pyd")))
    # the variables that choose another build or another launch of the same kernels (environment.py)
    launch = [f"{name}={os.environ.get(name, '')}" for name in LAUNCH_VARIABLES]
    extra = hashlib.sha256("\n".join(extensions + launch).encode())
    served = binding.describe(settings) if binding.describe is not None else f"{binding.platform} kernels"
    return f"{served} {_files_digest(folders)}{extra.hexdigest()[:8]}"


def model_and_runtime(platform: str, backend) -> tuple[str, str] | None:
    """(device model, runtime) of `backend` (CPU: the OS's, no backend needed); None without a device."""
    if platform == "cpu":
        return cpu_model(), f"XLA:CPU ({platform_module.system()} {platform_module.machine()})"
    if backend is None:
        return None
    try:
        model = str(backend.devices()[0].device_kind)
    except Exception:  # noqa: BLE001 - a client without devices: nothing to calibrate on
        return None
    runtime = str(getattr(backend, "platform_version", "") or "unknown runtime")
    if platform == "gpu":
        runtime += _cuda_driver()
    return model, runtime


_identified: dict = {}


def identify(platform: str, binding, settings) -> Device | None:
    """The device a compile for `platform` runs on, from JAX's existing backend (CPU: the OS); else None.

    Remembered per backend, binding and settings: every compile of a process asks.
    """
    backend = jax_backend(platform)
    key = (platform, id(backend), binding, settings)  # (a Binding hashes by identity)
    if key not in _identified:
        found = model_and_runtime(platform, backend)
        _identified[key] = None if found is None else Device(platform, *found, kernels(binding, settings), versions())
    return _identified[key]


def _cuda_driver() -> str:
    try:
        from pool3d_pass.bindings.gpu.cuda import library

        driver = library.driver_version()
        return "" if driver is None else f", driver CUDA {library.release(driver)}"
    except Exception:  # noqa: BLE001 - the runtime string alone
        return ""
