"""Which kernels serve the gpu binding: the CUDA library's ("cuda") or the Pallas ones ("pallas").

`implementation(settings)` is the one place that decides; the binding's
functions ask it whenever a call is traced, with the settings the pass run
passed them (`options.BindingSettings`: the pass's `gpu_kernels` option,
whose default is `POOL3D_GPU_IMPL`; None here: `PassOptions()`'s):

- `pallas`: the Pallas (Triton) kernels;
- `cuda`: the CUDA kernels; where their library is not built or does not
  load, the Pallas kernels, with a WARNING on the `pool3d_pass` logger saying
  why;
- `auto` (or unset): the CUDA kernels where the library loads, else the
  Pallas kernels; Pallas also in interpret mode (the `gpu_interpret` option
  or `POOL3D_GPU_INTERPRET=1`: interpret mode is a Pallas feature).

The pass caches each lowering per process: to switch within one process, call
`use("cuda")` / `use("pallas")`, which sets the variable and clears
pool3d_pass's caches (clear JAX's own compile caches too, `jax.clear_caches()`,
before compiling the same program again). No JAX is imported here.
"""

from __future__ import annotations

import functools
import logging
import os

from pool3d_pass import environment
from pool3d_pass.bindings.gpu.cuda import library as cuda_library
from pool3d_pass.options import BindingSettings, binding_settings

IMPL_ENV = environment.GPU_KERNELS
INTERPRET_ENV = environment.GPU_INTERPRET
CUDA, PALLAS, AUTO = "cuda", "pallas", "auto"
CHOICES = (CUDA, PALLAS, AUTO)

logger = logging.getLogger("pool3d_pass")


def requested(settings: BindingSettings | None = None) -> str:
    """The choice asked for: "cuda", "pallas" or "auto" (a PassOptions checked the word when it was made)."""
    return (settings or binding_settings()).gpu_kernels


def implementation(settings: BindingSettings | None = None) -> str:
    """"cuda" or "pallas": the kernels the gpu binding's calls use with these settings."""
    settings = settings or binding_settings()
    choice = requested(settings)
    if choice == PALLAS or (choice == AUTO and settings.gpu_interpret):
        return _chosen(PALLAS, "asked for" if choice == PALLAS else "interpret mode")
    reason = cuda_library.unavailable()
    if reason is None:
        return _chosen(CUDA, cuda_library.library_path())
    if choice == CUDA:
        _warn_once(f"gpu_kernels=cuda, but the CUDA kernels cannot be used: {reason}; using the Pallas kernels")
    return _chosen(PALLAS, reason)


def describe(settings: BindingSettings | None = None) -> str:
    """One line: which kernels serve and why (for logs and check scripts)."""
    name = implementation(settings)
    if name == CUDA:
        return f"CUDA kernels ({cuda_library.library_path()})"
    reason = cuda_library.unavailable()
    return f"Pallas kernels ({reason or 'asked for'})"


def summary(settings: BindingSettings | None = None) -> str:
    """A short phrase for remarks: "CUDA kernels", or "Pallas kernels (<short reason>)"."""
    settings = settings or binding_settings()
    if implementation(settings) == CUDA:
        return "CUDA kernels"
    if requested(settings) == PALLAS:
        return "Pallas kernels (asked for)"
    if settings.gpu_interpret and requested(settings) == AUTO:
        return "Pallas kernels (interpret mode)"
    reason = cuda_library.unavailable() or ""
    return f"Pallas kernels ({'CUDA library not built' if 'not built' in reason else 'CUDA library unusable'})"


def use(name: str) -> None:
    """Select the implementation for the rest of the process ("cuda", "pallas" or "auto"); clears pool3d caches."""
    if name not in CHOICES:
        raise ValueError(f"implementation must be one of {', '.join(CHOICES)}, got {name!r}")
    os.environ[IMPL_ENV] = name
    from pool3d_pass import caches

    caches.clear_caches()


@functools.cache
def _chosen(name: str, why: str) -> str:
    logger.info("gpu binding: the %s kernels serve (%s)", name, why)
    return name


@functools.cache
def _warn_once(message: str) -> None:
    logger.warning("gpu binding: %s", message)
