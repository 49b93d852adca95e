"""The CPU binding's prior under strategy `auto`: the configurations `make bench` measured faster than XLA.

A gradient always gets a kernel call (XLA's select_and_scatter is 10-60x
slower on every measured shape). A forward max pool without a gradient
(inference) is XLA's own `reduce_window`, which is fast on some
configurations; the forward-output call replaces it only where `make bench`
measured the kernel faster by a margin that also pays for what XLA loses
inside a model (docs/benchmarks.md, "Where forward_output pays for
inference", 2026-12-01): XLA fuses the producer of a `reduce_window` (the
bias and ReLU before a pool) into it, while a custom call needs its input
written out and read back. Alone, every overlapping window, both layouts,
measured 2.0x-49x, and channels-first windows that do not overlap 2.9x-3.4x;
channels-last windows that do not overlap only 1.2x-1.7x (XLA's
reduce_window is a vectorised max at close to memory speed there), and in
the Flax C3D-style model of the bench, whose pools are all of that kind,
rewriting them made the bf16 inference step 0.95x-0.99x of jax.jit's. So
channels-last windows that do not overlap are left to XLA, in every element
type.

These figures are the prior (`pool3d_pass/calibration/`): strategy `auto`
follows them where this machine has no verdict of its own. Every row but the
channels-last non-overlapping inference one is settled (a margin of 2x or
more, which no host is expected to reverse); that row is thin (1.2x-1.7x
alone, below 1x in a model, and rows near 1x flip between hosts), so
first-use calibration decides it on the machine that runs it. An explicit
strategy uses the kernels on every configuration.
"""

from __future__ import annotations

from pool3d_pass.bindings.base import SpeedPrior
from pool3d_pass.contract import FORWARD_OUTPUT

SOURCE = "the prior (bindings/cpu/speed.py)"
GRADIENTS = ("the CPU kernels measured 10x-60x faster than XLA's select_and_scatter on every gradient row "
             "(docs/benchmarks.md)")

# (layout, kernel, stride, padding, element type) of the bench rows; tests read them.
MEASURED_FASTER = (
    ("NCDHW", 2, 2, 0, "f32"),
    ("NCDHW", 3, 2, 1, "f32"),
    ("NCDHW", 3, 1, 1, "f32"),
    ("NDHWC", 3, 2, 1, "f32"),
    ("NDHWC", 3, 2, 1, "bf16"),
    ("NDHWC", 3, 1, 1, "bf16"),
)
LEFT_TO_XLA = (("NDHWC", 2, 2, 0, "f32"), ("NDHWC", 2, 2, 0, "bf16"))


def prior(signature, input_shape=None, settings=None) -> SpeedPrior:
    """What the stored table says about this call under `auto` (the binding's `Calibration.prior`)."""
    if signature.call != FORWARD_OUTPUT:
        return SpeedPrior(True, GRADIENTS, source=SOURCE)
    overlapping = any(s < k for k, s in zip(signature.kernel_size, signature.stride)) or any(signature.padding)
    if signature.data_format == "NDHWC" and not overlapping:
        return SpeedPrior(False, "XLA's reduce_window measured faster inside a model on channels-last windows that "
                                 "do not overlap (the kernel alone 1.2x-1.7x, less than XLA's fusion of the pool's "
                                 "producer gains; docs/benchmarks.md)", settled=False, source=SOURCE)
    return SpeedPrior(True, "the forward-output kernel measured 2.0x-49x faster than XLA's reduce_window on this "
                            "configuration's rows (docs/benchmarks.md)", source=SOURCE)
