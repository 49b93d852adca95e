"""Lower real max-pool gradients from JAX, flax and equinox into test fixtures.

What: every case below is a small function (a gradient, a VJP, a training
step, ...) that a user would actually write. Each is lowered with
``jax.jit(fn).lower(*args)`` on CPU and written as StableHLO text to
``<out>/<name>.mlir``, with ``<out>/manifest.json`` describing all of them:
the source library, how many max-pool gradients (``stablehlo.select_and_scatter``
with select ``compare GE`` and scatter ``add``) a correct pass must rewrite,
the total select_and_scatter count, per-op details, and the shapes/dtypes of the
module's ``main`` arguments so tests can build random inputs and run the module
through XLA.

Why: hand-written IR drifts from what JAX really emits (explicit ``pad``/
``slice`` around the op on CPU, ``optimization_barrier`` under
``jax.checkpoint``, forward ``reduce_window`` present or absent, transposes from
equinox, rank-6 windows under ``vmap``...). These fixtures pin that real IR for
the pass's matcher and end-to-end numerics tests. Re-run this script after a
JAX/flax/equinox upgrade and review the diff.

Locations: the text is written with ``debug_info=True`` because it carries
``file:line:col`` locations of the user's source (the pass should keep them on
the ops it creates). Absolute paths are rewritten to be machine independent:
the repository root is stripped and anything under ``site-packages/`` is
shortened to ``site-packages/...``.

Usage::

    python scripts/lower_fixtures.py [--out tests/fixtures] [--only NAME ...]
    python scripts/lower_fixtures.py --frontend tensorflow --python /work/venv-tf/bin/python
    python scripts/lower_fixtures.py --frontend torch-xla --python /work/venv-txla/bin/python

Needs the ``fixtures`` extra (flax, equinox) next to jax==0.10.2.

Other frontends (TensorFlow/Keras, torch-xla): their cases live in
``scripts/frontends/tensorflow_cases.py`` and ``scripts/frontends/torch_xla_cases.py``,
which run in the frontend's OWN virtual environment (``--python``; none of it
is needed by ``make test``, and torch-xla 2.9 cannot share a venv with this
project's torch 2.13). Each writes the cases' StableHLO text to a JSON file;
this script (in the project's venv, with jax) inspects each module and
writes the fixtures and their manifest entries, keeping every other
frontend's entries. Extra manifest fields for those entries:
``expected_remarks`` (substrings of the pass's miss reasons, one per
select_and_scatter left alone) and ``forward_in_program`` (the program
computes the forward max pool, so a correct pass reuses it: report
``forward_inserted == 0``). The venvs, as made for the committed fixtures
(docs/frontends.md)::

    python3 -m venv /work/venv-tf
    nice /work/venv-tf/bin/pip install tensorflow-cpu==2.21.0          # keras 3.15 comes with it
    python3 -m venv /work/venv-txla
    nice /work/venv-txla/bin/pip install torch==2.9.0 torch-xla==2.9.0

torch-xla 2.9.0 requires torch 2.9.0 exactly. PyPI has no CPU-only wheel of
torch 2.9 for x86_64 (those live on download.pytorch.org, not reachable
here), so pip takes PyPI's default build, the CUDA 12.8 one (with the
nvidia-* wheels, about 3 GB, 7 GB installed); it runs on CPU, and torch-xla
is driven with ``PJRT_DEVICE=CPU``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import sys
from pathlib import Path
from typing import Any, Callable

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parent.parent
MAX_FIXTURE_BYTES = 60_000

f32, bf16, f16 = jnp.float32, jnp.bfloat16, jnp.float16


# --------------------------------------------------------------------------
# Case registry
# --------------------------------------------------------------------------


@dataclasses.dataclass
class Case:
    name: str
    description: str
    source: str  # "jax" | "flax.linen" | "flax.nnx" | "equinox"
    build: Callable[[], tuple[Callable, tuple]]  # -> (fn, example args)
    expected_pool_gradients: int
    negative: str | None = None
    notes: str | None = None
    platform: str = "cpu"  # "tpu": lowered for TPU through jax.export (attribute padding)


CASES: list[Case] = []


def case(name, description, source="jax", expected=1, negative=None, notes=None, platform="cpu"):
    def deco(build):
        CASES.append(Case(name, description, source, build, expected, negative, notes, platform))
        return build

    return deco


def rand(shape, dtype=f32, seed=0):
    """Example inputs: only shape and dtype matter for lowering."""
    return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), dtype)


def maxpool(x, window, strides, padding="VALID"):
    """Max pooling exactly as users write it with raw lax."""
    return lax.reduce_window(x, np.array(-np.inf, x.dtype), lax.max, window, strides, padding)


def minpool(x, window, strides, padding="VALID"):
    return lax.reduce_window(x, np.array(np.inf, x.dtype), lax.min, window, strides, padding)


def avgpool(x, window, strides, padding="VALID"):
    s = lax.reduce_window(x, np.array(0, x.dtype), lax.add, window, strides, padding)
    return s / np.prod(window)


def sq_loss(y):
    # f32 accumulation so bf16/f16 cases still compute a sensible loss; the
    # cotangent reaching the pool is in the pool's dtype.
    return jnp.sum(jnp.square(y.astype(f32)))


W3_NC = lambda k: (1, 1, k, k, k)  # noqa: E731  NCDHW window
W3_NL = lambda k: (1, k, k, k, 1)  # noqa: E731  NDHWC window


# --------------------------------------------------------------------------
# Raw JAX: layouts, paddings, dtypes
# --------------------------------------------------------------------------


def _grad_sq(window, strides, padding, shape, dtype=f32):
    def build():
        fn = jax.grad(lambda x: sq_loss(maxpool(x, window, strides, padding)))
        return fn, (rand(shape, dtype),)

    return build


def _grad_sum(window, strides, padding, shape, dtype=f32):
    def build():
        fn = jax.grad(lambda x: jnp.sum(maxpool(x, window, strides, padding).astype(f32)))
        return fn, (rand(shape, dtype),)

    return build


PAD1 = ((0, 0), (0, 0), (1, 1), (1, 1), (1, 1))

case("jax_ncdhw_k2s2_valid_f32",
     "grad(sum(pool(x)**2)), NCDHW (2,3,6,6,6), k2 s2 VALID; forward reduce_window present")(
    _grad_sq(W3_NC(2), W3_NC(2), "VALID", (2, 3, 6, 6, 6)))
case("jax_ncdhw_k2s2_valid_f32_sum",
     "grad(sum(pool(x))), NCDHW (2,3,6,6,6), k2 s2 VALID; cotangent is all ones, forward absent")(
    _grad_sum(W3_NC(2), W3_NC(2), "VALID", (2, 3, 6, 6, 6)))
case("jax_ncdhw_k2s2_valid_odd9_f32",
     "grad(sum(pool(x)**2)), NCDHW (2,3,9,9,9), k2 s2 VALID (last plane/row/col dropped)")(
    _grad_sq(W3_NC(2), W3_NC(2), "VALID", (2, 3, 9, 9, 9)))
case("jax_ncdhw_k2s2_valid_bf16",
     "grad(sum(pool(x)**2)), NCDHW (2,3,6,6,6) bf16, k2 s2 VALID")(
    _grad_sq(W3_NC(2), W3_NC(2), "VALID", (2, 3, 6, 6, 6), bf16))
case("jax_ncdhw_k3s2_p1_bf16",
     "grad(sum(pool(x)**2)), NCDHW (2,3,7,7,7) bf16, k3 s2 explicit pad 1 (overlapping windows)")(
    _grad_sq(W3_NC(3), W3_NC(2), PAD1, (2, 3, 7, 7, 7), bf16))
case("jax_ncdhw_k2s2_valid_f16",
     "grad(sum(pool(x)**2)), NCDHW (2,3,6,6,6) f16, k2 s2 VALID")(
    _grad_sq(W3_NC(2), W3_NC(2), "VALID", (2, 3, 6, 6, 6), f16))
case("jax_ndhwc_k3s2_valid_f32",
     "grad(sum(pool(x)**2)), NDHWC (2,7,7,7,3), k3 s2 VALID (overlap)")(
    _grad_sq(W3_NL(3), W3_NL(2), "VALID", (2, 7, 7, 7, 3)))
case("jax_ndhwc_k2s2_valid_bf16",
     "grad(sum(pool(x)**2)), NDHWC (2,6,8,6,3) bf16, k2 s2 VALID")(
    _grad_sq(W3_NL(2), W3_NL(2), "VALID", (2, 6, 8, 6, 3), bf16))
case("jax_ncdhw_k3s2_same_f32",
     "grad(sum(pool(x)**2)), NCDHW (2,3,7,7,7), k3 s2 SAME -> symmetric pad (1,1)")(
    _grad_sq(W3_NC(3), W3_NC(2), "SAME", (2, 3, 7, 7, 7)))
case("jax_ncdhw_k2s2_same_even_f32",
     "grad(sum(pool(x)**2)), NCDHW (2,3,7,7,7), k2 s2 SAME, even window -> asymmetric pad low 0 high 1",
     notes="asymmetric padding (0,1): not expressible as the kernel's symmetric padding; "
           "JAX's CPU lowering already pads explicitly with -inf, so a pass can feed the padded operand")(
    _grad_sq(W3_NC(2), W3_NC(2), "SAME", (2, 3, 7, 7, 7)))
case("jax_ndhwc_k2s1_same_even_f32",
     "grad(sum(pool(x)**2)), NDHWC (2,6,6,6,3), k2 s1 SAME, even window -> pad low 0 high 1, overlap",
     notes="asymmetric padding (0,1), overlapping windows")(
    _grad_sq(W3_NL(2), W3_NL(1), "SAME", (2, 6, 6, 6, 3)))
case("jax_ncdhw_k3s2_p1_f32",
     "grad(sum(pool(x)**2)), NCDHW (2,3,8,8,8), k3 s2 explicit symmetric pad 1 (overlap)")(
    _grad_sq(W3_NC(3), W3_NC(2), PAD1, (2, 3, 8, 8, 8)))
case("jax_ncdhw_k3s1_p1_f32",
     "grad(sum(pool(x)**2)), NCDHW (2,3,6,6,6), k3 s1 explicit pad 1 (shape-preserving, heavy overlap)")(
    _grad_sq(W3_NC(3), W3_NC(1), PAD1, (2, 3, 6, 6, 6)))
case("jax_ncdhw_k122_s122_f32",
     "grad(sum(pool(x)**2)), NCDHW (2,3,5,8,8), non-cubic window (1,2,2) stride (1,2,2): spatial-only pooling")(
    _grad_sq((1, 1, 1, 2, 2), (1, 1, 1, 2, 2), "VALID", (2, 3, 5, 8, 8)))
case("jax_ncdhw_k232_s121_f32",
     "grad(sum(pool(x)**2)), NCDHW (2,3,7,8,9), anisotropic window (2,3,2) stride (1,2,1)")(
    _grad_sq((1, 1, 2, 3, 2), (1, 1, 1, 2, 1), "VALID", (2, 3, 7, 8, 9)))
case("jax_cdhw_unbatched_k2s2_f32",
     "grad(sum(pool(x)**2)), unbatched channel-first (3,6,6,6), window (1,2,2,2) (rank 4)",
     notes="rank-4 operand: no batch dim; a pass may treat it as N=1 NCDHW")(
    _grad_sq((1, 2, 2, 2), (1, 2, 2, 2), "VALID", (3, 6, 6, 6)))
case("jax_nchw_2d_k2s2_f32",
     "grad(sum(pool(x)**2)), 2-D NCHW (2,3,8,8), window (1,1,2,2) (rank 4)",
     notes="2-D pooling (spatial rank 2): count it only if the pass maps 2-D onto the 3-D kernel (D=1)")(
    _grad_sq((1, 1, 2, 2), (1, 1, 2, 2), "VALID", (2, 3, 8, 8)))


# --------------------------------------------------------------------------
# Raw JAX: transformations
# --------------------------------------------------------------------------


@case("jax_vjp_unused_primal_f32",
      "jax.vjp(pool, x), return only vjp_fn(g); x NCDHW (2,3,7,7,7), g given, k3 s2 VALID; forward absent")
def _build_1():
    def fn(x, g):
        _, vjp_fn = jax.vjp(lambda x: maxpool(x, W3_NC(3), W3_NC(2)), x)
        (dx,) = vjp_fn(g)
        return dx

    return fn, (rand((2, 3, 7, 7, 7)), rand((2, 3, 3, 3, 3), seed=1))


@case("jax_vjp_with_primal_f32",
      "jax.vjp(pool, x), return (y, vjp_fn(g)); NDHWC (2,6,6,6,3), k2 s2 VALID; two results")
def _build_2():
    def fn(x, g):
        y, vjp_fn = jax.vjp(lambda x: maxpool(x, W3_NL(2), W3_NL(2)), x)
        (dx,) = vjp_fn(g)
        return y, dx

    return fn, (rand((2, 6, 6, 6, 3)), rand((2, 3, 3, 3, 3), seed=1))


@case("jax_vmap_grad_ndhwc_rank6_f32",
      "jax.vmap(jax.grad(loss)) over 4 examples of NDHWC (2,6,6,6,3): rank-6 window (1,1,2,2,2,1)",
      notes="rank-6 operand; the leading two dims are batch-like")
def _build_3():
    g = jax.grad(lambda x: sq_loss(maxpool(x, W3_NL(2), W3_NL(2))))
    return jax.vmap(g), (rand((4, 2, 6, 6, 6, 3)),)


@case("jax_vmap_grad_cdhw_f32",
      "jax.vmap(jax.grad(loss)) over unbatched CDHW (3,6,6,6) examples, batch 2: rank-5 window (1,1,2,2,2)")
def _build_4():
    g = jax.grad(lambda x: sq_loss(maxpool(x, (1, 2, 2, 2), (1, 2, 2, 2))))
    return jax.vmap(g), (rand((2, 3, 6, 6, 6)),)


@case("jax_checkpoint_f32",
      "grad of jax.checkpoint(pool -> square-sum), NCDHW (2,3,6,6,6), k2 s2; forward recomputed under "
      "optimization_barrier")
def _build_5():
    inner = jax.checkpoint(lambda x: sq_loss(maxpool(x, W3_NC(2), W3_NC(2))))
    return jax.grad(inner), (rand((2, 3, 6, 6, 6)),)


@case("jax_checkpoint_two_layer_f32",
      "grad through jax.checkpoint(conv-free block: pool -> tanh -> pool), NCDHW (2,3,8,8,8), "
      "k2 s2 then k2 s2; 2 pool gradients",
      expected=2)
def _build_6():
    @jax.checkpoint
    def block(x):
        y = jnp.tanh(maxpool(x, W3_NC(2), W3_NC(2)))
        return maxpool(y, W3_NC(2), W3_NC(2))

    return jax.grad(lambda x: sq_loss(block(x))), (rand((2, 3, 8, 8, 8)),)


@case("jax_nested_jit_f32",
      "grad(sum(jit(pool)(x)**2)), pool in an inner jax.jit; NCDHW (2,3,6,6,6), k2 s2",
      notes="forward reduce_window and select_and_scatter sit in two different private funcs "
            "called from main")
def _build_7():
    inner = jax.jit(lambda x: maxpool(x, W3_NC(2), W3_NC(2)))
    return jax.grad(lambda x: sq_loss(inner(x))), (rand((2, 3, 6, 6, 6)),)


@case("jax_nested_jit_grad_inside_f32",
      "outer jit calls an inner jit that computes the pool gradient; NDHWC (2,7,7,7,3), k3 s2 SAME")
def _build_8():
    inner = jax.jit(jax.grad(lambda x: sq_loss(maxpool(x, W3_NL(3), W3_NL(2), "SAME"))))
    return (lambda x: inner(x * 2.0) + 1.0), (rand((2, 7, 7, 7, 3)),)


# --------------------------------------------------------------------------
# Negatives: the pass must leave these alone
# --------------------------------------------------------------------------


@case("neg_jax_minpool_grad_f32",
      "grad of min pooling (reduce_window min, +inf init): select is compare LE",
      expected=0, negative="min pooling: select_and_scatter with compare LE and +inf padding, not a max pool")
def _build_9():
    return jax.grad(lambda x: sq_loss(minpool(x, W3_NC(2), W3_NC(2)))), (rand((2, 3, 6, 6, 6)),)


@case("neg_jax_maxpool_jvp_f32",
      "jax.jvp of max pooling (forward mode): lowered through select_and_gather_add, no select_and_scatter",
      expected=0, negative="forward-mode derivative; no select_and_scatter is emitted")
def _build_10():
    def fn(x, t):
        return jax.jvp(lambda x: maxpool(x, W3_NC(2), W3_NC(2)), (x,), (t,))

    return fn, (rand((2, 3, 6, 6, 6)), rand((2, 3, 6, 6, 6), seed=1))


@case("neg_jax_avgpool_grad_f32",
      "grad of average pooling (reduce_window add): lowers to pad + reduce_window add",
      expected=0, negative="average pooling: no select_and_scatter")
def _build_11():
    return jax.grad(lambda x: sq_loss(avgpool(x, W3_NC(2), W3_NC(2)))), (rand((2, 3, 6, 6, 6)),)


@case("jax_base_dilation_f32",
      "grad of max pooling with base (lhs) dilation 2: the operand is pad(pad(x, interior=1)), "
      "then a strided slice of the result",
      expected=1,
      notes="the outer pad is a no-op: the kernel pools the interior-padded tensor, holes and all; exact")
def _build_12():
    def pool(x):
        return lax.reduce_window(x, -jnp.inf, lax.max, W3_NC(2), W3_NC(1), "VALID",
                                 base_dilation=W3_NC(2))

    return jax.grad(lambda x: sq_loss(pool(x))), (rand((2, 3, 5, 5, 5)),)


@case("neg_jax_select_gt_f32",
      "JAX-internal _select_and_scatter_add with select_prim=gt: compare GT (last max wins ties)",
      expected=0,
      negative="compare GT: different tie rule from the kernel (first max wins); emitted by no public "
               "JAX API, lowered through jax._src.lax.windowed_reductions._select_and_scatter_add")
def _build_13():
    from jax._src.lax import windowed_reductions as wr

    def fn(x, g):
        return wr._select_and_scatter_add(g, x, lax.gt_p, W3_NC(2), W3_NC(2), [(0, 0)] * 5)

    return fn, (rand((2, 3, 6, 6, 6)), rand((2, 3, 3, 3, 3), seed=1))


# --------------------------------------------------------------------------
# Raw JAX lowered for TPU: padding on the select_and_scatter's attribute
# --------------------------------------------------------------------------

TPU_NOTE = ("lowered for TPU with jax.export(platforms=('tpu',)) on this CPU machine: padding on the "
            "select_and_scatter's attribute, raw operand (JAX's CPU/GPU form pads explicitly); runs on "
            "XLA:CPU, where ties in padded windows may go to another element than the spec's")

case("jax_tpu_ncdhw_k2s2_same_odd7_f32",
     "grad(sum(pool(x)**2)), NCDHW (2,3,7,7,7), k2 s2 SAME: attribute padding (0,1) (TPU lowering)",
     notes=TPU_NOTE, platform="tpu")(
    _grad_sq(W3_NC(2), W3_NC(2), "SAME", (2, 3, 7, 7, 7)))
case("jax_tpu_ncdhw_k3s2_p1_f32",
     "grad(sum(pool(x)**2)), NCDHW (2,3,8,8,8), k3 s2 padding (1,1) (TPU lowering), overlap",
     notes=TPU_NOTE, platform="tpu")(
    _grad_sq(W3_NC(3), W3_NC(2), PAD1, (2, 3, 8, 8, 8)))
case("jax_tpu_ndhwc_k2s2_p1_f32",
     "grad(sum(pool(x)**2)), NDHWC (2,6,6,6,3), k2 s2 padding (1,1) (TPU lowering)",
     notes=TPU_NOTE, platform="tpu")(
    _grad_sq(W3_NL(2), W3_NL(2), ((0, 0), (1, 1), (1, 1), (1, 1), (0, 0)), (2, 6, 6, 6, 3)))
case("jax_tpu_ncdhw_k2s2_same_odd7_bf16",
     "grad(sum(pool(x)**2)), NCDHW (2,3,7,7,7) bf16, k2 s2 SAME: attribute padding (0,1) (TPU lowering)",
     notes=TPU_NOTE, platform="tpu")(
    _grad_sq(W3_NC(2), W3_NC(2), "SAME", (2, 3, 7, 7, 7), bf16))


@case("jax_tpu_vjp_unused_primal_k2s1_same_f32",
      "jax.vjp(pool, x), return only vjp_fn(g); x NCDHW (2,3,6,6,6), g given, k2 s1 SAME: attribute "
      "padding (0,1), overlap, forward absent (TPU lowering)",
      notes=TPU_NOTE, platform="tpu")
def _build_tpu_vjp():
    def fn(x, g):
        _, vjp_fn = jax.vjp(lambda x: maxpool(x, W3_NC(2), W3_NC(1), "SAME"), x)
        (dx,) = vjp_fn(g)
        return dx

    return fn, (rand((2, 3, 6, 6, 6)), rand((2, 3, 6, 6, 6), seed=1))


NOT_LOWERABLE: list[dict[str, str]] = []


def probe_window_dilation() -> None:
    """Record what happens for window dilation (no fixture if JAX refuses)."""
    x = rand((2, 3, 7, 7, 7))

    def pool(x):
        return lax.reduce_window(x, -jnp.inf, lax.max, W3_NC(2), W3_NC(1), "VALID",
                                 window_dilation=W3_NC(2))

    try:
        jax.jit(jax.grad(lambda x: sq_loss(pool(x)))).lower(x)
    except NotImplementedError as e:
        NOT_LOWERABLE.append({
            "name": "jax_maxpool_window_dilation_grad",
            "description": "grad of max pooling with window dilation 2 (NCDHW, k2 s1)",
            "outcome": f"NotImplementedError at trace time: {e}",
        })
    else:  # pragma: no cover - would need a fixture
        NOT_LOWERABLE.append({
            "name": "jax_maxpool_window_dilation_grad",
            "description": "grad of max pooling with window dilation 2",
            "outcome": "lowered without error in this JAX version: add a fixture",
        })


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


# --------------------------------------------------------------------------
# Lowering, inspection, output
# --------------------------------------------------------------------------

_SITE_RE = re.compile(r'"[^"\n]*/site-packages/')


def relativize_paths(text: str) -> str:
    text = text.replace(f'"{REPO_ROOT}/', '"')
    return _SITE_RE.sub('"site-packages/', text)


_MLIR_TO_NP = {
    "f64": "float64", "f32": "float32", "f16": "float16", "bf16": "bfloat16",
    "i64": "int64", "i32": "int32", "i16": "int16", "i8": "int8", "i1": "bool",
    "ui32": "uint32", "ui8": "uint8",
}


def _ir():
    from jax._src.interpreters import mlir as jax_mlir
    from jax.extend.mlir import ir

    return jax_mlir, ir


def _dense_i64(attr) -> list:
    from jax.extend.mlir import ir

    if isinstance(attr, ir.DenseI64ArrayAttr):
        return [int(v) for v in attr]
    d = attr if isinstance(attr, ir.DenseIntElementsAttr) else ir.DenseIntElementsAttr(attr)
    vals = [int(v) for v in d]
    shape = ir.ShapedType(d.type).shape
    if len(shape) == 2:
        return [vals[i * shape[1]:(i + 1) * shape[1]] for i in range(shape[0])]
    return vals


def inspect_module(text: str) -> dict:
    """Parse the module and summarize main's signature and the pooling ops."""
    jax_mlir, ir = _ir()
    with jax_mlir.make_ir_context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        assert module.operation.verify()
        main = None
        funcs = []
        for op in module.body.operations:
            if op.operation.name == "func.func":
                sym = ir.StringAttr(op.attributes["sym_name"]).value
                funcs.append(sym)
                if sym == "main":
                    main = op
        ftype = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)

        def ty(t):
            rt = ir.RankedTensorType(t)
            return {"shape": list(rt.shape), "dtype": _MLIR_TO_NP[str(rt.element_type)]}

        args = [ty(t) for t in ftype.inputs]
        results = [ty(t) for t in ftype.results]

        counts: dict[str, int] = {}
        sas: list[dict] = []

        def walk(op):
            op = op.operation
            counts[op.name] = counts.get(op.name, 0) + 1
            if op.name == "stablehlo.select_and_scatter":
                sas.append(describe_sas(op))
            return ir.WalkResult.ADVANCE

        def describe_sas(op):
            def region_ops(i):
                return [o.operation for o in op.regions[i].blocks[0].operations]

            select_ops = region_ops(0)
            cmp = [o for o in select_ops if o.name == "stablehlo.compare"]
            direction = None
            if cmp:  # "#stablehlo<comparison_direction GE>" -> "GE"
                attr = str(cmp[0].attributes["comparison_direction"])
                direction = re.search(r"comparison_direction (\w+)", attr).group(1)
            scatter = [o.name for o in region_ops(1) if o.name != "stablehlo.return"]
            operand = op.operands[0]
            owner = operand.owner
            operand_def = (owner.operation.name if isinstance(owner, (ir.Operation, ir.OpView))
                           else "block_argument")
            info = {
                "func": None,
                "operand_type": str(operand.type),
                "source_type": str(op.operands[1].type),
                "window_dimensions": _dense_i64(op.attributes["window_dimensions"]),
                "window_strides": (_dense_i64(op.attributes["window_strides"]) if "window_strides" in op.attributes
                                   else [1] * len(_dense_i64(op.attributes["window_dimensions"]))),
                "padding": _dense_i64(op.attributes["padding"]) if "padding" in op.attributes else None,
                "select_compare": direction,
                "scatter_ops": scatter,
                "operand_defined_by": operand_def,
            }
            if operand_def == "stablehlo.pad":
                pad = owner.operation
                pad_inp = pad.operands[0].owner
                info["pad"] = {
                    "low": _dense_i64(pad.attributes["edge_padding_low"]),
                    "high": _dense_i64(pad.attributes["edge_padding_high"]),
                    "interior": _dense_i64(pad.attributes["interior_padding"]),
                    "value_defined_by": pad.operands[1].owner.operation.name,
                    "input_defined_by": (pad_inp.operation.name
                                         if isinstance(pad_inp, (ir.Operation, ir.OpView))
                                         else "block_argument"),
                }
            parent = op.parent
            while parent is not None and parent.name != "func.func":
                parent = parent.parent
            if parent is not None:
                info["func"] = ir.StringAttr(parent.attributes["sym_name"]).value
            return info

        module.operation.walk(walk)

    return {
        "args": args,
        "results": results,
        "funcs": funcs,
        "select_and_scatter_count": counts.get("stablehlo.select_and_scatter", 0),
        "reduce_window_count": counts.get("stablehlo.reduce_window", 0),
        "optimization_barrier_count": counts.get("stablehlo.optimization_barrier", 0),
        "transpose_count": counts.get("stablehlo.transpose", 0),
        "select_and_scatter": sas,
    }


