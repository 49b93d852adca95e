"""The gpu binding's functions: the contract's calls, by the CUDA kernels or the Pallas kernels of `pallas/kernels.py`.

Where the CUDA kernels serve (`implementation.implementation(settings) ==
"cuda"`: their library is built and loads, and the settings do not ask for
Pallas), each function is the contract's own call through
`jax.ffi.ffi_call` (`cuda/calls.py`). Otherwise the Pallas kernels serve.

Each function has its call's signature (docs/contract.md) and is traceable
under `jax.jit`; with the Pallas kernels, lowered for "cuda", each kernel becomes one
`stablehlo.custom_call @__gpu$xla.gpu.triton` (Triton IR in its
backend_config), which XLA:GPU compiles:

- `max_pooling_3d_forward(input)` -> `(output, indices)`: the window kernel;
- `max_pooling_3d_forward_output(input)` -> `output`: the same, no indices;
- `max_pooling_3d_backward_from_indices(grad_output, indices, input_shape=)`:
  the gather kernel (each input element reads the windows that cover it);
- `max_pooling_3d_backward(grad_output, input, output)`: the window kernel
  finds each window's first tap equal to `output`, then the gather kernel;
- `max_pooling_3d_backward_from_input(grad_output, input)`: the window kernel
  (indices only) then the gather kernel; the int16 indices pass through GPU
  memory between the two (2 bytes per window).

Each function takes, besides its call's arguments, `settings=` (an
`options.BindingSettings`, which the pass passes through
`Binding.function`; None: the environment's alone) and reads it whenever
the call is traced; the pass keys its cached lowerings by it:

- `settings.gpu_kernels`: which kernels serve (`implementation.py`);
- `settings.gpu_interpret` (the pass's `gpu_interpret` option, else
  `POOL3D_GPU_INTERPRET=1`): the kernels run in Pallas interpret mode, as
  plain StableHLO, so a program rewritten for the gpu target runs on any
  backend (tests run them on CPU).

Besides, read from the environment alone:

- `POOL3D_GPU_DEVICE_KIND` (default "NVIDIA H200"): the device the Triton
  kernels are lowered for where no CUDA device is present (a CPU machine, a
  deviceless compile); JAX >= 0.11 needs one to lower a Triton kernel.

Fallback: where a Pallas Triton kernel cannot be used (a JAX without
`jax.experimental.pallas.triton`, a launch grid beyond CUDA's limits) the call
is the pure-JAX reference (`bindings/reference/`), lowered for cuda the same
way (loop fusions, no scatter), and a WARNING on the `pool3d_pass` logger says
so once per call and reason.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math

import jax

from pool3d_pass import environment
from pool3d_pass.bindings.ffi_calls import contract_functions, input_shape_of
from pool3d_pass.contract import BACKWARD, BACKWARD_FROM_INDICES, BACKWARD_FROM_INPUT, FORWARD, FORWARD_OUTPUT
from pool3d_pass.contract.pool_config import PoolConfig, shaped, split
from pool3d_pass.options import BindingSettings

logger = logging.getLogger("pool3d_pass")

INTERPRET_ENV = environment.GPU_INTERPRET
# Kernel names (the Triton kernels' names in the lowered call and in the PTX).
KERNEL_NAMES = {
    "forward": "pool3d_gpu_forward",
    "forward_output": "pool3d_gpu_forward_output",
    "indices": "pool3d_gpu_indices",
    "select": "pool3d_gpu_select",
    "gather": "pool3d_gpu_gather",
}
__all__ = [
    "INTERPRET_ENV",
    "max_pooling_3d_forward",
    "max_pooling_3d_forward_output",
    "max_pooling_3d_backward_from_indices",
    "max_pooling_3d_backward",
    "max_pooling_3d_backward_from_input",
]


# --- where the kernels come from ------------------------------------------------


def _cuda_calls(settings: BindingSettings):
    """The CUDA kernels' calls (`cuda/calls.py`) where they serve (implementation.py decides), else None."""
    from pool3d_pass.bindings.gpu.implementation import CUDA, implementation

    if implementation(settings) != CUDA:
        return None
    from pool3d_pass.bindings.gpu.cuda import calls as cuda_calls

    return cuda_calls


