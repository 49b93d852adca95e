"""The gpu binding for programs compiled for several devices: the kernels that serve, partitionable.

The machinery is every FFI binding's (`bindings/partitioned.py`); here it
wraps the gpu binding's single-device functions (`calls.py`): the CUDA
kernels' FFI calls where they serve, else the Pallas kernels, which are JAX
functions like any other and partition the same way. Which kernels serve
(`implementation.py`) and Pallas' interpret mode are read when the pass
splices the call, and pinned: XLA's partitioner lowers each shard's kernel
later, during the compile, after the pass's run whose options chose them.
"""

from __future__ import annotations

import functools

from pool3d_pass import environment
from pool3d_pass.bindings.gpu import calls, implementation
from pool3d_pass.bindings.partitioned import partitioned_calls
from pool3d_pass.options import PassOptions


@functools.cache
def _pinned(kind: str, kernels: str, interpret: bool):
    """The single-device function of `kind`, traced with these kernels and interpret mode whenever it runs."""
    function = getattr(calls, f"max_pooling_3d_{kind}")
    settings = PassOptions(gpu_kernels=kernels, gpu_interpret=interpret)

    @functools.wraps(function)
    def kernel(*operands, **attributes):
        with environment.applying(settings):
            return function(*operands, **attributes)

    return kernel


def _kernel(kind: str):
    return _pinned(kind, implementation.implementation(), environment.gpu_interpret())


_CALLS = partitioned_calls(_kernel, "gpu")
max_pooling_3d_backward = _CALLS["max_pooling_3d_backward"]
max_pooling_3d_forward = _CALLS["max_pooling_3d_forward"]
max_pooling_3d_forward_output = _CALLS["max_pooling_3d_forward_output"]
max_pooling_3d_backward_from_indices = _CALLS["max_pooling_3d_backward_from_indices"]
max_pooling_3d_backward_from_input = _CALLS["max_pooling_3d_backward_from_input"]
