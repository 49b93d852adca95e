"""Numerics of the Neuron binding on a Neuron device (Trn2/Trn3, Neuron SDK 2.33+); skipped elsewhere.

Run on a Neuron host, in the Neuron SDK's JAX environment (docs/neuron.md):

    python -m pytest tests/bindings/neuron/test_neuron_device.py -v    # or `make neuron-check`, the full check

Each configuration compiles the same max-pool gradient twice for the neuron
platform, with plain `jax.jit` (select_and_scatter, compiled by neuronx-cc)
and with `pool3d_pass.jit` (the NKI kernel), and compares both against the
float64 contract reference computed on the host.
"""

from __future__ import annotations

import numpy as np
import pytest

from pool3d_pass.bindings.neuron import missing_packages

if missing_packages():
    pytest.skip(
        f"needs the Neuron SDK 2.33+ ({'; '.join(missing_packages())}): run on a Trn2/Trn3 host, see docs/neuron.md",
        allow_module_level=True,
    )

import jax
import jax.numpy as jnp
from jax import lax

import pool3d_pass
from oracles.contract_numpy import max_pool_grad_reference

pytestmark = pytest.mark.neuron

if not any(device.platform == "neuron" for device in jax.devices()):
    pytest.skip("the Neuron SDK is installed but JAX sees no neuron device", allow_module_level=True)

CONFIGS = [
    # shape, window, strides, padding, dtype
    ((2, 8, 8, 16, 16), (1, 1, 2, 2, 2), (1, 1, 2, 2, 2), ((0, 0),) * 5, jnp.float32),
    ((2, 8, 9, 15, 15), (1, 1, 3, 3, 3), (1, 1, 2, 2, 2), ((0, 0), (0, 0), (1, 1), (1, 1), (1, 1)), jnp.float32),
    ((2, 8, 16, 16, 4), (1, 2, 2, 2, 1), (1, 2, 2, 2, 1), ((0, 0),) * 5, jnp.bfloat16),
]


@pytest.mark.parametrize("shape, window, strides, padding, dtype", CONFIGS)
def test_nki_kernel_matches_the_reference(shape, window, strides, padding, dtype):
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.integers(-4, 5, shape), dtype)  # many ties

    def pool(x):
        return lax.reduce_window(x, jnp.array(-jnp.inf, dtype), lax.max, window, strides, padding)

    g = jnp.asarray(rng.standard_normal(pool(x).shape), dtype)

    def grad(x, g):
        return jax.vjp(pool, x)[1](g)[0]

    compiled = pool3d_pass.jit(grad).lower(x, g).compile()
    assert "AwsNeuronCustomNativeKernel" in compiled.as_text()
    got = np.asarray(compiled(x, g), np.float64)
    want = max_pool_grad_reference(np.asarray(x, np.float64), np.asarray(g, np.float64), window, strides, padding).grad
    plain = np.asarray(jax.jit(grad)(x, g), np.float64)
    tolerance = 1e-6 if dtype == jnp.float32 else 2e-2
    np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance)
    assert np.max(np.abs(got - want)) <= np.max(np.abs(plain - want)) + tolerance
