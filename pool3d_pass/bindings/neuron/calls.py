"""The neuron binding's one call, `backward`, by nkilib's NKI kernel `max_pooling_3d_backward`; its preconditions.

The kernel is already an `@nki.jit` kernel object; it is called as it is, as
nkilib's own examples do, never wrapped in `nki.jit` again, as
`kernel[lnc](grad_output=..., input_tensor=..., output_tensor=..., kernel_size=...,
stride=..., padding=..., data_format=..., output_format=...)`: every argument by
the kernel's own parameter name, launched on `lnc` logical NeuronCores, which
must match the Neuron runtime's `NEURON_LOGICAL_NC_CONFIG` (`logical_nc_config`).
Under `jax.jit` the NKI trace writes a kernel artifact and lowers the call to a
`stablehlo.custom_call @AwsNeuronCustomNativeKernel` whose backend_config holds
the artifact's absolute path: a module spliced by `pool3d-opt --target=neuron`
compiles only where that file exists (docs/neuron.md).

Without the SDK this module imports, and `require` fails with one line naming
what to install from where (`sdk.py`). See docs/neuron.md.
"""

from __future__ import annotations

import math
import os

from pool3d_pass.bindings.ffi_calls import contract_function
from pool3d_pass.bindings.neuron.sdk import (
    KERNEL_FUNCTION,
    KERNEL_MODULE,
    MIN_SDK,
    NeuronSdkUnavailable,
    load_kernel,
    problems,
    require,
)
from pool3d_pass.contract import BACKWARD, SUPPORTED_DTYPES
from pool3d_pass.contract.pool_config import PoolConfig, split

__all__ = [
    "DEFAULT_LNC",
    "FUNCTIONS",
    "KERNEL_FUNCTION",
    "KERNEL_MODULE",
    "LNC_VARIABLE",
    "NKI_CALL_TARGET",
    "MIN_SDK",
    "artifact_remark",
    "covered_extent",
    "NeuronPackagesMissing",
    "NeuronSdkUnavailable",
    "logical_nc_config",
    "max_pooling_3d_backward",
    "missing_packages",
    "require",
    "require_neuron_packages",
    "unsupported",
]

NeuronPackagesMissing = NeuronSdkUnavailable  # the earlier name

LNC_VARIABLE = "NEURON_LOGICAL_NC_CONFIG"
# Where the variable is unset, neuronx-cc and the runtime use LNC 2 on Trn2 and later
# (NCC_EVRF066), while an NKI kernel would default to 1: the binding launches with 2.
DEFAULT_LNC = 2
LNC_VALUES = (1, 2)


def logical_nc_config() -> int:
    """The LNC degree kernels are launched with: NEURON_LOGICAL_NC_CONFIG, else DEFAULT_LNC.

    The one place the variable is read. A value other than 1 or 2 raises
    NeuronSdkUnavailable (one line), as `require` does.
    """
    value = os.environ.get(LNC_VARIABLE, "").strip()
    if not value:
        return DEFAULT_LNC
    if value not in {str(v) for v in LNC_VALUES}:
        raise NeuronSdkUnavailable(
            f"{LNC_VARIABLE}={value!r}: the Neuron SDK takes logical NeuronCore degree 1 or 2 "
            f"(unset: {DEFAULT_LNC}, Trn2/Trn3's default)"
        )
    return int(value)


NKI_CALL_TARGET = "AwsNeuronCustomNativeKernel"  # what the NKI trace lowers a kernel call to


def artifact_remark(text: str) -> str | None:
    """pool3d-opt's remark for printed output holding NKI calls (None: it holds none).

    Each call's backend_config names, by absolute path, the kernel artifact the
    NKI trace wrote on this host; neuronx-cc fails with NCC_EVRF059 where that
    file is missing.
    """
    nki_calls = text.count(f"@{NKI_CALL_TARGET}")
    if not nki_calls:
        return None
    return (
        f"{nki_calls} NKI call(s) name the kernel artifacts this run's NKI trace wrote on this host, by absolute path: "
        "the output compiles only on this host while those files exist (elsewhere or later, neuronx-cc fails with "
        "NCC_EVRF059); to compile elsewhere, rewrite there or use pool3d_pass.jit (docs/neuron.md)"
    )


def missing_packages() -> list[str]:
    """What keeps the binding from tracing the kernel here, one phrase each (empty: nothing)."""
    return problems()


def require_neuron_packages() -> None:
    """The registry's `require`: the SDK's nki and the kernel's module import, and the LNC is valid."""
    require()
    logical_nc_config()


