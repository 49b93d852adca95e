"""The registry entry of the gpu binding: which calls, lowered for which platform, refusing what.

JAX's CUDA client reports `backend.platform == "gpu"` (jaxlib's
`PyClient::platform_name` maps PJRT's "cuda", "rocm" and "oneapi" to "gpu"),
so the compile hook routes GPU programs here by that name; the functions are
lowered for the JAX platform "cuda". No JAX is imported here.

The kernels are the CUDA library's where it is built and loads, else the
Pallas ones (`implementation.py`). Under strategy "auto" the GPU in use
decides: on first use of a configuration class there, its numerics and its
speed against XLA:GPU are measured in a child process and remembered
(pool3d_pass/calibration/); where nothing was measured on this machine, the
stored device run decides (`speed.py`, from `measured.py`: the classes it
measured faster for the kernels that serve), and elsewhere the call stays
XLA's with a remark naming the measured ratio. An explicit strategy
("indices" or "recompute") uses the kernels wherever they run and have not
failed the numerics battery on this GPU (docs/gpu.md).
"""

from __future__ import annotations

from pool3d_pass.bindings.base import Binding, Calibration, CallSignature, Functions, SpeedPrior, contract_preconditions
from pool3d_pass.bindings.gpu.cuda import library
from pool3d_pass.contract import CALLS, SUPPORTED_DTYPES
from pool3d_pass.options import BindingSettings

PLATFORM = "gpu"
LOWERING_PLATFORM = "cuda"


def functions():
    """{call: function}: the CUDA or Pallas kernels' calls (`calls.py`; imports JAX)."""
    from pool3d_pass.bindings.gpu import calls

    return calls.FUNCTIONS


def partitioned_functions():
    """{call: function}: the same for programs compiled for several devices (`partitioned.py`)."""
    from pool3d_pass.bindings.gpu import partitioned

    return partitioned.FUNCTIONS


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


def prior(signature: CallSignature, input_shape: tuple[int, ...], settings: BindingSettings) -> SpeedPrior:
    """The stored device run's word under `auto`, where this GPU has no verdict of its own (speed.py)."""
    from pool3d_pass.bindings.gpu import speed

    return speed.prior(signature, input_shape, implementation(settings))


def make_binding() -> Binding:
    return Binding(
        PLATFORM, Functions(functions, CALLS), LOWERING_PLATFORM, unsupported, require,
        # never run in CI: verified on the user's GPU before first use; timed there under auto
        calibration=Calibration(prior=prior, verify_first=True),
        partitioned_functions=Functions(partitioned_functions, CALLS),
        # the CUDA kernels' FFI handlers, where their library is built
        register_kernels=library.register_if_built,
        describe=_describe,
        takes_settings=True,  # calls.py's and partitioned.py's functions take the run's settings=
    )


def _describe(settings: BindingSettings) -> str:
    """Which kernels serve with these settings, for each rewrite's remark (implementation.py decides)."""
    from pool3d_pass.bindings.gpu import implementation

    return implementation.summary(settings)
