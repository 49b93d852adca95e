"""The Flax (linen, nnx) and Equinox cases of the fixtures, registered after the raw JAX ones.

Registered in `jax_cases.CASES` (the manifest's order: JAX's cases first); the
libraries are imported inside each case, so `jax_cases` alone needs neither.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from frontends.jax_cases import bf16, case, f32, rand

# --------------------------------------------------------------------------
# flax.linen
# --------------------------------------------------------------------------


def _linen_cnn(padding="VALID"):
    import flax.linen as nn

    class CNN3D(nn.Module):
        @nn.compact
        def __call__(self, x):  # x: NDHWC
            x = nn.Conv(4, (3, 3, 3), padding="SAME")(x)
            x = nn.relu(x)
            x = nn.max_pool(x, (2, 2, 2), strides=(2, 2, 2), padding=padding)
            x = nn.Conv(4, (3, 3, 3), padding="SAME")(x)
            x = nn.relu(x)
            x = nn.max_pool(x, (3, 3, 3), strides=(2, 2, 2), padding="SAME")
            return nn.Dense(2)(x.reshape(x.shape[0], -1))

    return CNN3D()


@case("flax_linen_cnn3d_grad_params_and_input_f32",
      "flax.linen 3-D CNN (Conv-relu-max_pool k2s2 VALID, Conv-relu-max_pool k3s2 SAME, Dense), "
      "NDHWC (2,8,8,8,3); jax.grad of MSE loss wrt params AND input",
      source="flax.linen", expected=2,
      notes="the second pool (k3 s2 SAME on 4) gets asymmetric padding low 0 high 1 although the window "
            "is odd; pad operands come from func.call @relu")
def _build_14():
    model = _linen_cnn()
    x, y = rand((2, 8, 8, 8, 3)), rand((2, 2), seed=1)
    params = model.init(jax.random.PRNGKey(0), x)

    def loss(params, x, y):
        return jnp.mean((model.apply(params, x) - y) ** 2)

    return jax.grad(loss, argnums=(0, 1)), (params, x, y)


@case("flax_linen_cnn3d_train_step_bf16",
      "flax.linen 3-D CNN in bf16 (dtype/param_dtype bf16), NDHWC (2,8,8,8,3); optax SGD training step "
      "returning (new_params, loss)",
      source="flax.linen", expected=2)
def _build_15():
    import flax.linen as nn
    import optax

    class CNN3D(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.Conv(4, (3, 3, 3), dtype=bf16, param_dtype=bf16)(x)
            x = nn.max_pool(nn.relu(x), (2, 2, 2), strides=(2, 2, 2))
            x = nn.Conv(4, (3, 3, 3), dtype=bf16, param_dtype=bf16)(x)
            x = nn.max_pool(nn.relu(x), (2, 2, 2), strides=(2, 2, 2))
            return jnp.mean(x, axis=(1, 2, 3))

    model = CNN3D()
    x, y = rand((2, 8, 8, 8, 3), bf16), rand((2, 4), seed=1)
    params = model.init(jax.random.PRNGKey(0), x)
    tx = optax.sgd(1e-2)

    def train_step(params, x, y):
        def loss(p):
            return jnp.mean((model.apply(p, x).astype(f32) - y) ** 2)

        l, g = jax.value_and_grad(loss)(params)
        updates, _ = tx.update(g, tx.init(params), params)
        return optax.apply_updates(params, updates), l

    return train_step, (params, x, y)


# --------------------------------------------------------------------------
# flax.nnx
# --------------------------------------------------------------------------


def _nnx_model(pool_fn_name="nnx"):
    from flax import nnx

    if pool_fn_name == "nnx":
        pool = nnx.max_pool
    else:
        import flax.linen as nn

        pool = nn.max_pool

    class CNN3D(nnx.Module):
        def __init__(self, rngs):
            self.conv = nnx.Conv(3, 4, kernel_size=(3, 3, 3), padding="SAME", rngs=rngs)
            self.head = nnx.Linear(4, 2, rngs=rngs)

        def __call__(self, x):  # NDHWC
            x = nnx.relu(self.conv(x))
            x = pool(x, (2, 2, 2), strides=(2, 2, 2), padding="VALID")
            return self.head(jnp.mean(x, axis=(1, 2, 3)))

    return CNN3D(nnx.Rngs(0))


@case("flax_nnx_cnn3d_nnx_grad_f32",
      "flax.nnx 3-D CNN (nnx.Conv-relu-nnx.max_pool k2s2, Linear), NDHWC (2,6,6,6,3); nnx.grad of MSE "
      "loss inside jax.jit over nnx.split state",
      source="flax.nnx")
def _build_16():
    from flax import nnx

    model = _nnx_model("nnx")
    graphdef, state = nnx.split(model)
    x, y = rand((2, 6, 6, 6, 3)), rand((2, 2), seed=1)

    def loss(m, x, y):
        return jnp.mean((m(x) - y) ** 2)

    def fn(state, x, y):
        m = nnx.merge(graphdef, state)
        return nnx.grad(loss)(m, x, y)

    return fn, (state, x, y)


@case("flax_nnx_cnn3d_jax_grad_state_and_input_f32",
      "flax.nnx 3-D CNN using flax.linen.max_pool inside an nnx.Module, NDHWC (2,7,7,7,3); jax.grad "
      "wrt (state, input) on the split state",
      source="flax.nnx")
def _build_17():
    from flax import nnx

    model = _nnx_model("linen")
    graphdef, state = nnx.split(model)
    x, y = rand((2, 7, 7, 7, 3)), rand((2, 2), seed=1)

    def loss(state, x, y):
        return jnp.mean((nnx.merge(graphdef, state)(x) - y) ** 2)

    return jax.grad(loss, argnums=(0, 1)), (state, x, y)


# --------------------------------------------------------------------------
# equinox (unbatched CDHW layers, vmapped over the batch)
# --------------------------------------------------------------------------


def _eqx_model(dim: int, pool_kwargs: dict):
    import equinox as eqx

    k1, k2 = jax.random.split(jax.random.PRNGKey(0))
    conv_cls = eqx.nn.Conv3d if dim == 3 else eqx.nn.Conv2d
    pool_cls = eqx.nn.MaxPool3d if dim == 3 else eqx.nn.MaxPool2d

    class Net(eqx.Module):
        conv: Any
        pool: Any
        head: Any

        def __init__(self):
            self.conv = conv_cls(3, 4, kernel_size=3, padding=1, key=k1)
            self.pool = pool_cls(**pool_kwargs)
            self.head = eqx.nn.Linear(4, 2, key=k2)

        def __call__(self, x):  # CDHW / CHW
            x = self.pool(jax.nn.relu(self.conv(x)))
            return self.head(jnp.mean(x, axis=tuple(range(1, x.ndim))))

    return Net()


def _eqx_filter_grad_case(dim, pool_kwargs, shape, dtype=f32):
    def build():
        import equinox as eqx

        model = _eqx_model(dim, pool_kwargs)
        params, static = eqx.partition(model, eqx.is_array)
        x, y = rand(shape, dtype), rand((shape[0], 2), seed=1)

        def loss(m, x, y):
            return jnp.mean((jax.vmap(m)(x) - y) ** 2)

        def fn(params, x, y):
            return eqx.filter_grad(loss)(eqx.combine(params, static), x, y)

        return fn, (params, x, y)

    return build


EQX_NOTE = ("equinox pools channels-last: the op is rank 6 (vmap batch, 1, D, H, W, C), window "
            "(1,1,k,k,k,1), operand reached via transpose + broadcast_in_dim, result reshaped and "
            "transposed back to NCDHW")

case("equinox_maxpool3d_k2s2_filter_grad_f32",
     "equinox Conv3d-relu-MaxPool3d(k2,s2)-Linear, vmapped over batch: x (2,3,6,6,6) NCDHW; "
     "eqx.filter_grad wrt the model", source="equinox", notes=EQX_NOTE)(
    _eqx_filter_grad_case(3, dict(kernel_size=2, stride=2), (2, 3, 6, 6, 6)))
case("equinox_maxpool3d_k3s2_p1_filter_grad_f32",
     "equinox MaxPool3d(k3,s2,padding=1), x (2,3,7,7,7) NCDHW; eqx.filter_grad wrt the model",
     source="equinox", notes=EQX_NOTE)(
    _eqx_filter_grad_case(3, dict(kernel_size=3, stride=2, padding=1), (2, 3, 7, 7, 7)))
case("equinox_maxpool3d_ceil_filter_grad_f32",
     "equinox MaxPool3d(k2,s2,use_ceil=True), x (2,3,7,7,7) NCDHW: ceil mode gives extra high padding",
     source="equinox",
     notes="use_ceil=True: asymmetric padding, low 0 high 2 (one more than needed) on each spatial "
           "dim; " + EQX_NOTE)(
    _eqx_filter_grad_case(3, dict(kernel_size=2, stride=2, use_ceil=True), (2, 3, 7, 7, 7)))


@case("equinox_maxpool2d_jax_grad_model_and_input_f32",
      "equinox Conv2d-relu-MaxPool2d(k2,s2)-Linear, vmapped: x (2,3,8,8) NCHW; jax.grad wrt "
      "(array params, input)",
      source="equinox",
      notes="2-D pooling (spatial rank 2): count it only if the pass maps 2-D onto the 3-D kernel (D=1); "
            "rank 5 (vmap batch, 1, H, W, C), window (1,1,2,2,1)")
def _build_18():
    import equinox as eqx

    model = _eqx_model(2, dict(kernel_size=2, stride=2))
    params, static = eqx.partition(model, eqx.is_array)
    x, y = rand((2, 3, 8, 8)), rand((2, 2), seed=1)

    def loss(params, x, y):
        m = eqx.combine(params, static)
        return jnp.mean((jax.vmap(m)(x) - y) ** 2)

    return jax.grad(loss, argnums=(0, 1)), (params, x, y)
