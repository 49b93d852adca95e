"""The CUDA kernels' library: where it is, loading it, registering its FFI handlers. No JAX imported.

`_cuda_kernels.so` (built by `build.py` from this folder's sources, next to
this file when the package was built with nvcc) holds one XLA typed-FFI handler per call
of the contract. `register()` registers each with XLA for platform "CUDA"
under the contract's own target name (`contract.TARGETS`), through
`jaxlib.xla_client.register_custom_call_target`, the function
`jax.ffi.register_ffi_target` itself calls: before JAX's CUDA client exists
the handlers wait in jaxlib's pending list, which the client registers when
it starts. `import pool3d_pass` runs it (`register_if_built`), so an
executable holding the calls (compiled, deserialized, or from the persistent
cache) runs.

The library links the CUDA runtime statically: loading it needs no GPU and
no CUDA installation (the driver is looked up when a kernel first runs).
That runtime needs a driver of its CUDA major release or newer: where the
machine's NVIDIA driver is older than the release the library was built with
(`Pool3dCudaRuntimeVersion`, version.cc), `unavailable()` says so and
the Pallas kernels serve; likewise where a GPU is older than compute
capability 8.0 (`capability_problem`: a V100 or a T4, where every launch
would fail). Without a driver (a CPU machine, a deviceless compile) nothing
is compared.

`POOL3D_CUDA_LIBRARY=/path/to/_cuda_kernels.so`, read by the first load,
names another build. Where the package holds a CUDA 12 build too
(`_cuda_kernels_cu12.so`), a machine whose driver supports CUDA 12 but not
13 loads that one (`library_path`).
"""

from __future__ import annotations

import ctypes
import functools
import os

from pool3d_pass.bindings.ffi_registration import HandlerRegistration
from pool3d_pass.contract import TARGETS

LIBRARY_ENV = "POOL3D_CUDA_LIBRARY"
LIBRARY_NAME = "_cuda_kernels.so"
XLA_PLATFORM = "CUDA"
# The handler symbol of each call kind (cuda/kernels.cu's XLA_FFI_DEFINE_HANDLER_SYMBOL).
SYMBOLS = {
    "backward": "Pool3dCudaMaxPooling3dBackward",
    "forward": "Pool3dCudaMaxPooling3dForward",
    "forward_output": "Pool3dCudaMaxPooling3dForwardOutput",
    "backward_from_indices": "Pool3dCudaMaxPooling3dBackwardFromIndices",
    "backward_from_input": "Pool3dCudaMaxPooling3dBackwardFromInput",
}


# A library built with CUDA 12 beside the CUDA 13 one (a wheel may carry both; docs/gpu.md "CUDA 12 drivers"):
# the one a CUDA 12 driver loads, the CUDA 13 runtime linked into the other needing a CUDA 13 driver.
CUDA12_LIBRARY_NAME = "_cuda_kernels_cu12.so"


def library_path() -> str:
    """The library file used: $POOL3D_CUDA_LIBRARY; else the package's, the CUDA 12 build where the NVIDIA
    driver supports CUDA 12 but not 13 and the package holds one; else the CUDA 13 build."""
    named = os.environ.get(LIBRARY_ENV)
    if named:
        return named
    here = os.path.dirname(os.path.abspath(__file__))
    driver = driver_version()
    cuda12 = os.path.join(here, CUDA12_LIBRARY_NAME)
    if driver is not None and 12000 <= driver < 13000 and os.path.isfile(cuda12):
        return cuda12
    return os.path.join(here, LIBRARY_NAME)


def is_built() -> bool:
    return os.path.isfile(library_path())


@functools.cache
def _load(path: str):
    """(library, None) or (None, why it cannot be used); cached per path."""
    if not os.path.isfile(path):
        return None, f"the CUDA kernels' library is not built ({path} is missing; build the package with nvcc)"
    try:
        library = ctypes.CDLL(path)
        missing = [s for kind, s in SYMBOLS.items() if kind in TARGETS and not hasattr(library, s)]
    except OSError as error:
        return None, f"the CUDA kernels' library {path} does not load: {error}"
    if missing:
        return None, f"the CUDA kernels' library {path} lacks {', '.join(missing)} (a stale build?)"
    return library, None


RUNTIME_VERSION_SYMBOL = "Pool3dCudaRuntimeVersion"


def release(version: int) -> str:
    """"13.0" for CUDA's 13000."""
    return f"{version // 1000}.{version % 1000 // 10}"


