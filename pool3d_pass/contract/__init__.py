"""The custom-call contract between the pass and every kernel binding.

`docs/contract.md` is the prose definition; this package holds its constants
and the one helper that builds each call, so the pass and the bindings cannot
drift apart.
"""

# Call kinds and their target names. `backward` is the NKI kernel's signature
# (recompute the selection from input and output); `forward` and
# `backward_from_indices` are the layer pair (MPSGraph's, PyTorch's);
# `backward_from_input` is the bare gradient, fused; `forward_output` is the
# forward of an inference program (y only, XLA's reduce_window max bit for bit).
BACKWARD = "backward"
FORWARD = "forward"
FORWARD_OUTPUT = "forward_output"
BACKWARD_FROM_INDICES = "backward_from_indices"
BACKWARD_FROM_INPUT = "backward_from_input"
TARGETS = {
    BACKWARD: "pool3d.max_pooling_3d_backward",
    FORWARD: "pool3d.max_pooling_3d_forward",
    FORWARD_OUTPUT: "pool3d.max_pooling_3d_forward_output",
    BACKWARD_FROM_INDICES: "pool3d.max_pooling_3d_backward_from_indices",
    BACKWARD_FROM_INPUT: "pool3d.max_pooling_3d_backward_from_input",
}
TARGET_NAME = TARGETS[BACKWARD]
API_VERSION_TYPED_FFI = 4
ATTRIBUTE_NAMES = ("kernel_size", "stride", "padding", "data_format", "output_format")
LAYOUTS = ("NCDHW", "NDHWC")
MAX_WINDOW_ELEMENTS = 4096
SUPPORTED_DTYPES = ("f32", "bf16", "f16")
SPATIAL_RANK = 3
# A window's selected tap, as its row-major offset inside the window; i16 holds
# every offset below MAX_WINDOW_ELEMENTS. NO_SELECTION: the window's maximum is NaN.
INDEX_TYPE = "i16"
NO_SELECTION = -1
