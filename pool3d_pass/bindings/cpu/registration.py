"""Registration of the CPU kernels' XLA FFI handlers, without importing JAX.

`import pool3d_pass` calls `register()` (through the bindings registry), so
any program that imported pool3d_pass can run an executable holding the
pool3d calls: one compiled now, one deserialized with
`jax.experimental.serialize_executable`, or one found in JAX's persistent
compilation cache. It goes through `jaxlib.xla_client.register_custom_call_target`,
the function `jax.ffi.register_ffi_target` itself calls: before XLA's CPU
client exists the handlers wait in jaxlib's pending list, which the client
registers when it is created. So importing pool3d_pass stays cheap (no
`import jax`; the extension is a small library).

The environment variable POOL3D_KERNEL_LIBRARY, read by the first
`register()`, loads the extension from that file instead of the installed
`_kernel` module (e.g. a sanitizer build, `make sanitize`).
"""

from __future__ import annotations

import importlib.util
import os

from pool3d_pass.bindings.ffi_registration import HandlerRegistration


def load_kernel_module():
    """The `_kernel` extension: the installed one, or the file POOL3D_KERNEL_LIBRARY names."""
    path = os.environ.get("POOL3D_KERNEL_LIBRARY")
    if path:
        spec = importlib.util.spec_from_file_location("pool3d_pass.bindings.cpu._kernel", path)
        if spec is None or spec.loader is None:
            raise ImportError(f"POOL3D_KERNEL_LIBRARY={path!r} is not a loadable extension")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    try:
        from pool3d_pass.bindings.cpu import _kernel
    except ImportError as exc:  # pragma: no cover - broken install
        raise ImportError(
            "the pool3d CPU kernel extension (pool3d_pass.bindings.cpu._kernel) "
            "is not built; reinstall the package, e.g. `pip install -e .`"
        ) from exc
    return _kernel


_registration = HandlerRegistration("cpu", lambda: load_kernel_module().handlers())


def register() -> None:
    """Register every CPU FFI handler under its target name (contract.TARGETS).

    Idempotent and thread-safe; raises ImportError if the extension is missing.
    """
    _registration.register()


def is_registered() -> bool:
    """Whether register() has run in this process."""
    return _registration.done
