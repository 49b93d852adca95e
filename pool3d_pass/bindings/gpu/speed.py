"""The gpu binding's prior under strategy `auto`: the configuration classes a stored device run measured faster.

The device check (checks/device_check/) times XLA:GPU against pool3d_pass.jit
per class: layout, element type, overlapping windows or not, input below or
above 256 MiB. `measured.py` holds the ratios (generated from stored runs),
keyed by (implementation of the binding, GPU model). Under `auto` a gradient is rewritten only
where both gradient jobs ("gradient only" and "forward + gradient") were at
least `WIN` times faster, an inference pool only where "inference" was; every
other call stays XLA's, with a remark naming the measured ratio. A class,
implementation or GPU model never measured stays XLA's too: an H100 and an
H200 are the same chip with different memory bandwidth, so one model's run
says nothing certain about another's.

The GPU model (`gpu_model()`): the device kind of the CUDA device JAX is
already using in this process (`jax.devices()[0].device_kind`, e.g. "NVIDIA
H200"); where JAX has made no CUDA client (a deviceless compile, a rewrite on
a machine without a GPU), the device the kernels are lowered for:
`POOL3D_GPU_DEVICE_KIND`, default "NVIDIA H200" (environment.py). No JAX client is
made here to find out.

This is the prior (`prior()`, the binding's `Calibration.prior`): on a GPU
in use, first-use calibration (pool3d_pass/calibration/) measures each class
there and its verdict replaces the table, which is never settled (figures
from another device, or none). Where nothing was calibrated (calibration
"cached" or "off", a deviceless rewrite, the budget spent) the table
decides. An explicit strategy ("indices", "recompute") uses the binding
everywhere it can run.
"""

from __future__ import annotations

import math
import sys

from pool3d_pass import environment
from pool3d_pass.bindings.base import SpeedPrior
from pool3d_pass.bindings.gpu import measured
from pool3d_pass.contract import FORWARD_OUTPUT

# Faster by this much or more: a smaller gain is within what repeated device runs move.
WIN = 1.05
LARGE_BYTES = 256 * 2**20
ITEMSIZE = {"f32": 4, "bf16": 2, "f16": 2}
GRADIENT_JOBS = ("gradient only", "forward + gradient")
OPT_IN = "ask for strategy 'indices' or 'recompute' to use it anyway"


def device_model() -> str | None:
    """The model of the CUDA device JAX already uses in this process, or None (no CUDA client, no device)."""
    xla_bridge = sys.modules.get("jax._src.xla_bridge")
    for backend in list((getattr(xla_bridge, "_backends", None) or {}).values()):
        version = str(getattr(backend, "platform_version", "")).lower()
        if getattr(backend, "platform", None) == "gpu" and "rocm" not in version:
            try:
                return str(backend.devices()[0].device_kind)
            except Exception:  # noqa: BLE001 - a client without devices: the stated default
                return None
    return None


def gpu_model() -> str:
    """The GPU model `auto` looks up: the CUDA device JAX already uses, else $POOL3D_GPU_DEVICE_KIND, else H200."""
    return device_model() or environment.gpu_device_kind()


def _which_gpu(model: str) -> str:
    """The GPU a remark names: the device in use, or the one assumed where this process has none."""
    if device_model() is not None:
        return f"a GPU of model {model!r}"
    return (f"the GPU assumed where this process has none, {model!r} ({environment.GPU_DEVICE_KIND}, default "
            f"{environment.GPU_DEVICE_KIND_DEFAULT!r})")


def configuration_class(signature, input_shape) -> tuple:
    overlapping = any(s < k for k, s in zip(signature.kernel_size, signature.stride))
    size = math.prod(input_shape) * ITEMSIZE.get(signature.input_type, 4)
    return (signature.data_format, signature.input_type, overlapping, "large" if size >= LARGE_BYTES else "small")


def describe(key) -> str:
    layout, dtype, overlapping, size = key
    return f"{layout} {dtype} {'overlapping' if overlapping else 'non-overlapping'} windows, {size} input"


def prior(signature, input_shape, implementation: str, model: str | None = None) -> SpeedPrior:
    """The stored run's word on this call: the binding where it measured faster, else XLA:GPU (never settled)."""
    model = gpu_model() if model is None else model
    refusal = auto_refusal(signature, input_shape, implementation, model)
    run = measured.RUNS.get((implementation, model), {})
    source = f"a stored run ({run['file']})" if run.get("file") else "a stored run (bindings/gpu/measured.py)"
    if refusal is not None:
        return SpeedPrior(False, refusal, settled=False, source=source)
    key = configuration_class(signature, input_shape)
    jobs = measured.RATIOS[(implementation, model)][key]
    wanted = ("inference",) if signature.call == FORWARD_OUTPUT else GRADIENT_JOBS
    ratio = min(jobs[job] for job in wanted)
    return SpeedPrior(True, f"{implementation} kernels measured faster for {describe(key)} (XLA time / kernel time "
                            f"{ratio:.2f}x on {model})", settled=False, source=source)


def auto_refusal(signature, input_shape, implementation: str, model: str | None = None) -> str | None:
    """Why the stored run leaves this call to XLA:GPU (None: a device run on this GPU model measured the binding faster).

    `model`: the GPU model (default: `gpu_model()`).
    """
    model = gpu_model() if model is None else model
    key = configuration_class(signature, input_shape)
    run = measured.RUNS.get((implementation, model))
    jobs = measured.RATIOS.get((implementation, model), {}).get(key)
    if run is None:
        others = sorted(m for impl, m in measured.RUNS if impl == implementation)
        where = f" (measured on {', '.join(others)} only)" if others else ""
        return (f"{implementation} kernels not measured on {_which_gpu(model)}{where} (strategy auto leaves "
                f"GPU programs to XLA there); {OPT_IN}")
    if jobs is None:
        return (f"{implementation} kernels not measured on a GPU for {describe(key)} (strategy auto leaves "
                f"GPU programs to XLA there); {OPT_IN}")
    wanted = ("inference",) if signature.call == FORWARD_OUTPUT else GRADIENT_JOBS
    if any(job not in jobs for job in wanted):
        return f"{implementation} kernels not measured for {describe(key)} ({', '.join(wanted)}); {OPT_IN}"
    ratio = min(jobs[job] for job in wanted)
    if ratio >= WIN:
        return None
    return (f"XLA:GPU measured faster for {describe(key)} (XLA time / kernel time {ratio:.2f}x on "
            f"{model}, {run.get('file')}); {OPT_IN}")
