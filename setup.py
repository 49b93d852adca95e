"""Build script: compiles the CPU kernels of the pool3d custom calls.

Everything else about the package lives in pyproject.toml. The one C++
extension, ``pool3d_pass.bindings.cpu._kernel``, holds the XLA typed-FFI
handlers (every ``.cc`` under ``pool3d_pass/bindings/cpu/``: the kernel
library in ``kernels/``, the handlers, the CPython module), compiled against the FFI headers that ship inside the installed ``jaxlib``
wheel (``jaxlib/include``; the same folder ``jax.ffi.include_dir()`` returns).
pyproject.toml lists jaxlib as a build requirement; with
``--no-build-isolation`` the jaxlib of the current environment is used.
"""

import glob
import importlib.util
import os

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


def _ffi_include_dir() -> str:
    """The folder holding xla/ffi/api/ffi.h, without importing jax if possible."""
    spec = importlib.util.find_spec("jaxlib")
    if spec is not None and spec.origin:
        candidate = os.path.join(os.path.dirname(spec.origin), "include")
        if os.path.exists(os.path.join(candidate, "xla", "ffi", "api", "ffi.h")):
            return candidate
    try:
        import jax.ffi  # noqa: PLC0415 (fallback only)

        return jax.ffi.include_dir()
    except Exception as exc:  # pragma: no cover - build environment problem
        raise RuntimeError(
            "pool3d_pass needs jaxlib installed at build time (its include/ "
            "folder holds the XLA FFI headers); install a jaxlib in the range "
            "pyproject.toml gives first, or build with build isolation"
        ) from exc


class _BuildExt(build_ext):
    """Chooses compiler flags by compiler family (portable: no -march=native)."""

    def build_extensions(self):
        if self.compiler.compiler_type == "msvc":
            flags = ["/O2", "/std:c++17", "/EHsc"]
            link = []
        else:
            # -fstrict-overflow -fno-wrapv undo the -fwrapv (Python 3.11) or
            # -fno-strict-overflow (3.12+) in Python's own CFLAGS, which
            # setuptools puts first (GCC needs the first for pointers, clang the
            # second): with signed overflow defined, fewer loops are optimised
            # (CHANGELOG.md, "Build flags").
            flags = ["-O3", "-std=c++17", "-ftree-vectorize", "-fvisibility=hidden",
                     "-fno-math-errno", "-fstrict-overflow", "-fno-wrapv", "-pthread", "-Wall"]
            link = ["-pthread"]
        for ext in self.extensions:
            ext.extra_compile_args = flags + list(ext.extra_compile_args or [])
            ext.extra_link_args = link + list(ext.extra_link_args or [])
        super().build_extensions()


setup(
    ext_modules=[
        Extension(
            "pool3d_pass.bindings.cpu._kernel",
            sources=sorted(glob.glob("pool3d_pass/bindings/cpu/**/*.cc", recursive=True)),
            include_dirs=["pool3d_pass/bindings/cpu", _ffi_include_dir()],
            depends=sorted(glob.glob("pool3d_pass/bindings/cpu/**/*.h", recursive=True)),
            language="c++",
        )
    ],
    cmdclass={"build_ext": _BuildExt},
)
