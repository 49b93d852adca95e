"""Real models: a Flax (linen) and an Equinox 3-D CNN training step.

Each step runs through plain `jax.jit`, through `pool3d_pass.jit`, and through
`jax.jit` under `pool3d_pass.enabled()`: the same loss and gradients (f32,
non-overlapping and overlapping pools on ReLU outputs, so ties abound), with
the kernel call in the compiled program and none of XLA's gradient ops left
(oracles/compiled_hlo.py: on CPU they show as `scatter`).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pool3d_pass
from oracles.compiled_hlo import pool_gradient_ops
from pool3d_pass.contract import TARGETS

flax_linen = pytest.importorskip("flax.linen", reason="flax is a test dependency: pip install -e '.[test]'")
eqx = pytest.importorskip("equinox", reason="equinox is a test dependency: pip install -e '.[test]'")

pytestmark = pytest.mark.needs_flax


def kernel_calls(hlo: str) -> dict[str, int]:
    return {call: hlo.count(f'custom_call_target="{target}"') for call, target in TARGETS.items()}


# Two pools, each with its forward in the training step: recompute runs the
# backward call twice; indices runs the forward call and the from-indices call twice.
EXPECTED_CALLS = {
    "recompute": {"backward": 2, "forward": 0, "forward_output": 0, "backward_from_indices": 0, "backward_from_input": 0},
    "indices": {"backward": 0, "forward": 2, "forward_output": 0, "backward_from_indices": 2, "backward_from_input": 0},
}


class FlaxCNN(flax_linen.Module):
    @flax_linen.compact
    def __call__(self, x):  # NDHWC
        x = flax_linen.relu(flax_linen.Conv(8, (3, 3, 3))(x))
        x = flax_linen.max_pool(x, (2, 2, 2), strides=(2, 2, 2))
        x = flax_linen.relu(flax_linen.Conv(8, (3, 3, 3))(x))
        x = flax_linen.max_pool(x, (3, 3, 3), strides=(2, 2, 2), padding="SAME")
        return flax_linen.Dense(4)(x.reshape(x.shape[0], -1))


@functools.cache  # initialising op by op compiles each op: seconds a model, so once a process
def _flax_model():
    model = FlaxCNN()
    x = jax.nn.relu(jax.random.normal(jax.random.PRNGKey(1), (2, 12, 12, 12, 3)))
    return model, jax.jit(model.init)(jax.random.PRNGKey(0), x), x


def flax_step():
    model, params, x = _flax_model()

    def step(params, x):
        return jax.value_and_grad(lambda p: jnp.mean(model.apply(p, x) ** 2))(params)

    return step, (params, x)


class EquinoxCNN(eqx.Module):
    conv1: eqx.nn.Conv3d
    conv2: eqx.nn.Conv3d
    pool1: eqx.nn.MaxPool3d
    pool2: eqx.nn.MaxPool3d

    def __init__(self, key):
        k1, k2 = jax.random.split(key)
        self.conv1 = eqx.nn.Conv3d(3, 8, 3, padding=1, key=k1)
        self.conv2 = eqx.nn.Conv3d(8, 8, 3, padding=1, key=k2)
        self.pool1 = eqx.nn.MaxPool3d(2, stride=2)
        self.pool2 = eqx.nn.MaxPool3d(3, stride=2, padding=1)

    def __call__(self, x):  # CDHW, unbatched: vmapped by the loss
        x = self.pool1(jax.nn.relu(self.conv1(x)))
        return self.pool2(jax.nn.relu(self.conv2(x)))


@functools.cache
def _equinox_model():
    model = EquinoxCNN(jax.random.PRNGKey(0))
    params, static = eqx.partition(model, eqx.is_array)  # what eqx.filter_jit does, by hand
    return params, static, jax.nn.relu(jax.random.normal(jax.random.PRNGKey(1), (2, 3, 12, 12, 12)))


def equinox_step():
    params, static, x = _equinox_model()

    def step(params, x):
        loss = lambda p: jnp.mean(jax.vmap(eqx.combine(p, static))(x) ** 2)
        return jax.value_and_grad(loss)(params)

    return step, (params, x)


def assert_same(expected, got):
    (loss_a, grads_a), (loss_b, grads_b) = expected, got
    np.testing.assert_allclose(loss_b, loss_a, rtol=1e-6)
    leaves_a, leaves_b = jax.tree.leaves(grads_a), jax.tree.leaves(grads_b)
    assert len(leaves_a) == len(leaves_b) > 0
    for a, b in zip(leaves_a, leaves_b):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("strategy", ["recompute", "indices"])
@pytest.mark.parametrize("make_step", [flax_step, equinox_step], ids=["flax", "equinox"])
def test_training_step_through_pool3d_jit(make_step, strategy):
    step, args = make_step()
    plain = jax.jit(step).lower(*args).compile()
    assert pool_gradient_ops(plain.as_text()) > 0  # the check below sees XLA's own gradient
    compiled = pool3d_pass.jit(step, strategy=strategy).lower(*args).compile()
    hlo = compiled.as_text()
    assert kernel_calls(hlo) == EXPECTED_CALLS[strategy] and pool_gradient_ops(hlo) == 0
    assert_same(plain(*args), compiled(*args))


@pytest.mark.parametrize("make_step", [flax_step, equinox_step], ids=["flax", "equinox"])
def test_training_step_through_enable(make_step):
    step, args = make_step()
    plain = jax.jit(step).lower(*args).compile()
    assert pool_gradient_ops(plain.as_text()) > 0  # the check below sees XLA's own gradient
    expected = plain(*args)
    with pool3d_pass.enabled():
        compiled = jax.jit(step).lower(*args).compile()
        got = compiled(*args)
    hlo = compiled.as_text()
    assert kernel_calls(hlo) == EXPECTED_CALLS["indices"] and pool_gradient_ops(hlo) == 0  # auto on CPU
    assert_same(expected, got)


def test_pool_gradients_inside_scan_and_cond():
    # lax.scan lowers to a while loop, lax.cond to a case: the gradients sit in nested regions.
    from jax import lax

    def pool(x):
        return lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 3, 3, 3), (1, 1, 1, 1, 1), ((0, 0), (0, 0), (1, 1), (1, 1), (1, 1)))

    def step(x):
        def body(carry, _):
            carry = carry + 0.1 * jax.grad(lambda c: jnp.sum(pool(jax.nn.relu(c)) ** 2))(carry)
            return carry, jnp.sum(carry)

        carry, sums = lax.scan(body, x, None, length=3)
        grad = lax.cond(jnp.sum(carry) > 0, jax.grad(lambda c: jnp.sum(pool(c))), lambda c: c, carry)
        return grad, carry, sums

    x = jnp.asarray(np.random.default_rng(0).integers(-3, 4, (2, 3, 6, 6, 6)).astype(np.float32))
    compiled = pool3d_pass.jit(step).lower(x).compile()
    hlo = compiled.as_text()
    # scan: grad of sum(pool(.)**2) keeps its forward (forward call + from indices);
    # cond: grad of sum(pool(.)) has none (the fused call). Nothing is inserted.
    calls = kernel_calls(hlo)
    assert (calls["forward"], calls["backward_from_indices"], calls["backward_from_input"]) == (1, 1, 1)
    assert calls["backward"] == 0 and pool_gradient_ops(hlo) == 0
    plain = jax.jit(step).lower(x).compile()
    assert pool_gradient_ops(plain.as_text()) >= 2  # the scan's gradient and the cond's, in XLA's program
    (grad, carry, sums), (grad_ours, carry_ours, sums_ours) = plain(x), compiled(x)
    np.testing.assert_array_equal(np.asarray(grad_ours), np.asarray(grad))
    np.testing.assert_array_equal(np.asarray(carry_ours), np.asarray(carry))
    # The sums of equal carries: XLA (jax 0.12.1) may reduce them in another order in the
    # rewritten program's fusions, a last-bit difference that is not the kernels'.
    np.testing.assert_allclose(np.asarray(sums_ours), np.asarray(sums), rtol=1e-6, atol=0)
