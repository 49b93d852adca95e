"""The case registry of the fixtures `scripts/lower_fixtures.py` lowers in this venv, and the raw JAX cases.

The Flax and Equinox cases register here too, from flax_equinox_cases.py. Each case is a small function (a gradient, a VJP, a training step, ...) that a
user would actually write, registered with `@case(...)` (or `case(...)(build)`)
in `CASES`: `build()` returns `(fn, example args)`; the lowering, inspection
and manifest are `fixture_lowering.py`'s. The fixtures' locations point here
(file:line:col of the user's source). Needs the `fixtures` extra (flax,
equinox); set `JAX_PLATFORMS` before importing (lower_fixtures.py does).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

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


W3_NC = lambda k: (1, 1, k, k, k)  # NCDHW window
W3_NL = lambda k: (1, k, k, k, 1)  # NDHWC window


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