def lower_case(c: Case) -> tuple[str, dict]:
    fn, args = c.build()
    if c.platform == "cpu":
        text = relativize_paths(jax.jit(fn).lower(*args).as_text(debug_info=True))
    else:  # another platform's lowering, made here: jax.export lowers for any platform
        exported = jax.export.export(jax.jit(fn), platforms=(c.platform,))(*args)
        text = relativize_paths(exported.mlir_module())
    info = inspect_module(text)
    text_count = len(re.findall(r'"stablehlo\.select_and_scatter"|stablehlo\.select_and_scatter\b', text))
    assert text_count == info["select_and_scatter_count"], (c.name, text_count, info)
    if c.negative is None:
        ge_add = [s for s in info["select_and_scatter"]
                  if s["select_compare"] == "GE" and s["scatter_ops"] == ["stablehlo.add"]]
        assert len(ge_add) == c.expected_pool_gradients == info["select_and_scatter_count"], (
            c.name, c.expected_pool_gradients, info["select_and_scatter_count"])
    else:
        assert c.expected_pool_gradients == 0
    entry = {
        "name": c.name,
        "file": f"{c.name}.mlir",
        "description": c.description,
        "source": c.source,
        "expected_pool_gradients": c.expected_pool_gradients,
        "negative": c.negative,
        "notes": c.notes,
        **({"platform": c.platform} if c.platform != "cpu" else {}),
        **info,
    }
    return text, entry


