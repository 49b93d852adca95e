"""STAND-IN for nkilib's kernel module (tests only; see ../../../README.md).

The signature is the API page's (Neuron SDK 2.33,
https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/library/api/max-pooling-3d-backward.html).
Traced (the stand-in's `nki.jit` passes abstract tensors), the body only
allocates the result, in `data_format` with the input's shape and dtype, which
is what `nki.jit` reads to lower the call. Run (an eager launch passes numpy
arrays), it computes the result with the kernel's algorithm as
oracles/nki_max_pool_backward_numpy.py transcribes it from the kernel's
source, so the binding's tests see which tensor went where.
"""

from __future__ import annotations

import nki
import nki.language as nl
import numpy as np


@nki.jit
def max_pooling_3d_backward(
    grad_output,
    input_tensor,
    output_tensor,
    kernel_size: int | tuple,
    stride: int | tuple | None = None,
    padding: int | tuple = 0,
    data_format: str = "NCDHW",
    output_format: str | None = None,
):
    if data_format not in ("NCDHW", "NDHWC") or (output_format or data_format) not in ("NCDHW", "NDHWC"):
        raise ValueError(f"layouts {data_format}/{output_format}")
    if isinstance(input_tensor, np.ndarray):
        # tests/support is on the import path wherever a launch runs eagerly (pytest's pythonpath, pyproject.toml).
        from oracles.nki_max_pool_backward_numpy import max_pooling_3d_backward as transcription

        return transcription(grad_output, input_tensor, output_tensor, kernel_size, stride, padding, data_format,
                             output_format)
    return nl.ndarray(input_tensor.shape, dtype=input_tensor.dtype, buffer=nl.shared_hbm)
