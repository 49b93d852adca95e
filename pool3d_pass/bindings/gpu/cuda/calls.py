"""The gpu binding's calls by the CUDA kernels: each one `jax.ffi.ffi_call` of the contract's own target.

Lowered for cuda, each function is exactly the contract's call
(`stablehlo.custom_call @pool3d.max_pooling_3d_<kind>`, typed FFI, the five
attributes), which the library's handlers (`cuda/kernels.cu`, registered
for platform CUDA by `library.register()`) run: an exported or
`pool3d-opt --target=gpu` program carries no kernel IR and no jaxlib-specific
payload. The functions are generated from the contract's table
(`bindings/ffi_calls.py`), as the CPU binding's are. `gpu/calls.py` routes here when `implementation()` is "cuda".
"""

from __future__ import annotations

from pool3d_pass.bindings.ffi_calls import make_calls
from pool3d_pass.bindings.gpu.cuda import library
from pool3d_pass.contract import BACKWARD, BACKWARD_FROM_INDICES, BACKWARD_FROM_INPUT, FORWARD, FORWARD_OUTPUT

FUNCTIONS = make_calls(library.register)
max_pooling_3d_backward = FUNCTIONS[BACKWARD]
max_pooling_3d_forward = FUNCTIONS[FORWARD]
max_pooling_3d_forward_output = FUNCTIONS[FORWARD_OUTPUT]
max_pooling_3d_backward_from_indices = FUNCTIONS[BACKWARD_FROM_INDICES]
max_pooling_3d_backward_from_input = FUNCTIONS[BACKWARD_FROM_INPUT]
