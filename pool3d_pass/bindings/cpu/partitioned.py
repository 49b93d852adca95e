"""The CPU binding for programs compiled for several devices: its FFI kernels, partitionable.

The machinery is every FFI binding's (`bindings/partitioned.py`); here it
wraps this binding's single-device functions, registering the handlers first.
"""

from __future__ import annotations

from pool3d_pass.bindings import cpu
from pool3d_pass.bindings.partitioned import partitioned_calls
from pool3d_pass.contract import BACKWARD, BACKWARD_FROM_INDICES, BACKWARD_FROM_INPUT, FORWARD, FORWARD_OUTPUT


def _kernel(kind: str):
    cpu.register()
    return cpu.FUNCTIONS[kind]


FUNCTIONS = partitioned_calls(_kernel, "CPU")
max_pooling_3d_backward = FUNCTIONS[BACKWARD]
max_pooling_3d_forward = FUNCTIONS[FORWARD]
max_pooling_3d_forward_output = FUNCTIONS[FORWARD_OUTPUT]
max_pooling_3d_backward_from_indices = FUNCTIONS[BACKWARD_FROM_INDICES]
max_pooling_3d_backward_from_input = FUNCTIONS[BACKWARD_FROM_INPUT]
