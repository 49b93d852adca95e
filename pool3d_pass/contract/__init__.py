"""The custom-call contract between the pass and every kernel binding.

`docs/contract.md` is the prose definition; this package holds its constants
and the one helper that builds the call, so the pass and the bindings cannot
drift apart.
"""

TARGET_NAME = "pool3d.max_pooling_3d_backward"
API_VERSION_TYPED_FFI = 4
ATTRIBUTE_NAMES = ("kernel_size", "stride", "padding", "data_format", "output_format")
LAYOUTS = ("NCDHW", "NDHWC")
MAX_WINDOW_ELEMENTS = 4096
SUPPORTED_DTYPES = ("f32", "bf16", "f16")
SPATIAL_RANK = 3
