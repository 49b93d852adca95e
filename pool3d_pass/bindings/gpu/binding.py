"""The registry entry of the gpu binding: which calls, lowered for which platform, refusing what.

JAX's CUDA client reports `backend.platform == "gpu"` (jaxlib's
`PyClient::platform_name` maps PJRT's "cuda", "rocm" and "oneapi" to "gpu"),
so the compile hook routes GPU programs here by that name; the functions are
lowered for the JAX platform "cuda". No JAX is imported here.

The kernels are the CUDA library's where it is built and loads, else the
Pallas ones (`implementation.py`). Under strategy "auto" the binding is used
only for the configuration classes a device run measured faster than XLA:GPU
for the kernels that serve (`speed.py`, from `measured.py`);
elsewhere the call stays XLA's with a remark naming the measured ratio. An
explicit strategy ("indices" or "recompute") uses it wherever it can run
(docs/gpu.md).
"""

from __future__ import annotations

from pool3d_pass.bindings.base import Binding, CallSignature, contract_preconditions
from pool3d_pass.contract import SUPPORTED_DTYPES, TARGETS
from pool3d_pass.options import BindingSettings

PLATFORM = "gpu"
LOWERING_PLATFORM = "cuda"
CALLS_MODULE = "pool3d_pass.bindings.gpu.calls"
PARTITIONED_MODULE = "pool3d_pass.bindings.gpu.partitioned"  # programs compiled for several devices


def unsupported(signature: CallSignature) -> str | None:
    """The contract's preconditions, then the gpu kernels' own (None: supported)."""
    reason = contract_preconditions(signature)
    if reason is not None:
        return reason
    if signature.input_type not in SUPPORTED_DTYPES:
        return f"the gpu kernels take {', '.join(SUPPORTED_DTYPES)}, not {signature.input_type}"
    return None


def require() -> None:
    """Raise ImportError where this binding cannot serve the JAX platform "gpu".

    The kernels are lowered for CUDA; a ROCm client also calls itself "gpu".
    Only backends JAX has already made are looked at (none is made here).
    """
    import sys

    xla_bridge = sys.modules.get("jax._src.xla_bridge")
    backends = getattr(xla_bridge, "_backends", None) or {}
    for backend in list(backends.values()):
        version = str(getattr(backend, "platform_version", "")).lower()
        if getattr(backend, "platform", None) == PLATFORM and "rocm" in version:
            raise ImportError("the pool3d gpu binding runs on CUDA; this JAX's gpu backend is ROCm")


def implementation(settings: BindingSettings | None = None) -> str:
    """Which kernels serve the gpu platform with these settings (None: the environment's): "cuda" or "pallas"."""
    from pool3d_pass.bindings.gpu import implementation as choice

    return choice.implementation(settings)


def auto_refusal(signature: CallSignature, input_shape: tuple[int, ...], settings: BindingSettings) -> str | None:
    from pool3d_pass.bindings.gpu import speed

    return speed.auto_refusal(signature, input_shape, implementation(settings))


def make_binding() -> Binding:
    # Every call of the contract (also `forward_output` where the contract has it).
    functions = {call: f"{CALLS_MODULE}:max_pooling_3d_{call}" for call in TARGETS}
    return Binding(
        PLATFORM, functions, LOWERING_PLATFORM, unsupported, require, auto_refusal=auto_refusal,
        partitioned_functions={call: f"{PARTITIONED_MODULE}:max_pooling_3d_{call}" for call in TARGETS},
        # the CUDA kernels' FFI handlers, where their library is built (cuda/library.py)
        register_kernels="pool3d_pass.bindings.gpu.cuda.library:register_if_built",
        describe=_describe,
        takes_settings=True,  # calls.py's and partitioned.py's functions take the run's settings=
    )


def _describe(settings: BindingSettings) -> str:
    """Which kernels serve with these settings, for each rewrite's remark (implementation.py decides)."""
    from pool3d_pass.bindings.gpu import implementation

    return implementation.summary(settings)
