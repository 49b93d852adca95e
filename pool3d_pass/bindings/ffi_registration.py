"""Registering a platform's typed XLA FFI handlers once per process, without importing JAX.

The CPU and CUDA kernels' libraries each hold one handler per call of the
contract. Both register them the same way: under the contract's target names
(`contract.TARGETS`), through `jaxlib.xla_client.register_custom_call_target`
(the function `jax.ffi.register_ffi_target` itself calls; before the
platform's client exists the handlers wait in jaxlib's pending list), once,
whichever thread asks first.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

from pool3d_pass.contract import TARGETS

FFI_API_VERSION = 1  # XLA's typed FFI (jax.ffi.register_ffi_target's api_version)


class HandlerRegistration:
    """Registers `handlers()` ({call kind: PyCapsule}) for `platform` on the first `register()`."""

    def __init__(self, platform: str, handlers: Callable[[], Mapping[str, object]]):
        self.platform = platform
        self._handlers = handlers
        self._lock = threading.Lock()
        self.done = False

    def register(self) -> None:
        """Idempotent and thread-safe; raises what `handlers()` raises (e.g. ImportError)."""
        if self.done:
            return
        with self._lock:
            if self.done:
                return
            from jaxlib import xla_client  # jaxlib, not jax: cheap

            for kind, capsule in self._handlers().items():
                xla_client.register_custom_call_target(TARGETS[kind], capsule, self.platform, FFI_API_VERSION)
            self.done = True
