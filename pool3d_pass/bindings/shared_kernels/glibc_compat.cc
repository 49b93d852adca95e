// A private arc4random for the libraries' statically linked libstdc++.
//
// The CPU extension and the CUDA kernels' library link libstdc++ in
// (CMakeLists.txt, gpu/cuda/build.py) so that a wheel asks only glibc of the
// machine. libstdc++.a's std::random_device (pulled in with its string and
// stream code, never called by pool3d_pass) refers to arc4random, which glibc
// has only since 2.36; that one reference would raise the wheel's manylinux
// tag from 2_34 to 2_36. This definition, hidden in the library, satisfies it
// at link time with getentropy (glibc 2.25), so no symbol newer than the
// pthread functions' (2.34) is asked for.
#include <unistd.h>

#include <cstdint>

extern "C" __attribute__((visibility("hidden"))) std::uint32_t arc4random() {
  std::uint32_t value = 0;
  // getentropy fails only where the kernel lacks getrandom (before 3.17):
  // better no number than a predictable one.
  if (getentropy(&value, sizeof value) != 0) __builtin_trap();
  return value;
}
