"""Every POOL3D_* environment variable the package and its build read, with its meaning.

Settings a user chooses per rewrite are `PassOptions` fields (options.py);
an environment variable only gives a setting's default (a test harness, a
device check, a program one cannot edit), read when a PassOptions is made,
at the entry, never later inside the pass. This module imports nothing.
"""

from __future__ import annotations

import os

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
CALIBRATION = "POOL3D_CALIBRATION"
CALIBRATION_BUDGET = "POOL3D_CALIBRATION_BUDGET_S"
CACHE_DIR = "POOL3D_CACHE_DIR"

# name: (what it sets, the PassOptions field it overrides or None, who reads it)
VARIABLES = {
    GPU_KERNELS: ("the default of the gpu_kernels option: auto, cuda or pallas", "gpu_kernels",
                  "options.py, when a PassOptions is made"),
    GPU_INTERPRET: ("the default of the gpu_interpret option: 1 (or true, yes, on): the Pallas kernels run in "
                    "interpret mode, as plain StableHLO", "gpu_interpret", "options.py, when a PassOptions is made"),
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
    CALIBRATION: ("the default of the calibration option: first-use, cached or off", "calibration",
                  "options.py, when a PassOptions is made"),
    CALIBRATION_BUDGET: ("seconds one process may spend calibrating (default 60)", None, "calibration/modes.py"),
    CACHE_DIR: ("the folder of calibration verdicts (default: the user's cache folder, pool3d_pass/)", None,
                "calibration/store.py"),
}


def gpu_device_kind() -> str:
    """The GPU model assumed where no CUDA device is present: $POOL3D_GPU_DEVICE_KIND, else NVIDIA H200."""
    return os.environ.get(GPU_DEVICE_KIND) or GPU_DEVICE_KIND_DEFAULT