_NUM_LIST_RE = re.compile(r"\[\s*(-?\d+(?:,\s*-?\d+)*)\s*\]")


def _compact_json(obj) -> str:
    """Indented JSON with lists of integers kept on one line (smaller diffs)."""
    text = json.dumps(obj, indent=1)
    return _NUM_LIST_RE.sub(lambda m: "[" + ", ".join(re.split(r",\s*", m.group(1))) + "]", text)


def versions() -> dict:
    import importlib.metadata as md

    out = {}
    for pkg in ("jax", "jaxlib", "flax", "equinox", "optax"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = None
    return out


# --------------------------------------------------------------------------
# Other frontends: lowered in their own venv, inspected here
# --------------------------------------------------------------------------

FRONTENDS = {
    # frontend -> (case script, the manifest `source` values it owns)
    "jax": (None, {"jax", "flax.linen", "flax.nnx", "equinox"}),
    "tensorflow": ("tensorflow_cases.py", {"tensorflow", "keras"}),
    "torch-xla": ("torch_xla_cases.py", {"torch-xla"}),
}


def lower_frontend(frontend: str, python: str, only: list[str] | None) -> tuple[list[tuple[str, dict]], dict]:
    """Run the frontend's case script under `python`; ([(text, manifest entry)], versions)."""
    import subprocess
    import tempfile

    script = REPO_ROOT / "scripts" / "frontends" / FRONTENDS[frontend][0]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "cases.json"
        env = dict(os.environ, PJRT_DEVICE=os.environ.get("PJRT_DEVICE", "CPU"))
        subprocess.run([python, str(script), str(out), *(only or [])], check=True, env=env)
        cases = json.loads(out.read_text())
    results, frontend_versions = [], {}
    for c in cases:
        text = relativize_paths(c.pop("text"))
        frontend_versions = c.pop("versions")
        info = inspect_module(text)
        ge_add = [s for s in info["select_and_scatter"]
                  if s["select_compare"] == "GE" and s["scatter_ops"] == ["stablehlo.add"]]
        if c["negative"] is None:
            assert len(ge_add) == c["expected_pool_gradients"] == info["select_and_scatter_count"], (
                c["name"], c["expected_pool_gradients"], info["select_and_scatter_count"])
        else:
            assert c["expected_pool_gradients"] == 0
        entry = {"name": c["name"], "file": f"{c['name']}.mlir", "description": c["description"],
                 "source": c["source"], "expected_pool_gradients": c["expected_pool_gradients"],
                 "negative": c["negative"], "notes": c["notes"],
                 "expected_remarks": c["expected_remarks"], "forward_in_program": c["forward_in_program"],
                 **info}
        results.append((text, entry))
    return results, frontend_versions


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=REPO_ROOT / "tests" / "fixtures")
    ap.add_argument("--only", nargs="*", help="re-lower only these case names; their manifest "
                    "entries are replaced, the others kept")
    ap.add_argument("--frontend", choices=sorted(FRONTENDS), default="jax",
                    help="which frontend's cases to lower (default jax: this process's JAX, flax, equinox)")
    ap.add_argument("--python", help="the frontend venv's python (tensorflow, torch-xla)")
    ns = ap.parse_args(argv)
    ns.out.mkdir(parents=True, exist_ok=True)

    frontend_versions = {}
    if ns.frontend == "jax":
        cases = [c for c in CASES if not ns.only or c.name in ns.only]
        names = [c.name for c in CASES]
        assert len(names) == len(set(names)), "duplicate case names"
        lowered = [lower_case(c) for c in cases]
        probe_window_dilation()
    else:
        if not ns.python:
            ap.error(f"--frontend {ns.frontend} needs --python (its venv's interpreter, docs/frontends.md)")
        lowered, frontend_versions = lower_frontend(ns.frontend, ns.python, ns.only)

    entries = []
    for text, entry in lowered:
        size = len(text.encode())
        assert size < MAX_FIXTURE_BYTES, (entry["name"], size)
        (ns.out / entry["file"]).write_text(text)
        entries.append(entry)
        print(f"{entry['name']:55s} sas={entry['select_and_scatter_count']} "
              f"expected={entry['expected_pool_gradients']} rw={entry['reduce_window_count']} "
              f"{size / 1024:.1f} KiB", file=sys.stderr)

    manifest_path = ns.out / "manifest.json"
    old = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    owned = FRONTENDS[ns.frontend][1]
    old_entries = old.get("fixtures", [])
    fresh = {e["name"]: e for e in entries}
    if ns.only:  # replace the named entries in place, keep the rest
        merged = [fresh.pop(e["name"], e) for e in old_entries] + list(fresh.values())
    else:  # this frontend's entries are exactly this run's; other frontends' are kept
        merged = [e for e in old_entries if e["source"] not in owned] + entries
    all_versions = dict(old.get("frontend_versions", {}))
    if ns.frontend != "jax":
        all_versions[ns.frontend] = frontend_versions
    manifest = {
        "generated_by": "scripts/lower_fixtures.py",
        "versions": versions() if ns.frontend == "jax" else old.get("versions", versions()),
        "frontend_versions": all_versions,
        "platform": jax.default_backend() if ns.frontend == "jax" else old.get("platform", "cpu"),
        "debug_info": True,
        "fixtures": merged,
        "not_lowerable": NOT_LOWERABLE if ns.frontend == "jax" else old.get("not_lowerable", []),
    }
    manifest_path.write_text(_compact_json(manifest) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
