"""The gpu binding for programs compiled for several devices: the kernels that serve, partitionable.

The machinery is every FFI binding's (`bindings/partitioned.py`); here it
wraps the gpu binding's single-device functions (`calls.py`): the CUDA
kernels' FFI calls where they serve, else the Pallas kernels, which are JAX
functions like any other and partition the same way. Each function takes the
pass run's `settings=` (as `calls.py`'s do); which kernels they choose
(`implementation.py`) and Pallas' interpret mode are resolved when the pass
splices the call, and pinned into the single-device function: XLA's
partitioner lowers each shard's kernel later, during the compile.
"""

from __future__ import annotations

import functools

from pool3d_pass.bindings.gpu import calls, implementation
from pool3d_pass.bindings.partitioned import partitioned_calls
from pool3d_pass.contract import BACKWARD, BACKWARD_FROM_INDICES, BACKWARD_FROM_INPUT, FORWARD, FORWARD_OUTPUT
from pool3d_pass.options import BindingSettings


@functools.cache
def _pinned(kind: str, settings: BindingSettings):
    """The single-device function of `kind` with `settings` bound (one object per pair: a cache key)."""
    function = calls.FUNCTIONS[kind]
    return functools.update_wrapper(functools.partial(function, settings=settings), function)


def _single_device(kind: str, settings: BindingSettings):
    pinned = BindingSettings(implementation.implementation(settings), settings.gpu_interpret)
    return _pinned(kind, pinned)


FUNCTIONS = partitioned_calls(_single_device, "gpu", takes_settings=True)
max_pooling_3d_backward = FUNCTIONS[BACKWARD]
max_pooling_3d_forward = FUNCTIONS[FORWARD]
max_pooling_3d_forward_output = FUNCTIONS[FORWARD_OUTPUT]
max_pooling_3d_backward_from_indices = FUNCTIONS[BACKWARD_FROM_INDICES]
max_pooling_3d_backward_from_input = FUNCTIONS[BACKWARD_FROM_INPUT]