def _kernels():
    """The Pallas kernel module, or the reason it cannot be used."""
    try:
        from pool3d_pass.bindings.gpu.pallas import kernels
    except ImportError as error:  # a JAX without Pallas' Triton backend
        return None, f"Pallas Triton backend unavailable ({error})"
    return kernels, None


@functools.cache
def _warn_fallback(call: str, reason: str) -> None:
    logger.warning("gpu binding: %s uses the pure-JAX reference lowered for cuda: %s", call, reason)


@functools.cache
def _has_cuda_device() -> bool:
    try:
        return bool(jax.devices("cuda"))
    except RuntimeError:
        return False


# Where JAX's Triton lowering reads the GPU it lowers for: jax 0.11 to 0.12.0
# in Pallas' Triton backend, jax 0.12.1 in jax._src (shared with Mosaic GPU).
# Both read the abstract mesh's device where no CUDA device is present.
GPU_INFO_MODULES = ("jax._src.pallas.triton.gpu_info", "jax._src.gpu_info")


@functools.cache
def _needs_device_description() -> bool:
    """Whether this JAX's Triton lowering asks for the GPU (jax >= 0.11: `gpu_info`); 0.9/0.10 lower for sm_90."""
    import importlib.util

    for name in GPU_INFO_MODULES:
        try:
            if importlib.util.find_spec(name) is not None:
                return True
        except ModuleNotFoundError:  # a parent package this JAX lacks
            continue
    return False


def _lowering_device():
    """A context naming the CUDA device to lower Triton kernels for where none is present."""
    if not _needs_device_description() or _has_cuda_device():
        return contextlib.nullcontext()
    sharding = jax.sharding
    device = sharding.AbstractDevice(
        device_kind=environment.gpu_device_kind(), num_cores=None, platform="cuda"
    )
    # An EMPTY mesh: a named axis would put an sdy.mesh and sharding
    # constraints into the lowered function, which the splice cannot carry.
    return sharding.use_abstract_mesh(sharding.AbstractMesh((), (), abstract_device=device))


# --- geometry -----------------------------------------------------------------


def _geometry(input_shape, pool: PoolConfig, kernels):
    """The Pallas kernels' geometry of one call; a ValueError naming what is wrong."""
    reason = pool.invalid()
    if reason is not None:
        raise ValueError(f"gpu binding: {reason}")
    try:
        batch, channels, spatial = split(input_shape, pool.data_format)
    except ValueError as error:
        raise ValueError(f"gpu binding: {error}") from None
    out = pool.pooled_spatial(spatial)
    if any(o < 1 for o in out):
        raise ValueError(f"gpu binding: input spatial shape {list(spatial)} gives an empty output {list(out)}")
    in_size = batch * channels * math.prod(spatial)
    out_size = batch * channels * math.prod(out)
    return kernels.Geometry(batch, channels, spatial, out, pool, wide=kernels.needs_wide_offsets(in_size, out_size))


def _output_shape(g) -> tuple[int, ...]:
    return shaped(g.batch, g.channels, g.out_spatial, g.output_format)


def _plan(input_shape, pool: PoolConfig):
    """(kernel module, geometry), or (None, reason) where the reference must stand in."""
    kernels, reason = _kernels()
    if kernels is None:
        return None, reason
    g = _geometry(input_shape, pool, kernels)
    reason = kernels.launch_refusal(g)
    if reason is not None:
        return None, reason
    return kernels, g


def _reference(call: str, reason: str):
    from pool3d_pass.bindings.reference import calls as reference

    _warn_fallback(call, reason)
    return reference.FUNCTIONS[call]


def _empty(shape, dtype):
    return jax.numpy.zeros(shape, dtype)


# --- the contract's calls -----------------------------------------------------


def _run_window_kernel(input, g, kernels, interpret, *, y=None, store_y, store_index, name):
    with contextlib.nullcontext() if interpret else _lowering_device():
        return kernels.window(
            input.reshape(-1), None if y is None else y.reshape(-1), g,
            store_y=store_y, store_index=store_index, interpret=interpret, name=KERNEL_NAMES[name],
        )


