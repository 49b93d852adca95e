"""GPU binding: the contract's calls as Pallas kernels on the Triton backend, for NVIDIA GPUs.

- `kernels.py`: the two Pallas kernels (the window kernel: forward maxima,
  indices, or the selection of a given forward output; the gather kernel: the
  gradient from indices, each input element reading the windows that cover it);
- `calls.py`: the contract's calls as JAX functions of those kernels, the
  interpret switch (`POOL3D_GPU_INTERPRET=1`) and the pure-JAX fallback;
- `binding.py`: the registry's `Binding` for platform "gpu" (what JAX's CUDA
  client reports), lowered for "cuda", opt-in under strategy "auto";
- `deviceless.py`: compiling for an H200 with no GPU present (the checks).

Importing this package imports no JAX (the pass and pool3d-opt need only
jaxlib); `calls` and `kernels` do. See docs/gpu.md.
"""
