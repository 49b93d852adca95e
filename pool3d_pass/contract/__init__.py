"""The custom-call contract between the pass and every kernel binding.

`docs/contract.md` is the prose definition; this package holds its constants,
the one table of its calls (`CALLS`), the output-size rule, a call's
attributes (`PoolConfig`, pool_config.py), the one builder of each call
(`custom_call.py`) and of its Shardy rule (`sharding.py`), so the pass and
the bindings cannot drift apart.
"""

from dataclasses import dataclass

# The contract's tensors (docs/contract.md, "Operands and results"): each is
# shaped like the forward input (INPUT) or like the pool's output (POOLED).
INPUT, POOLED = "input", "pooled"
TENSOR_SHAPES = {
    "input": INPUT,
    "grad_input": INPUT,
    "grad_output": POOLED,
    "output": POOLED,
    "indices": POOLED,
}
ATTRIBUTE_NAMES = ("kernel_size", "stride", "padding", "data_format", "output_format")


@dataclass(frozen=True)
class Call:
    """One call of the contract: its target name, operands and results (by name), attributes."""

    target: str
    operands: tuple[str, ...]  # names of TENSOR_SHAPES, in order
    results: tuple[str, ...]
    attributes: tuple[str, ...] = ATTRIBUTE_NAMES

    @property
    def operand_shapes(self) -> tuple[str, ...]:
        return tuple(TENSOR_SHAPES[name] for name in self.operands)

    @property
    def result_shapes(self) -> tuple[str, ...]:
        return tuple(TENSOR_SHAPES[name] for name in self.results)

    @property
    def takes_input_shape(self) -> bool:
        """Whether a binding's function needs `input_shape=`: a result has the input's
        shape, but no operand does (backward_from_indices)."""
        return INPUT in self.result_shapes and INPUT not in self.operand_shapes


# Call kinds. `backward` is the NKI kernel's signature (recompute the selection
# from input and output); `forward` and `backward_from_indices` are the layer
# pair (MPSGraph's, PyTorch's); `backward_from_input` is the bare gradient, fused;
# `forward_output` is the forward of an inference program (y only: XLA's
# reduce_window max as IEEE maximum, docs/contract.md "The inference forward").
BACKWARD = "backward"
FORWARD = "forward"
FORWARD_OUTPUT = "forward_output"
BACKWARD_FROM_INDICES = "backward_from_indices"
BACKWARD_FROM_INPUT = "backward_from_input"
# The one table of the calls: a new call is one row here (and docs/contract.md).
CALLS = {
    BACKWARD: Call("pool3d.max_pooling_3d_backward", ("grad_output", "input", "output"), ("grad_input",)),
    FORWARD: Call("pool3d.max_pooling_3d_forward", ("input",), ("output", "indices")),
    FORWARD_OUTPUT: Call("pool3d.max_pooling_3d_forward_output", ("input",), ("output",)),
    BACKWARD_FROM_INDICES: Call(
        "pool3d.max_pooling_3d_backward_from_indices", ("grad_output", "indices"), ("grad_input",)
    ),
    BACKWARD_FROM_INPUT: Call("pool3d.max_pooling_3d_backward_from_input", ("grad_output", "input"), ("grad_input",)),
}
TARGETS = {kind: call.target for kind, call in CALLS.items()}
TARGET_NAME = TARGETS[BACKWARD]
API_VERSION_TYPED_FFI = 4
LAYOUTS = ("NCDHW", "NDHWC")
MAX_WINDOW_ELEMENTS = 4096
SUPPORTED_DTYPES = ("f32", "bf16", "f16")
SPATIAL_RANK = 3
# A window's selected tap, as its row-major offset inside the window; i16 holds
# every offset below MAX_WINDOW_ELEMENTS. NO_SELECTION: the window's maximum is NaN.
INDEX_TYPE = "i16"
NO_SELECTION = -1


def pooled_extent(size: int, kernel: int, stride: int, low: int, high: int) -> int:
    """Output extent of one pooled dimension: `(size + low + high - kernel) // stride + 1`
    (docs/contract.md, "Attributes", with `low == high == p`)."""
    return (size + low + high - kernel) // stride + 1
