"""The CPU binding for programs compiled for several devices: its FFI kernels, partitionable.

The machinery is every FFI binding's (`bindings/partitioned.py`); here it
wraps this binding's single-device functions, registering the handlers first.
"""

from __future__ import annotations

from pool3d_pass.bindings import cpu
from pool3d_pass.bindings.partitioned import partitioned_calls


def _kernel(kind: str):
    cpu.register()
    return getattr(cpu, f"max_pooling_3d_{kind}")


_CALLS = partitioned_calls(_kernel, "CPU")
max_pooling_3d_backward = _CALLS["max_pooling_3d_backward"]
max_pooling_3d_forward = _CALLS["max_pooling_3d_forward"]
max_pooling_3d_forward_output = _CALLS["max_pooling_3d_forward_output"]
max_pooling_3d_backward_from_indices = _CALLS["max_pooling_3d_backward_from_indices"]
max_pooling_3d_backward_from_input = _CALLS["max_pooling_3d_backward_from_input"]
