"""GPU binding: the contract's calls for NVIDIA GPUs, by CUDA kernels through XLA FFI or by Pallas kernels.

- `cuda/` (`build.py`, `library.py`, `calls.py`, the C++ sources): the CUDA
  kernels (typed XLA FFI handlers for platform CUDA under the contract's
  target names), their nvcc build, loading and registration, and the calls
  through `jax.ffi.ffi_call`;
- `implementation.py`: which kernels serve, `implementation()` ("cuda" where
  the library loads, else "pallas"; `POOL3D_GPU_IMPL=cuda|pallas|auto`);
- `pallas/kernels.py`: the two Pallas kernels (the window kernel: forward maxima,
  indices, or the selection of a given forward output; the gather kernel: the
  gradient from indices, each input element reading the windows that cover it);
- `calls.py`: the contract's calls as JAX functions of those kernels, the
  interpret switch (`POOL3D_GPU_INTERPRET=1`) and the pure-JAX fallback;
- `partitioned.py`: the calls for programs compiled for several GPUs (the
  shared wrapper of `bindings/partitioned.py` around the kernels that serve);
- `binding.py`: the registry's `Binding` for platform "gpu" (what JAX's CUDA
  client reports), lowered for "cuda", opt-in under strategy "auto";

Importing this package imports no JAX (the pass and pool3d-opt need only
jaxlib); `calls`, `cuda.calls` and `pallas.kernels` do. See docs/gpu.md.
"""
