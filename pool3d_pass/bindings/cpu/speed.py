"""Where the CPU binding's kernels are used for speed alone: the configurations measured faster than XLA.

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
"""

from __future__ import annotations

from pool3d_pass.contract import FORWARD_OUTPUT

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


def refusal(signature) -> str | None:
    """Why the CPU binding leaves this call to XLA for speed (None: use the kernel)."""
    if signature.call != FORWARD_OUTPUT:
        return None
    overlapping = any(s < k for k, s in zip(signature.kernel_size, signature.stride)) or any(signature.padding)
    if signature.data_format == "NDHWC" and not overlapping:
        return ("XLA's reduce_window measured faster inside a model on channels-last windows that do not "
                "overlap (the kernel alone 1.2x-1.7x, less than XLA's fusion of the pool's producer "
                "gains; docs/benchmarks.md)")
    return None
