"""Neuron binding: nkilib's `max_pooling_3d_backward` NKI kernel, called through `nki.jit`.

Since Neuron 2.23 JAX calls NKI kernels by passing JAX arrays to an
`nki.jit`-wrapped kernel (`jax_neuronx.nki_call` is gone); under `jax.jit` that
produces the `AwsNeuronCustomNativeKernel` custom call the `nki` package
generates. The Neuron packages (neuronx-cc, nki, nkilib, jax-neuronx) are not
installable on machines without the Neuron SDK; there this module imports, but
`max_pooling_3d_backward` and `require_neuron_packages` fail with one line
naming what is missing. Install with `pip install pool3d_pass[neuron]` on a
trn1/trn2 host (see docs/neuron.md).
"""

from __future__ import annotations

import importlib.util

from pool3d_pass.contract import SUPPORTED_DTYPES

NEURON_PACKAGES = {"nki": "nki", "nkilib": "nkilib", "jax_neuronx": "jax-neuronx", "neuronxcc": "neuronx-cc"}


class NeuronPackagesMissing(ImportError):
    """One line naming the Neuron packages that are not installed."""


def missing_packages() -> list[str]:
    return [dist for module, dist in NEURON_PACKAGES.items() if importlib.util.find_spec(module) is None]


def require_neuron_packages() -> None:
    missing = missing_packages()
    if missing:
        raise NeuronPackagesMissing(
            f"the neuron binding needs the Neuron SDK packages {', '.join(missing)} "
            "(pip install 'pool3d_pass[neuron]' on a Neuron host)"
        )


def unsupported(signature) -> str | None:
    """The NKI kernel's preconditions beyond the contract's (None: supported).

    Called after `registry.contract_preconditions` (layouts, window, padding).
    The kernel takes the contract's element types and no other: a neutral call
    written by hand may carry another.
    """
    if signature.input_type not in SUPPORTED_DTYPES:
        return f"NKI kernel does not take {signature.input_type}"
    # Padding is one value per axis, both sides, by construction of the contract.
    return None


def max_pooling_3d_backward(
    grad_output,
    input,  # noqa: A002 - the kernel's parameter name
    output,
    *,
    kernel_size,
    stride,
    padding,
    data_format="NCDHW",
    output_format=None,
):
    require_neuron_packages()
    import nki
    from nkilib.experimental.pooling import max_pooling_3d_backward as kernel

    return nki.jit(kernel)(
        grad_output,
        input,
        output,
        kernel_size=tuple(int(v) for v in kernel_size),
        stride=tuple(int(v) for v in stride),
        padding=tuple(int(v) for v in padding),
        data_format=data_format,
        output_format=output_format or data_format,
    )
