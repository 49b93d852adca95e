"""Every POOL3D_* environment variable the package reads, and the one place the pass's settings meet them.

Settings a user chooses per rewrite are `PassOptions` fields (options.py);
an environment variable is only an override for runs where no option was
given (a test harness, a device check, a program one cannot edit).
`binding_settings(options)` resolves the settings a binding reads (the
option where it is set, else the variable's value) into one `BindingSettings`
value, once per pass run; the pass hands it to the binding as an argument
(`Binding.function(call, settings=...)`) and keys every cached lowering by
it, so two runs with different settings never share one. Nothing here is
ambient: no context variable, nothing set for the duration of a run.
No JAX is imported here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

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
    GPU_KERNELS: ("the gpu binding's kernels: auto, cuda or pallas", "gpu_kernels",
                  "binding_settings, for bindings/gpu/implementation.py"),
    GPU_INTERPRET: ("1: the Pallas kernels run in interpret mode, as plain StableHLO", "gpu_interpret",
                    "binding_settings, for bindings/gpu/calls.py"),
    GPU_DEVICE_KIND: ("the GPU the Triton kernels are lowered for, and whose measured table strategy auto "
                      "reads, where none is present (default NVIDIA H200)",
                      None, "bindings/gpu/calls.py, bindings/gpu/speed.py"),
    KERNEL_LIBRARY: ("another build of the CPU kernels' extension (e.g. a sanitizer build)", None,
                     "bindings/cpu/registration.py, at the first registration"),
    CUDA_LIBRARY: ("another build of the CUDA kernels' library", None, "bindings/gpu/cuda/library.py"),
    CPU_THREADS: ("the CPU kernels' thread count (> 0)", None, "the C++ kernels, at every call"),
    POISON_SCRATCH: ("1: the CPU kernels fill new scratch with NaN bytes (make sanitize)", None,
                     "the C++ kernels"),
    BUILD_CUDA: ("1: build the CUDA kernels where no GPU driver is present too; 0: never (default: only where "
                 "one is)", None, "the build (bindings/gpu/cuda/build.py)"),
    REQUIRE_CUDA: ("1: a build without the CUDA kernels fails (a release build: make wheel)", None,
                   "the build (bindings/gpu/cuda/build.py)"),
    FFI_INCLUDE: ("a jaxlib include/ folder to compile the kernels against", None, "the build (CMakeLists.txt)"),
    CUDA_THREADS: ("the CUDA kernels' threads per block (64 to 1024, a multiple of 32; default 256)", None,
                   "bindings/gpu/cuda/kernels.cu, at every call"),
    CUDA_VECTOR: ("0: the CUDA kernels' generic (scalar) paths only", None, "bindings/gpu/cuda/kernels.cu, at every call"),
}


@dataclass(frozen=True)
class BindingSettings:
    """The settings a binding reads beyond its call, resolved: an argument of its functions, a key of each lowering.

    `gpu_kernels`: the gpu binding's kernels asked for ("auto", "cuda",
    "pallas"; another word is the gpu binding's to refuse, with a warning);
    `gpu_interpret`: whether its Pallas kernels run in interpret mode. Other
    bindings ignore both.
    """

    gpu_kernels: str = "auto"
    gpu_interpret: bool = False


def binding_settings(options=None) -> BindingSettings:
    """The settings of a run with `options` (a PassOptions, or None): each option where set, else its variable's.

    `gpu_kernels`: the option, else $POOL3D_GPU_IMPL, else "auto"; `gpu_interpret`:
    the option, else $POOL3D_GPU_INTERPRET == "1".
    """
    kernels = getattr(options, "gpu_kernels", None)
    if kernels is None:
        kernels = os.environ.get(GPU_KERNELS, "").strip().lower() or "auto"
    interpret = getattr(options, "gpu_interpret", None)
    if interpret is None:
        interpret = os.environ.get(GPU_INTERPRET, "") == "1"
    return BindingSettings(kernels, interpret)


def gpu_device_kind() -> str:
    """The GPU model assumed where no CUDA device is present: $POOL3D_GPU_DEVICE_KIND, else NVIDIA H200."""
    return os.environ.get(GPU_DEVICE_KIND) or GPU_DEVICE_KIND_DEFAULT


def command_flags(options, target: str | None = None) -> str:
    """The pool3d-opt flags that repeat a run of the pass: `--target`, `--strategy` and, for the gpu
    target, the kernels and interpret mode in force (the options' own, else the environment's).

    What a reproducer line prints, so that the command it gives rewrites as the run did.
    `target` names the platform where the run's options leave it to the compile (the JAX hook).
    """
    target = target or options.target
    flags = [f"--target={target}", f"--strategy={options.strategy}"]
    if target == "gpu":
        settings = binding_settings(options)
        flags.append(f"--gpu-kernels={settings.gpu_kernels}")
        if settings.gpu_interpret:
            flags.append("--gpu-interpret")
    return " ".join(flags)