# The kernel's smallest tile (one input cell per tile, every output window that
# touches it) must fit one SBUF partition and the hardware's access patterns;
# its planner has no cut below that and does not refuse (its source leaves that
# case "for the caller to handle"). Per partition, in bytes, the tile holds, for
# the input window (n_in cells) and the touching outputs (n_out): two prefetched
# sets of input, output and grad_output in the element type, the f32
# accumulator, four output-sized scratch tiles, and one staged store cell.
PREFETCH_SETS = 2
ACCESS_PATTERN_MAX = 65535  # an access pattern's element count is a uint16
# The largest SBUF partition of the chips NKI 0.3+ runs on: Trn3's 32 MiB over 128
# partitions (Trn2's is smaller). A tile above it fits no chip; below it, the
# kernel's own planner decides.
SBUF_PARTITION_BYTES = 32 * 2**20 // 128
_ELEMENT_BYTES = {"f32": 4, "bf16": 2, "f16": 2}


def smallest_tile(kernel_size, stride, element_type: str) -> tuple[int, int, int]:
    """(bytes per partition, input cells, output cells) of the kernel's smallest tile."""
    n_in = n_out = 1
    for k, s in zip(kernel_size, stride):
        touching = (k - 1) // s + 1  # outputs whose window holds one given input cell
        n_out *= touching
        n_in *= (touching - 1) * s + k
    size = _ELEMENT_BYTES[element_type]
    total = PREFETCH_SETS * size * (n_in + 2 * n_out) + 4 * n_in + 4 * size * n_out + size
    return total, n_in, n_out


def covered_extent(size: int, kernel: int, stride: int, padding: int) -> int:
    """How much of an input axis of `size` the windows reach (the rest gets no gradient).

    The kernel sizes each tile's accumulator by the input its windows cover but
    stores the tile's whole box, so input cells after the last window would be
    read past its end: the binding hands the kernel only the covered part and
    pads the result with zeros. Cells after the last window exist only where
    padding < stride, and then the covered part has the same output extent.
    """
    outputs = (size + 2 * padding - kernel) // stride + 1
    return min(size, (outputs - 1) * stride - padding + kernel)


def unsupported(signature) -> str | None:
    """The NKI kernel's preconditions beyond the contract's (None: supported).

    Called after `registry.contract_preconditions` (call kind, one element
    type, window size, padding, layouts). A zero batch or channel extent needs
    no refusal: the binding returns the empty result without launching the
    kernel (`max_pooling_3d_backward`).
    """
    if signature.input_type not in SUPPORTED_DTYPES:
        return f"NKI kernel does not take {signature.input_type}"
    if any(s > k for k, s in zip(signature.kernel_size, signature.stride)):
        # Between windows lie cells no window covers; where the kernel cuts such an axis
        # into tiles (a volume larger than SBUF), a tile of them reads past its accumulator.
        return (
            f"NKI kernel: stride {list(signature.stride)} larger than kernel_size {list(signature.kernel_size)} "
            "leaves input between windows that the kernel's tiles cannot hold"
        )
    total, n_in, n_out = smallest_tile(signature.kernel_size, signature.stride, signature.input_type)
    if max(n_in, n_out) > ACCESS_PATTERN_MAX:
        return (
            f"NKI kernel: kernel_size {list(signature.kernel_size)} with stride {list(signature.stride)} "
            f"needs access patterns of {max(n_in, n_out)} > {ACCESS_PATTERN_MAX} elements"
        )
    if total > SBUF_PARTITION_BYTES:
        return (
            f"NKI kernel: kernel_size {list(signature.kernel_size)} with stride {list(signature.stride)} "
            f"({signature.input_type}) needs {total} bytes of SBUF per partition for its smallest tile, "
            f"more than any Trn2/Trn3 partition ({SBUF_PARTITION_BYTES})"
        )
    return None


def _backward(kind: str, operands: tuple, attributes: dict):
    """The contract's `backward` call, by nkilib's kernel (see the module docstring)."""
    grad_output, input, output = operands  # the contract's names; the kernel's is input_tensor
    pool = PoolConfig.of(attributes)
    kernel = load_kernel()
    lnc = logical_nc_config()
    batch, channels, _ = split(input.shape, pool.data_format)
    if math.prod((batch, channels)) == 0:
        # Empty result: nothing for the kernel to do (and no zero-sized NKI tensor).
        import jax.numpy as jnp

        return jnp.zeros(input.shape, input.dtype)
    spatial_axes = (2, 3, 4) if pool.data_format == "NCDHW" else (1, 2, 3)
    covered = [covered_extent(input.shape[a], k, s, p)
               for a, k, s, p in zip(spatial_axes, pool.kernel_size, pool.stride, pool.padding)]
    limit = list(input.shape)
    for axis, extent in zip(spatial_axes, covered):
        limit[axis] = extent
    trimmed = input if tuple(limit) == tuple(input.shape) else input[tuple(slice(0, n) for n in limit)]
    grad_input = kernel[lnc](
        grad_output=grad_output,
        input_tensor=trimmed,
        output_tensor=output,
        **pool.attributes(),
    )
    if trimmed is input:
        return grad_input
    import jax.numpy as jnp

    return jnp.pad(grad_input, [(0, full - n) for full, n in zip(input.shape, limit)])


max_pooling_3d_backward = contract_function(BACKWARD, _backward)
FUNCTIONS = {BACKWARD: max_pooling_3d_backward}
