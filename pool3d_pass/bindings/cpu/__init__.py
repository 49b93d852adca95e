"""CPU binding: the C++ XLA typed-FFI handlers of the pool3d custom calls.

`register()` registers every handler (compiled into the `_kernel` extension
when the package is installed) with XLA for platform "cpu", each under its
target name in `pool3d_pass.contract.TARGETS`. The functions below, generated
from the contract's table (`bindings/ffi_calls.py`), call them from JAX
through `jax.ffi.ffi_call` and are traceable under `jax.jit`:

- `max_pooling_3d_backward(grad_output, input, output)`: the recompute
  backward (`TARGET_NAME`);
- `max_pooling_3d_forward(input)` -> `(output, indices)`, indices int16;
- `max_pooling_3d_forward_output(input)` -> `output`: the forward of an
  inference program, y only;
- `max_pooling_3d_backward_from_indices(grad_output, indices, input_shape=)`;
- `max_pooling_3d_backward_from_input(grad_output, input)`: the bare
  gradient, fused.

The exact semantics are in docs/contract.md.

The environment variable POOL3D_CPU_THREADS, read at every call, overrides the
kernel's thread count (default: hardware threads, at most 8, and one thread
for problems under 256K elements).

The handlers are registered when pool3d_pass is imported (`registration.py`:
without importing JAX); `register()` does it again where needed (idempotent).
"""

from __future__ import annotations

from pool3d_pass.bindings.cpu.registration import is_registered, register
from pool3d_pass.bindings.ffi_calls import INDEX_DTYPE, make_calls
from pool3d_pass.contract import (
    ATTRIBUTE_NAMES,
    BACKWARD,
    BACKWARD_FROM_INDICES,
    BACKWARD_FROM_INPUT,
    FORWARD,
    FORWARD_OUTPUT,
    TARGET_NAME,
    TARGETS,
)

__all__ = [
    "TARGET_NAME",
    "TARGETS",
    "ATTRIBUTE_NAMES",
    "FUNCTIONS",
    "INDEX_DTYPE",
    "register",
    "is_registered",
    "max_pooling_3d_backward",
    "max_pooling_3d_forward",
    "max_pooling_3d_forward_output",
    "max_pooling_3d_backward_from_indices",
    "max_pooling_3d_backward_from_input",
]

FUNCTIONS = make_calls(register)
max_pooling_3d_backward = FUNCTIONS[BACKWARD]
max_pooling_3d_forward = FUNCTIONS[FORWARD]
max_pooling_3d_forward_output = FUNCTIONS[FORWARD_OUTPUT]
max_pooling_3d_backward_from_indices = FUNCTIONS[BACKWARD_FROM_INDICES]
max_pooling_3d_backward_from_input = FUNCTIONS[BACKWARD_FROM_INPUT]
