// The CUDA release the kernels' library was built with (CUDART_VERSION, e.g.
// 13000 for 13.0): library.py compares it with the driver's before the
// CUDA kernels are chosen. The library links that release's runtime
// statically, and a runtime needs a driver of its major release or newer:
// without this check a too-old driver would surface only as a failed launch.
#include <cuda_runtime_api.h>

extern "C" __attribute__((visibility("default"))) int Pool3dCudaRuntimeVersion() {
  return CUDART_VERSION;
}
