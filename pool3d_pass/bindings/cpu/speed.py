"""Where the CPU binding's kernels are used for speed alone: the configurations measured faster than XLA.

A gradient always gets a kernel call (XLA's select_and_scatter is 10-60x
slower on every measured shape). A forward max pool without a gradient
(inference) is XLA's own `reduce_window`, which is fast on some
configurations; the forward-output call replaces it only where `make bench`
measured the kernel faster (docs/benchmarks.md, "Where forward_output is
faster than XLA's reduce_window", 2026-12-01): every overlapping window, both
layouts, by 2.9x-69x; windows that do not overlap by 1.2x-3.3x, the narrowest
channels-last f32 with a full vector of channels (1.17x, C = 32), where XLA's
reduce_window is a vectorised max at close to memory speed. That one is
within the noise of a shared machine, so channels-last f32 windows that do
not overlap are left to XLA.
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
    ("NDHWC", 2, 2, 0, "bf16"),
)
LEFT_TO_XLA = (("NDHWC", 2, 2, 0, "f32"),)


def refusal(signature) -> str | None:
    """Why the CPU binding leaves this call to XLA for speed (None: use the kernel)."""
    if signature.call != FORWARD_OUTPUT:
        return None
    overlapping = any(s < k for k, s in zip(signature.kernel_size, signature.stride)) or any(signature.padding)
    if signature.data_format == "NDHWC" and signature.input_type == "f32" and not overlapping:
        return ("XLA's reduce_window measured faster or level on channels-last f32 windows that do not "
                "overlap (the kernel 1.17x at 32 channels: within noise; docs/benchmarks.md)")
    return None