@functools.cache
def driver_version() -> int | None:
    """The CUDA version the NVIDIA driver supports (cuDriverGetVersion: 12080 for 12.8); None without a driver."""
    try:
        driver = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    version = ctypes.c_int(0)
    if driver.cuDriverGetVersion(ctypes.byref(version)) != 0:
        return None
    return version.value


def built_with(library) -> int | None:
    """The CUDA release `library` was built with (CUDART_VERSION), None for a build without the symbol."""
    function = getattr(library, RUNTIME_VERSION_SYMBOL, None)
    return None if function is None else int(function())


def driver_problem(library) -> str | None:
    """Why this machine's driver cannot run `library`'s kernels (None: it can, or there is no driver)."""
    built, driver = built_with(library), driver_version()
    if built is None or driver is None or driver // 1000 >= built // 1000:
        return None
    return (f"the CUDA kernels' library was built with CUDA {release(built)}, whose runtime needs a CUDA "
            f"{built // 1000} driver; this NVIDIA driver supports CUDA {release(driver)} (build pool3d_pass "
            "from source with that CUDA's nvcc to use them)")


# The oldest GPUs the kernels run on: compute capability 8.0 (A100; the library holds sm_80 and sm_90a SASS
# and compute_90 PTX, and its searches use max.NaN, an sm_80 instruction).
MIN_CAPABILITY = (8, 0)
_CU_ATTRIBUTE_MAJOR, _CU_ATTRIBUTE_MINOR = 75, 76  # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR (cuda.h)


@functools.cache
def compute_capabilities() -> tuple[tuple[str, int, int], ...]:
    """(name, major, minor) of every GPU the NVIDIA driver shows (libcuda's cuDeviceGetAttribute); () without a
    driver or a GPU."""
    try:
        driver = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return ()
    if driver.cuInit(0) != 0:
        return ()
    count = ctypes.c_int(0)
    if driver.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return ()
    found = []
    for ordinal in range(count.value):
        device, major, minor = ctypes.c_int(0), ctypes.c_int(0), ctypes.c_int(0)
        name = ctypes.create_string_buffer(256)
        if (driver.cuDeviceGet(ctypes.byref(device), ordinal) != 0
                or driver.cuDeviceGetAttribute(ctypes.byref(major), _CU_ATTRIBUTE_MAJOR, device) != 0
                or driver.cuDeviceGetAttribute(ctypes.byref(minor), _CU_ATTRIBUTE_MINOR, device) != 0):
            continue
        driver.cuDeviceGetName(name, len(name), device)
        found.append((name.value.decode(errors="replace"), major.value, minor.value))
    return tuple(found)


def capability_problem() -> str | None:
    """Why this machine's GPUs cannot run the kernels (one older than MIN_CAPABILITY), else None."""
    old = [(n, major, minor) for n, major, minor in compute_capabilities() if (major, minor) < MIN_CAPABILITY]
    if not old:
        return None
    name, major, minor = old[0]
    return (f"the CUDA kernels need a GPU of compute capability {MIN_CAPABILITY[0]}.{MIN_CAPABILITY[1]} or newer; "
            f"{name} is {major}.{minor} (the Pallas kernels, or XLA, serve instead)")


def load():
    """The loaded library; raises ImportError saying why it cannot be used."""
    library, reason = _load(library_path())
    if library is None:
        raise ImportError(reason)
    return library


def unavailable() -> str | None:
    """Why the CUDA kernels cannot serve (None: the library loads, and the driver and GPUs, if any, can run it)."""
    library, reason = _load(library_path())
    if library is None:
        return reason
    return driver_problem(library) or capability_problem()


def _capsule(function_pointer: int):
    """A PyCapsule holding a C function pointer, as `jax.ffi.pycapsule` makes it (without importing jax)."""
    destructor = ctypes.CFUNCTYPE(None, ctypes.py_object)
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = (ctypes.c_void_p, ctypes.c_char_p, destructor)
    return new(function_pointer, None, destructor(0))


def _handlers() -> dict:
    library = load()
    return {kind: _capsule(ctypes.cast(getattr(library, SYMBOLS[kind]), ctypes.c_void_p).value) for kind in TARGETS}


_registration = HandlerRegistration(XLA_PLATFORM, _handlers)


def register() -> None:
    """Register every handler for platform CUDA under its target name (idempotent, thread-safe).

    Raises ImportError where the library is missing or does not load.
    """
    _registration.register()


def register_if_built() -> None:
    """`import pool3d_pass`'s hook: register where the library is built; nothing where it is not.

    A library that is there but does not load raises (the registry records the
    failure; the gpu binding then uses its Pallas kernels and says why).
    """
    if is_built():
        register()


def is_registered() -> bool:
    return _registration.done
