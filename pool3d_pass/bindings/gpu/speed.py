"""Where strategy `auto` uses the gpu binding: the configuration classes a device run measured it faster.

The device check (scripts/gpu_check.py) times XLA:GPU against pool3d_pass.jit
per class: layout, element type, overlapping windows or not, input below or
above 256 MiB. `measured.py` holds the ratios (generated from a stored run,
per implementation of the binding). Under `auto` a gradient is rewritten only
where both gradient jobs ("gradient only" and "forward + gradient") were at
least `WIN` times faster, an inference pool only where "inference" was; every
other call stays XLA's, with a remark naming the measured ratio. A class or
implementation never measured stays XLA's too. An explicit strategy
("indices", "recompute") uses the binding everywhere it can run.
"""

from __future__ import annotations

import math

from pool3d_pass.bindings.gpu import measured
from pool3d_pass.contract import FORWARD_OUTPUT

# Faster by this much or more: a smaller gain is within what repeated device runs move.
WIN = 1.05
LARGE_BYTES = 256 * 2**20
ITEMSIZE = {"f32": 4, "bf16": 2, "f16": 2}
GRADIENT_JOBS = ("gradient only", "forward + gradient")
OPT_IN = "ask for strategy 'indices' or 'recompute' to use it anyway"


def configuration_class(signature, input_shape) -> tuple:
    overlapping = any(s < k for k, s in zip(signature.kernel_size, signature.stride))
    size = math.prod(input_shape) * ITEMSIZE.get(signature.input_type, 4)
    return (signature.data_format, signature.input_type, overlapping, "large" if size >= LARGE_BYTES else "small")


def describe(key) -> str:
    layout, dtype, overlapping, size = key
    return f"{layout} {dtype} {'overlapping' if overlapping else 'non-overlapping'} windows, {size} input"


def auto_refusal(signature, input_shape, implementation: str) -> str | None:
    """Why `auto` leaves this call to XLA:GPU (None: the device run measured the binding faster)."""
    key = configuration_class(signature, input_shape)
    run = measured.RUNS.get(implementation)
    jobs = measured.RATIOS.get(implementation, {}).get(key)
    if run is None or jobs is None:
        return (f"{implementation} kernels not measured on a GPU for {describe(key)} (strategy auto leaves "
                f"GPU programs to XLA there); {OPT_IN}")
    wanted = ("inference",) if signature.call == FORWARD_OUTPUT else GRADIENT_JOBS
    if any(job not in jobs for job in wanted):
        return f"{implementation} kernels not measured for {describe(key)} ({', '.join(wanted)}); {OPT_IN}"
    ratio = min(jobs[job] for job in wanted)
    if ratio >= WIN:
        return None
    return (f"XLA:GPU measured faster for {describe(key)} (XLA time / kernel time {ratio:.2f}x on "
            f"{run.get('device')}, {run.get('file')}); {OPT_IN}")
