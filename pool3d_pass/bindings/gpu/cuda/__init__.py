"""The gpu binding's CUDA kernels: their sources, their nvcc build, their library and their calls.

- `kernels.cu`, `*.h`: the kernels and their typed XLA FFI handlers for
  platform CUDA (the C++ they share with the CPU kernels is
  `bindings/shared_kernels/`; nothing of `bindings/cpu/` is compiled here);
- `version.cc`: the CUDA release the library was built with;
- `build.py`: finding nvcc and building `_cuda_kernels.so` (run by
  CMakeLists.txt; the library and its ptxas report, `_cuda_kernels.so.log`,
  are left in this folder by an editable install);
- `library.py`: loading the library and registering its handlers;
- `calls.py`: the contract's calls through `jax.ffi.ffi_call`.

A package of its own so that the CUDA kernels' sources and the Python that
builds, loads and calls them sit together, apart from the Pallas kernels
(`../pallas/`). Importing it imports nothing; `calls` imports JAX.
"""
