"""Runs in a venv that holds only JAX and the installed pool3d_pass wheel: the pass rewrites and runs a gradient.

`make wheel-check` installs the wheel there with no compiler reachable, then
runs this file: `pool3d_pass.jit` of a 3-D max pool's gradient must hold the
contract's backward call in its compiled program, come from the wheel (not a
source tree) and give `jax.jit`'s values; with `--require-cuda`, the wheel's
CUDA kernels' library must be there, load and register its handlers (no GPU
needed: the CUDA runtime is linked in and looks for the driver only when a
kernel runs). Exits non-zero otherwise.
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np

import pool3d_pass
from pool3d_pass.contract import TARGETS


def loss(x):
    y = jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 1, 2, 2, 2), (1, 1, 2, 2, 2), "VALID")
    return jnp.sum(y * y)


def cuda_problem() -> str | None:
    """Why the wheel's CUDA kernels cannot be registered (None: they are)."""
    from pool3d_pass.bindings.gpu.cuda import library as cuda_library

    if "site-packages" not in cuda_library.library_path():
        return f"the CUDA library is looked for at {cuda_library.library_path()}, not in the wheel"
    reason = cuda_library.unavailable()
    if reason is not None:
        return reason
    if cuda_library.built_with(cuda_library.load()) is None:
        return f"the library does not say which CUDA it was built with ({cuda_library.RUNTIME_VERSION_SYMBOL})"
    cuda_library.register()
    return None if cuda_library.is_registered() else "the CUDA handlers did not register"


def main(argv: list[str] | None = None) -> int:
    require_cuda = "--require-cuda" in (sys.argv[1:] if argv is None else argv)
    if "site-packages" not in pool3d_pass.__file__:
        print(f"pool3d_pass comes from {pool3d_pass.__file__}, not an installed wheel")
        return 1
    x = jax.random.normal(jax.random.PRNGKey(0), (2, 3, 8, 8, 8), jnp.float32)
    rewritten = pool3d_pass.jit(jax.grad(loss))
    text = rewritten.lower(x).compile().as_text()
    if not any(target in text for target in TARGETS.values()):
        print("the compiled program holds none of the contract's calls: nothing was rewritten")
        return 1
    got, want = np.asarray(rewritten(x)), np.asarray(jax.jit(jax.grad(loss))(x))
    if not np.array_equal(got, want):
        print(f"values differ from jax.jit's: max |diff| {np.max(np.abs(got - want))}")
        return 1
    cuda = "CUDA kernels not checked"
    if require_cuda:
        problem = cuda_problem()
        if problem is not None:
            print(f"the wheel's CUDA kernels: {problem}")
            return 1
        from pool3d_pass.bindings.gpu.cuda import library as cuda_library

        built = cuda_library.release(cuda_library.built_with(cuda_library.load()))
        cuda = f"CUDA kernels (CUDA {built}) load and register"
    print(f"wheel check passed: Python {sys.version.split()[0]}, jax {jax.__version__}, "
          f"pool3d_pass {pool3d_pass.__file__}: rewritten and exact; {cuda}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
