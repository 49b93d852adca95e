"""Small 3-D networks in pure jax.lax for the benchmarks: a CNN classifier and a U-Net.

Both are NCDHW, f32, convolutions 3x3x3 'SAME', ReLU, max pool k2 s2 (the
pool's gradient is what the pass rewrites). Each has `init(key, ...)` giving a
parameter pytree and a `train_step(params, x, y)` returning
`(new_params, loss)`: one SGD step on a mean-squared or cross-entropy loss.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

_DN = ("NCDHW", "OIDHW", "NCDHW")
LEARNING_RATE = 1e-2


def conv(x, w, b):
    y = lax.conv_general_dilated(x, w, (1, 1, 1), "SAME", dimension_numbers=_DN)
    return y + b[None, :, None, None, None]


def max_pool(x, k: int = 2, s: int = 2):
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, k, k, k), (1, 1, s, s, s), "VALID")


def upsample(x):
    """Nearest-neighbour x2 upsampling of the three spatial axes."""
    b, c, d, h, w = x.shape
    x = jnp.broadcast_to(x[:, :, :, None, :, None, :, None], (b, c, d, 2, h, 2, w, 2))
    return x.reshape(b, c, 2 * d, 2 * h, 2 * w)


def _conv_params(rng: np.random.Generator, cin, cout):
    scale = (2.0 / (27 * cin)) ** 0.5
    return {"w": jnp.asarray(scale * rng.standard_normal((cout, cin, 3, 3, 3), np.float32)),
            "b": jnp.zeros((cout,), jnp.float32)}


def _sgd(params, grads):
    return jax.tree_util.tree_map(lambda p, g: p - LEARNING_RATE * g, params, grads)


# --- CNN classifier: [conv, ReLU, pool] x levels, global mean, dense --------------------

def cnn_init(seed: int = 0, channels=(1, 8, 16, 32), classes: int = 10):
    rng = np.random.default_rng(seed)
    convs = [_conv_params(rng, ci, co) for ci, co in zip(channels[:-1], channels[1:])]
    dense = jnp.asarray(0.1 * rng.standard_normal((channels[-1], classes), np.float32))
    return {"convs": convs, "dense": dense}


def cnn_apply(params, x):
    for p in params["convs"]:
        x = max_pool(jax.nn.relu(conv(x, p["w"], p["b"])))
    return x.mean(axis=(2, 3, 4)) @ params["dense"]


def cnn_loss(params, x, labels):
    logits = cnn_apply(params, x)
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), labels[:, None], axis=1))


def cnn_train_step(params, x, labels):
    loss, grads = jax.value_and_grad(cnn_loss)(params, x, labels)
    return _sgd(params, grads), loss


# --- U-Net: pool down, upsample + skip concat up ---------------------------------------

def unet_init(seed: int = 0, channels=(1, 8, 16, 32, 64)):
    """Two convs per level; `len(channels) - 1` levels, the last is the bottleneck."""
    levels = len(channels) - 1
    rng = np.random.default_rng(seed)
    down = [[_conv_params(rng, ci, co), _conv_params(rng, co, co)]
            for ci, co in zip(channels[:-1], channels[1:])]
    up = [[_conv_params(rng, channels[i + 1] + channels[i + 2], channels[i + 1]),
           _conv_params(rng, channels[i + 1], channels[i + 1])]
          for i in reversed(range(levels - 1))]
    head = _conv_params(rng, channels[1], channels[0])
    return {"down": down, "up": up, "head": head}


def unet_apply(params, x):
    skips = []
    for i, (c1, c2) in enumerate(params["down"]):
        if i:
            x = max_pool(x)
        x = jax.nn.relu(conv(x, c1["w"], c1["b"]))
        x = jax.nn.relu(conv(x, c2["w"], c2["b"]))
        skips.append(x)
    skips.pop()
    for c1, c2 in params["up"]:
        x = jnp.concatenate([skips.pop(), upsample(x)], axis=1)
        x = jax.nn.relu(conv(x, c1["w"], c1["b"]))
        x = jax.nn.relu(conv(x, c2["w"], c2["b"]))
    return conv(x, params["head"]["w"], params["head"]["b"])


def unet_loss(params, x, target):
    return jnp.mean((unet_apply(params, x) - target) ** 2)


def unet_train_step(params, x, target):
    loss, grads = jax.value_and_grad(unet_loss)(params, x, target)
    return _sgd(params, grads), loss
