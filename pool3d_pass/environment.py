"""Every POOL3D_* environment variable the package reads, and the one place the pass's settings meet them.

Settings a user chooses per rewrite are `PassOptions` fields (options.py);
an environment variable is only an override for runs where no option was
given (a test harness, a device check, a program one cannot edit). While the
pass runs, `applying(options)` makes that run's options the ones the
bindings read: `gpu_kernels()` and `gpu_interpret()` return the option where
it is set, else the variable's value. `settings_key()` is part of every
cached lowering's key, so two runs with different settings never share one.
No JAX is imported here.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Iterator

GPU_KERNELS = "POOL3D_GPU_IMPL"
GPU_INTERPRET = "POOL3D_GPU_INTERPRET"
GPU_DEVICE_KIND = "POOL3D_GPU_DEVICE_KIND"
GPU_DEVICE_KIND_DEFAULT = "NVIDIA H200"
KERNEL_LIBRARY = "POOL3D_KERNEL_LIBRARY"
CUDA_LIBRARY = "POOL3D_CUDA_LIBRARY"
CPU_THREADS = "POOL3D_CPU_THREADS"
POISON_SCRATCH = "POOL3D_POISON_SCRATCH"
BUILD_CUDA = "POOL3D_BUILD_CUDA"
REQUIRE_CUDA = "POOL3D_REQUIRE_CUDA"
FFI_INCLUDE = "POOL3D_FFI_INCLUDE"
CUDA_THREADS = "POOL3D_CUDA_THREADS"
CUDA_VECTOR = "POOL3D_CUDA_VECTOR"

# name: (what it sets, the PassOptions field it overrides or None, who reads it)
VARIABLES = {
    GPU_KERNELS: ("the gpu binding's kernels: auto, cuda or pallas", "gpu_kernels", "bindings/gpu/implementation.py"),
    GPU_INTERPRET: ("1: the Pallas kernels run in interpret mode, as plain StableHLO", "gpu_interpret",
                    "bindings/gpu/calls.py"),
    GPU_DEVICE_KIND: ("the GPU the Triton kernels are lowered for, and whose measured table strategy auto "
                      "reads, where none is present (default NVIDIA H200)",
                      None, "bindings/gpu/calls.py, bindings/gpu/speed.py"),
    KERNEL_LIBRARY: ("another build of the CPU kernels' extension (e.g. a sanitizer build)", None,
                     "bindings/cpu/registration.py, at the first registration"),
    CUDA_LIBRARY: ("another build of the CUDA kernels' library", None, "bindings/gpu/cuda/library.py"),
    CPU_THREADS: ("the CPU kernels' thread count (> 0)", None, "the C++ kernels, at every call"),
    POISON_SCRATCH: ("1: the CPU kernels fill new scratch with NaN bytes (make sanitize)", None,
                     "the C++ kernels"),
    BUILD_CUDA: ("0: build without the CUDA kernels", None, "the build (bindings/gpu/cuda/build.py)"),
    REQUIRE_CUDA: ("1: a build without the CUDA kernels fails (a release build: make wheel)", None,
                   "the build (bindings/gpu/cuda/build.py)"),
    FFI_INCLUDE: ("a jaxlib include/ folder to compile the kernels against", None, "the build (CMakeLists.txt)"),
    CUDA_THREADS: ("the CUDA kernels' threads per block (64 to 1024, a multiple of 32; default 256)", None,
                   "bindings/gpu/cuda/kernels.cu, at every call"),
    CUDA_VECTOR: ("0: the CUDA kernels' generic (scalar) paths only", None, "bindings/gpu/cuda/kernels.cu, at every call"),
}

_active: contextvars.ContextVar = contextvars.ContextVar("pool3d_pass_options", default=None)


@contextlib.contextmanager
def applying(options) -> Iterator[None]:
    """Within the block, the bindings read `options`' settings (the pass's run)."""
    token = _active.set(options)
    try:
        yield
    finally:
        _active.reset(token)


def gpu_kernels() -> str:
    """The gpu kernels asked for: the run's `gpu_kernels` option, else $POOL3D_GPU_IMPL, else "auto"."""
    options = _active.get()
    if options is not None and options.gpu_kernels is not None:
        return options.gpu_kernels
    return os.environ.get(GPU_KERNELS, "").strip().lower() or "auto"


def gpu_interpret() -> bool:
    """Pallas interpret mode: the run's `gpu_interpret` option, else $POOL3D_GPU_INTERPRET == "1"."""
    options = _active.get()
    if options is not None and options.gpu_interpret is not None:
        return options.gpu_interpret
    return os.environ.get(GPU_INTERPRET, "") == "1"


def gpu_device_kind() -> str:
    """The GPU model assumed where no CUDA device is present: $POOL3D_GPU_DEVICE_KIND, else NVIDIA H200."""
    return os.environ.get(GPU_DEVICE_KIND) or GPU_DEVICE_KIND_DEFAULT


def settings_key() -> tuple:
    """What a binding's lowering depends on beyond its call: part of the lowering cache's key."""
    return (gpu_kernels(), gpu_interpret())


def command_flags(options, target: str | None = None) -> str:
    """The pool3d-opt flags that repeat a run of the pass: `--target`, `--strategy` and, for the gpu
    target, the kernels and interpret mode in force (the options' own, else the environment's).

    What a reproducer line prints, so that the command it gives rewrites as the run did.
    `target` names the platform where the run's options leave it to the compile (the JAX hook).
    """
    target = target or options.target
    flags = [f"--target={target}", f"--strategy={options.strategy}"]
    if target == "gpu":
        kernels = options.gpu_kernels
        if kernels is None:
            kernels = os.environ.get(GPU_KERNELS, "").strip().lower() or "auto"
        flags.append(f"--gpu-kernels={kernels}")
        interpret = options.gpu_interpret
        if interpret is None:
            interpret = os.environ.get(GPU_INTERPRET, "") == "1"
        if interpret:
            flags.append("--gpu-interpret")
    return " ".join(flags)
