// Page advice for large result buffers.
#ifndef POOL3D_KERNELS_COMMON_PAGES_H_
#define POOL3D_KERNELS_COMMON_PAGES_H_

#include <cstddef>

namespace pool3d {

// Asks Linux to back [p, p + bytes) with 2 MiB pages. A large result is
// usually a fresh mmap that XLA never touched: faulting it in 4 KiB at a time
// costs about as much as the kernel itself. Advice only: contents are
// unchanged. Only from 32 MiB, glibc's largest mmap threshold: a buffer that
// size is its own mapping, never a piece of a heap arena whose mappings advice
// would split.
void AdviseHugePages(void* p, size_t bytes);

}  // namespace pool3d

#endif  // POOL3D_KERNELS_COMMON_PAGES_H_