def _run_gather_kernel(grad_output, indices, g, kernels, interpret, dtype):
    with contextlib.nullcontext() if interpret else _lowering_device():
        return kernels.gather(
            grad_output.reshape(-1), indices.reshape(-1), g, dtype=dtype, interpret=interpret,
            name=KERNEL_NAMES["gather"],
        )


def _input_shape(g) -> tuple[int, ...]:
    return shaped(g.batch, g.channels, g.in_spatial, g.data_format)


def _forward(operands, g, kernels, interpret):
    (input,) = operands  # the contract's operand name
    shape = _output_shape(g)
    if g.out_size == 0:
        return _empty(shape, input.dtype), _empty(shape, jax.numpy.int16)
    y, index = _run_window_kernel(input, g, kernels, interpret, store_y=True, store_index=True, name="forward")
    return y.reshape(shape), index.reshape(shape)


def _forward_output(operands, g, kernels, interpret):
    (input,) = operands  # the contract's operand name
    shape = _output_shape(g)
    if g.out_size == 0:
        return _empty(shape, input.dtype)
    (y,) = _run_window_kernel(input, g, kernels, interpret, store_y=True, store_index=False, name="forward_output")
    return y.reshape(shape)


def _backward_from_indices(operands, g, kernels, interpret):
    grad_output, indices = operands
    shape = _input_shape(g)
    if g.in_size == 0:
        return _empty(shape, grad_output.dtype)
    return _run_gather_kernel(grad_output, indices, g, kernels, interpret, grad_output.dtype).reshape(shape)


def _backward(operands, g, kernels, interpret):
    grad_output, input, output = operands
    if g.in_size == 0:
        return _empty(input.shape, input.dtype)
    (index,) = _run_window_kernel(input, g, kernels, interpret, y=output, store_y=False, store_index=True,
                                  name="select")
    return _run_gather_kernel(grad_output, index, g, kernels, interpret, input.dtype).reshape(input.shape)


def _backward_from_input(operands, g, kernels, interpret):
    grad_output, input = operands
    if g.in_size == 0:
        return _empty(input.shape, input.dtype)
    (index,) = _run_window_kernel(input, g, kernels, interpret, store_y=False, store_index=True, name="indices")
    return _run_gather_kernel(grad_output, index, g, kernels, interpret, input.dtype).reshape(input.shape)


_PALLAS = {"forward": _forward, "forward_output": _forward_output, "backward_from_indices": _backward_from_indices,
           "backward": _backward, "backward_from_input": _backward_from_input}
_DOCS = {
    "forward": "3-D max pool with indices: `(output, indices)`, indices int16 (docs/contract.md).",
    "forward_output": "3-D max pool, maxima only (inference): the forward without the index stores.",
    "backward_from_indices": "Gradient w.r.t. the input from the forward's int16 indices, gathered per input element.",
    "backward": "Gradient w.r.t. the input, the selection recomputed from (input, output).",
    "backward_from_input": "Gradient w.r.t. the input from the input alone: the window kernel's indices, then the gather.",
}


def _implement(kind: str, operands: tuple, attributes: dict, settings: BindingSettings):
    """One call: the CUDA kernels where they serve, else the Pallas kernels, else the reference."""
    cuda = _cuda_calls(settings)
    if cuda is not None:
        return cuda.FUNCTIONS[kind](*operands, **attributes)
    kernels, g = _plan(input_shape_of(kind, operands, attributes), PoolConfig.of(attributes))
    if kernels is None:
        return _reference(kind, g)(*operands, **attributes)
    return _PALLAS[kind](operands, g, kernels, settings.gpu_interpret)


FUNCTIONS = contract_functions(_implement, _DOCS, takes_settings=True)
max_pooling_3d_backward = FUNCTIONS[BACKWARD]
max_pooling_3d_forward = FUNCTIONS[FORWARD]
max_pooling_3d_forward_output = FUNCTIONS[FORWARD_OUTPUT]
max_pooling_3d_backward_from_indices = FUNCTIONS[BACKWARD_FROM_INDICES]
max_pooling_3d_backward_from_input = FUNCTIONS[BACKWARD_FROM_INPUT]
