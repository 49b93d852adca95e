"""Tests of the CPU FFI kernel of pool3d.max_pooling_3d_backward.

The kernel is called through JAX (under jax.jit) and compared with the
original program, XLA's select_and_scatter reached through `jax.vjp` of
`lax.reduce_window(x, -inf, lax.max, ...)`, and with a float64 numpy
implementation of docs/contract.md. Invalid operands and attributes must give
an error that names the problem, never a crash.
"""

from __future__ import annotations

import functools
import itertools
import os
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_cpu_kernel_layer import xla_pool

from oracles.float_bits import float_bits
from pool3d_pass.bindings import cpu as cpu_binding
from pool3d_pass.bindings.cpu import TARGET_NAME, max_pooling_3d_backward, register

DTYPES = {"f32": jnp.float32, "bf16": jnp.bfloat16, "f16": jnp.float16}
# Half an ulp, relative, of each element type.
HALF_ULP = {"f32": 2.0**-24, "bf16": 2.0**-8, "f16": 2.0**-11}


# ---------------------------------------------------------------------------
# References
# ---------------------------------------------------------------------------


def xla_forward_and_grad(x, g_seed, layout, k, s, p):
    """y = max pool of x, g random of y's shape, and XLA's gradient."""
    fwd, grad = xla_pool(layout, tuple(k), tuple(s), tuple(p))
    y = fwd(x)
    g = jnp.asarray(np.random.RandomState(g_seed).randn(*y.shape).astype(np.float32)).astype(x.dtype)
    return y, g, grad(x, g)


def _to_ncdhw(a, layout):
    return a if layout == "NCDHW" else np.moveaxis(a, -1, 1)


def _from_ncdhw(a, layout):
    return a if layout == "NCDHW" else np.moveaxis(a, 1, -1)


def contract_reference(g, x, y, k, s, p, data_format="NCDHW", output_format=None):
    """float64 numpy implementation of docs/contract.md (first max, row-major taps)."""
    output_format = output_format or data_format
    x = _to_ncdhw(np.asarray(x, np.float64), data_format)
    y = _to_ncdhw(np.asarray(y, np.float64), output_format)
    g = _to_ncdhw(np.asarray(g, np.float64), output_format)
    B, C, D, H, W = x.shape
    Do, Ho, Wo = y.shape[2:]
    # NaN padding is never equal to anything, so it is never selected; the
    # extra high padding keeps every strided slice in bounds.
    pads = [(q, q + kk + ss * oo) for q, kk, ss, oo in zip(p, k, s, (Do, Ho, Wo))]
    xp = np.pad(x, [(0, 0), (0, 0)] + pads, constant_values=np.nan)
    acc = np.zeros_like(xp)
    taken = np.zeros(y.shape, bool)
    for td, th, tw in itertools.product(range(k[0]), range(k[1]), range(k[2])):
        sl = (
            slice(None),
            slice(None),
            slice(td, td + s[0] * Do, s[0]),
            slice(th, th + s[1] * Ho, s[1]),
            slice(tw, tw + s[2] * Wo, s[2]),
        )
        e = (xp[sl] == y) & ~taken  # for one tap, windows map to distinct elements
        acc[sl] += np.where(e, g, 0.0)
        taken |= e
    acc = acc[:, :, p[0] : p[0] + D, p[1] : p[1] + H, p[2] : p[2] + W]
    return _from_ncdhw(acc, data_format)


@functools.cache
def _kernel_fn(k, s, p, data_format, output_format):
    return jax.jit(
        lambda a, b, c: max_pooling_3d_backward(
            a, b, c, kernel_size=k, stride=s, padding=p, data_format=data_format, output_format=output_format
        )
    )


def kernel(g, x, y, k, s, p, data_format="NCDHW", output_format=None):
    return _kernel_fn(tuple(k), tuple(s), tuple(p), data_format, output_format)(g, x, y)


def kernel_all_thread_counts(g, x, y, k, s, p, data_format="NCDHW", output_format=None):
    """Kernel result with the default thread count, checked equal to forced 1 and 2 threads.

    Each call is waited for before the environment changes: the kernel reads
    POOL3D_CPU_THREADS on XLA's thread, where glibc's getenv racing the
    test's setenv can crash (one `make sanitize` run died here with a
    segfault and no sanitizer report).
    """
    out = jax.block_until_ready(kernel(g, x, y, k, s, p, data_format, output_format))
    saved = os.environ.get("POOL3D_CPU_THREADS")
    try:
        for n in ("1", "2"):
            os.environ["POOL3D_CPU_THREADS"] = n
            other = jax.block_until_ready(kernel(g, x, y, k, s, p, data_format, output_format))
            np.testing.assert_array_equal(_bits(other), _bits(out))
    finally:
        if saved is None:
            os.environ.pop("POOL3D_CPU_THREADS", None)
        else:
            os.environ["POOL3D_CPU_THREADS"] = saved
    return out


def _bits(a):
    return float_bits(a, nan="exact")


def make_input(kind, shape, dtype, seed=0):
    rs = np.random.RandomState(seed)
    if kind == "randn":
        v = rs.randn(*shape)
    elif kind == "ints":  # many ties
        v = rs.randint(-2, 3, size=shape)
    elif kind == "relu":  # ReLU zeros: ties at 0
        v = np.maximum(rs.randn(*shape), 0.0)
    elif kind == "const":
        v = np.full(shape, 1.25)
    elif kind == "signed_zeros":  # +0 and -0 side by side, often the maximum
        v = np.minimum(rs.randint(-2, 3, size=shape), 0).astype(np.float64)
        v[rs.rand(*shape) < 0.5] = -0.0
    else:
        raise ValueError(kind)
    return jnp.asarray(v.astype(np.float32)).astype(dtype)


def _shape(layout, B, C, D, H, W):
    return (B, C, D, H, W) if layout == "NCDHW" else (B, D, H, W, C)


KINDS = ("randn", "ints", "relu", "const", "signed_zeros")

# (B, C, D, H, W), kernel, stride, padding
NON_OVERLAP = [
    ((2, 3, 4, 6, 8), (2, 2, 2), (2, 2, 2), (0, 0, 0)),
    ((1, 1, 5, 7, 9), (2, 2, 2), (2, 2, 2), (0, 0, 0)),  # uncovered tails
    ((3, 5, 3, 4, 5), (3, 2, 1), (3, 2, 1), (1, 0, 0)),  # padding, kW = 1
    ((1, 2, 6, 6, 6), (2, 3, 2), (3, 3, 4), (0, 1, 1)),  # gaps (stride > kernel)
    ((2, 1, 4, 4, 12), (2, 2, 4), (2, 2, 4), (0, 0, 0)),
    ((1, 3, 2, 3, 10), (2, 3, 5), (2, 3, 5), (0, 0, 0)),  # output extents of 1 in D, H
    ((1, 9, 4, 4, 4), (4, 4, 4), (4, 4, 4), (0, 0, 0)),  # single window per plane
]
OVERLAP = [
    ((2, 3, 5, 6, 7), (3, 3, 3), (2, 2, 2), (1, 1, 1)),
    ((1, 2, 6, 5, 6), (3, 3, 3), (1, 1, 1), (1, 1, 1)),
    ((3, 1, 4, 5, 6), (2, 3, 2), (1, 2, 1), (0, 1, 0)),
    ((1, 5, 3, 3, 7), (3, 3, 3), (1, 1, 2), (0, 0, 1)),  # output extent 1 in D, H
    ((2, 4, 5, 5, 5), (3, 2, 3), (2, 2, 1), (1, 0, 1)),
]


# ---------------------------------------------------------------------------
# Agreement with XLA and the contract
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
@pytest.mark.parametrize("case", NON_OVERLAP, ids=lambda c: f"{c[0]}-k{c[1]}-s{c[2]}-p{c[3]}")
def test_f32_non_overlapping_is_bit_exact(layout, case):
    shape, k, s, p = case
    for kind in KINDS:
        x = make_input(kind, _shape(layout, *shape), jnp.float32)
        y, g, ref = xla_forward_and_grad(x, 1, layout, k, s, p)
        out = kernel_all_thread_counts(g, x, y, k, s, p, layout)
        assert out.shape == x.shape and out.dtype == x.dtype
        np.testing.assert_array_equal(_bits(out), _bits(ref), err_msg=kind)


@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
@pytest.mark.parametrize("case", OVERLAP, ids=lambda c: f"{c[0]}-k{c[1]}-s{c[2]}-p{c[3]}")
def test_f32_overlapping_matches_xla(layout, case):
    shape, k, s, p = case
    for kind in KINDS:
        x = make_input(kind, _shape(layout, *shape), jnp.float32)
        y, g, ref = xla_forward_and_grad(x, 2, layout, k, s, p)
        out = np.asarray(kernel_all_thread_counts(g, x, y, k, s, p, layout))
        np.testing.assert_allclose(out, np.asarray(ref), rtol=1e-6, atol=1e-6, err_msg=kind)
        exact = contract_reference(g, x, y, k, s, p, layout)
        np.testing.assert_allclose(out, exact, rtol=1e-6, atol=1e-6, err_msg=kind)


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
@pytest.mark.parametrize(
    "case", NON_OVERLAP[1:3] + OVERLAP[:2], ids=lambda c: f"{c[0]}-k{c[1]}-s{c[2]}-p{c[3]}"
)
def test_half_types_against_float64_contract(dtype, layout, case):
    shape, k, s, p = case
    for kind in ("randn", "ints", "relu", "signed_zeros"):
        x = make_input(kind, _shape(layout, *shape), DTYPES[dtype])
        y, g, xla = xla_forward_and_grad(x, 3, layout, k, s, p)
        out = kernel_all_thread_counts(g, x, y, k, s, p, layout)
        assert out.dtype == x.dtype
        exact = contract_reference(g, x, y, k, s, p, layout)
        ours = np.asarray(out.astype(jnp.float32), np.float64)
        theirs = np.asarray(xla.astype(jnp.float32), np.float64)
        err, xla_err = np.abs(ours - exact), np.abs(theirs - exact)
        # f32 accumulation, rounded once: within half an ulp of the exact sum ...
        assert np.all(err <= HALF_ULP[dtype] * np.abs(exact) + 1e-30), kind
        # ... and never worse than XLA's own element-type accumulation.
        assert err.max() <= xla_err.max(), kind
        if s[0] >= k[0] and s[1] >= k[1] and s[2] >= k[2]:  # one contribution per element
            np.testing.assert_array_equal(_bits(out), _bits(xla), err_msg=kind)


@pytest.mark.parametrize("data_format,output_format", [("NCDHW", "NDHWC"), ("NDHWC", "NCDHW")])
@pytest.mark.parametrize("case", [NON_OVERLAP[2], OVERLAP[0]], ids=["no-overlap", "overlap"])
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_output_format_may_differ_from_data_format(data_format, output_format, case, dtype):
    shape, k, s, p = case
    perm = (0, 2, 3, 4, 1) if output_format == "NDHWC" else (0, 4, 1, 2, 3)
    for kind in ("ints", "signed_zeros"):
        x = make_input(kind, _shape(data_format, *shape), DTYPES[dtype])
        y, g, ref = xla_forward_and_grad(x, 4, data_format, k, s, p)
        y_t, g_t = jnp.transpose(y, perm), jnp.transpose(g, perm)
        out = kernel_all_thread_counts(g_t, x, y_t, k, s, p, data_format, output_format)
        np.testing.assert_allclose(
            np.asarray(out.astype(jnp.float32)),
            contract_reference(g_t, x, y_t, k, s, p, data_format, output_format),
            rtol=max(HALF_ULP[dtype] * 2, 1e-6),
            atol=1e-30,
            err_msg=kind,
        )
        if dtype == "f32":  # XLA accumulates bf16 in bf16: compare with the exact sum only
            np.testing.assert_allclose(np.asarray(out), np.asarray(ref), rtol=1e-6, atol=1e-6, err_msg=kind)


def test_first_max_in_row_major_order_gets_the_gradient():
    # One window over a 2x2x2 input of equal values: only tap (0, 0, 0) is selected.
    x = jnp.ones((1, 1, 2, 2, 2), jnp.float32)
    y = jnp.ones((1, 1, 1, 1, 1), jnp.float32)
    g = jnp.full((1, 1, 1, 1, 1), 3.0, jnp.float32)
    out = np.asarray(kernel(g, x, y, (2, 2, 2), (2, 2, 2), (0, 0, 0)))
    expected = np.zeros((1, 1, 2, 2, 2), np.float32)
    expected[0, 0, 0, 0, 0] = 3.0
    np.testing.assert_array_equal(out, expected)
    # Later tie in d beats nothing earlier: value in (1, 0, 0) and (0, 1, 1) equal max -> (0, 1, 1).
    xv = np.zeros((1, 1, 2, 2, 2), np.float32)
    xv[0, 0, 1, 0, 0] = xv[0, 0, 0, 1, 1] = 5.0
    out = np.asarray(kernel(g, jnp.asarray(xv), jnp.full_like(y, 5.0), (2, 2, 2), (2, 2, 2), (0, 0, 0)))
    assert out[0, 0, 0, 1, 1] == 3.0 and out.sum() == 3.0


def test_padding_is_never_selected_and_nan_selects_nothing():
    # Window entirely -inf except padding: the first real -inf gets the gradient.
    x = jnp.full((1, 1, 1, 1, 2), -jnp.inf, jnp.float32)
    y = jnp.full((1, 1, 1, 1, 1), -jnp.inf, jnp.float32)
    g = jnp.full((1, 1, 1, 1, 1), 2.0, jnp.float32)
    out = np.asarray(kernel(g, x, y, (1, 1, 4), (1, 1, 4), (0, 0, 1)))
    np.testing.assert_array_equal(out, [[[[[2.0, 0.0]]]]])
    # NaN maximum: nothing selected.
    x = jnp.asarray(np.array([1.0, np.nan], np.float32).reshape(1, 1, 1, 1, 2))
    y = jnp.full((1, 1, 1, 1, 1), jnp.nan, jnp.float32)
    out = np.asarray(kernel(g, x, y, (1, 1, 2), (1, 1, 2), (0, 0, 0)))
    np.testing.assert_array_equal(out, np.zeros((1, 1, 1, 1, 2), np.float32))


@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
def test_zero_sized_batch_or_channels_give_an_empty_result(layout):
    for B, C in ((0, 2), (2, 0)):
        xe = jnp.zeros(_shape(layout, B, C, 4, 4, 4), jnp.float32)
        ye = jnp.zeros(_shape(layout, B, C, 2, 2, 2), jnp.float32)
        assert kernel(ye, xe, ye, (2, 2, 2), (2, 2, 2), (0, 0, 0), layout).shape == xe.shape


@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
def test_huge_stride_on_a_small_input_is_one_window_per_axis(layout):
    # Stride 2^30 is allowed; no scratch may be sized by it.
    k, p = (2, 3, 2), (1, 1, 0)
    x = make_input("ints", _shape(layout, 1, 3, 3, 4, 5), jnp.float32)
    y, g, _ = xla_forward_and_grad(x, 9, layout, k, (5, 7, 6), p)  # already one window per axis
    out = kernel_all_thread_counts(g, x, y, k, (2**30,) * 3, p, layout)
    np.testing.assert_array_equal(_bits(out), _bits(kernel(g, x, y, k, (5, 7, 6), p, layout)))
    np.testing.assert_allclose(np.asarray(out), contract_reference(g, x, y, k, (5, 7, 6), p, layout))


def test_negative_zero_gradient_gives_positive_zero_like_xla():
    x = make_input("randn", (1, 1, 2, 2, 2), jnp.float32)
    y = jnp.max(x).reshape(1, 1, 1, 1, 1)
    g = jnp.full((1, 1, 1, 1, 1), -0.0, jnp.float32)
    out = kernel(g, x, y, (2, 2, 2), (2, 2, 2), (0, 0, 0))
    assert not np.any(np.signbit(np.asarray(out)))


def test_larger_problem_uses_threads_and_matches():
    # Above the single-thread threshold (256K elements) with default threading.
    x = make_input("ints", (1, 8, 16, 48, 48), jnp.float32)
    for k, s, p in [((2, 2, 2), (2, 2, 2), (0, 0, 0)), ((3, 3, 3), (2, 2, 2), (1, 1, 1))]:
        y, g, ref = xla_forward_and_grad(x, 6, "NCDHW", k, s, p)
        out = kernel(g, x, y, k, s, p)
        np.testing.assert_allclose(np.asarray(out), np.asarray(ref), rtol=1e-6, atol=1e-6)


def _errors_on_threads(fn, n):
    """Runs fn on n Python threads at once; returns the exceptions raised."""
    errors = []

    def go():
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - any failure on a thread is collected; the test raises it
            errors.append(exc)

    ts = [threading.Thread(target=go) for _ in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return errors


def test_concurrent_calls_share_the_thread_pool_and_match():
    # Kernels called from several threads at once: one holds the process's
    # thread pool, the others find it busy and start threads of their own
    # (common/threading.cc); every result equals the serial one.
    x = make_input("ints", (2, 8, 16, 32, 48), jnp.float32)  # above 256K elements: threads
    k, s, p = (3, 3, 3), (2, 2, 2), (1, 1, 1)
    y, g, ref = xla_forward_and_grad(x, 6, "NCDHW", k, s, p)
    want = _bits(kernel(g, x, y, k, s, p))
    results = []

    def calls():
        for _ in range(10):
            results.append(_bits(kernel(g, x, y, k, s, p)))

    assert not _errors_on_threads(calls, 6) and len(results) == 60
    for got in results:
        np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(np.asarray(kernel(g, x, y, k, s, p)), np.asarray(ref), rtol=1e-6, atol=1e-6)


def test_register_is_idempotent_and_thread_safe():
    errors = _errors_on_threads(register, 8)
    register()
    assert not errors and cpu_binding.is_registered()
    assert TARGET_NAME == "pool3d.max_pooling_3d_backward"


# ---------------------------------------------------------------------------
# Invalid inputs: a clear error, never a crash
# ---------------------------------------------------------------------------

X = jnp.zeros((1, 2, 4, 4, 4), jnp.float32)
Y = jnp.zeros((1, 2, 2, 2, 2), jnp.float32)
K2 = dict(kernel_size=(2, 2, 2), stride=(2, 2, 2), padding=(0, 0, 0))


def _call(g, x, y, **kw):
    attrs = dict(K2)
    attrs.update(kw)
    return jax.block_until_ready(jax.jit(lambda a, b, c: max_pooling_3d_backward(a, b, c, **attrs))(g, x, y))


@pytest.mark.parametrize(
    "args,kw,message",
    [
        ((Y, X[0], Y), {}, r"input must have rank 5, got rank 4"),
        ((Y[..., 0], X, Y[..., 0]), {}, r"grad_output must have rank 5, got rank 4"),
        ((Y.astype(jnp.float16), X, Y), {}, r"grad_output element type f16 differs from the input element type f32"),
        ((Y, X, Y.astype(jnp.bfloat16)), {}, r"output element type bf16 differs"),
        ((Y.astype(jnp.int32), X.astype(jnp.int32), Y.astype(jnp.int32)), {}, r"must be f32, bf16 or f16, got s32"),
        ((Y, X, Y), {"kernel_size": (3, 2, 2)}, r"grad_output shape \[1, 2, 2, 2, 2\].*expected \[1, 2, 1, 2, 2\]"),
        ((Y, X, Y), {"padding": (1, 0, 0)}, r"disagrees with the input shape"),
        ((Y, X, Y[:, :1]), {}, r"output shape \[1, 1, 2, 2, 2\] differs from the grad_output shape"),
        ((Y, X, Y), {"data_format": "NHWC"}, r'data_format must be "NCDHW" or "NDHWC", got "NHWC"'),
        ((Y, X, Y), {"output_format": "ncdhw"}, r'output_format must be "NCDHW" or "NDHWC", got "ncdhw"'),
        ((Y, X, Y), {"kernel_size": (2, 0, 2)}, r"kernel_size elements must be in \[1, 4096\], got \[2, 0, 2\]"),
        # Each entry is bounded before the product is formed (2^21 * 2^21 * 2^22 = 2^64).
        ((Y, X, Y), {"kernel_size": (2**21, 2**21, 2**22)}, r"kernel_size elements must be in \[1, 4096\], got \[2097152, 2097152, 4194304\]"),
        ((Y, X, Y), {"kernel_size": (2**62, 2**62, 1)}, r"kernel_size elements must be in \[1, 4096\]"),
        ((Y, X, Y), {"stride": (2, 2, 0)}, r"stride elements must be in \[1, 2\^30\]"),
        ((Y, X, Y), {"stride": (2, 2**30 + 1, 2)}, r"stride elements must be in \[1, 2\^30\], got \[2, 1073741825, 2\]"),
        ((Y, X, Y), {"stride": (-(2**63), 2, 2)}, r"stride elements must be in \[1, 2\^30\]"),
        ((Y, X, Y), {"padding": (0, -1, 0)}, r"padding elements must be in \[0, kernel_size - 1\], got \[0, -1, 0\]"),
        ((Y, X, Y), {"padding": (2**30, 0, 0)}, r"padding elements must be in \[0, kernel_size - 1\], got \[1073741824, 0, 0\]"),
        ((Y, X, Y), {"padding": (0, 0, 2)}, r"padding\[2\] = 2 must be smaller than kernel_size\[2\] = 2 \(else a window lies wholly in padding\)"),
        ((Y, X, Y), {"kernel_size": (17, 17, 17)}, r"4913 elements, more than the maximum of 4096"),
        ((Y, X, Y), {"kernel_size": (2, 2)}, r"kernel_size must have 3 elements \(D, H, W\), got 2"),
        ((Y, X, Y), {"stride": (2, 2, 2, 2)}, r"stride must have 3 elements"),
        ((Y, X, Y), {"padding": ()}, r"padding must have 3 elements"),
        ((Y, X, Y), {"kernel_size": (5, 2, 2)}, r"kernel_size\[0\] = 5 is larger than the padded D extent 4"),
        ((Y, X, Y), {"data_format": "NDHWC"}, r"disagrees with the input shape \[1, 2, 4, 4, 4\] \(NDHWC\)"),
    ],
)
def test_invalid_inputs_raise_a_clear_error(args, kw, message):
    with pytest.raises(Exception, match=message):
        _call(*args, **kw)


def test_missing_or_mistyped_attribute_is_an_error():
    register()
    call = jax.ffi.ffi_call(TARGET_NAME, jax.ShapeDtypeStruct(X.shape, X.dtype))
    with pytest.raises(Exception, match="Wrong number of attributes: expected 5 but got 4"):
        jax.block_until_ready(
            jax.jit(
                lambda a, b, c: call(
                    a,
                    b,
                    c,
                    kernel_size=np.array([2, 2, 2], np.int64),
                    stride=np.array([2, 2, 2], np.int64),
                    padding=np.array([0, 0, 0], np.int64),
                    data_format="NCDHW",
                )
            )(Y, X, Y)
        )
    with pytest.raises(Exception, match="(?i)wrong array data type|attribute"):
        jax.block_until_ready(
            jax.jit(
                lambda a, b, c: call(
                    a,
                    b,
                    c,
                    kernel_size=np.array([2, 2, 2], np.int32),
                    stride=np.array([2, 2, 2], np.int64),
                    padding=np.array([0, 0, 0], np.int64),
                    data_format="NCDHW",
                    output_format="NCDHW",
                )
            )(Y, X, Y)
        )


def test_result_type_mismatch_is_an_error():
    register()
    call = jax.ffi.ffi_call(TARGET_NAME, jax.ShapeDtypeStruct((1, 2, 4, 4, 5), jnp.float32))
    attrs = {n: np.array(v, np.int64) for n, v in K2.items()}
    with pytest.raises(Exception, match=r"result shape \[1, 2, 4, 4, 5\] differs from the input shape"):
        jax.block_until_ready(
            jax.jit(lambda a, b, c: call(a, b, c, data_format="NCDHW", output_format="NCDHW", **attrs))(Y, X, Y)
        )


@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
@pytest.mark.parametrize("case", [NON_OVERLAP[0], OVERLAP[0], OVERLAP[1]], ids=["k2s2", "k3s2p1", "k3s1p1"])
def test_nan_inputs_and_inexact_output_follow_the_contract(layout, case):
    # NaN in some windows (their maximum is NaN: nothing selected), and an
    # `output` that is not the exact maximum: the first tap equal to it wins.
    shape, k, s, p = case
    xv = np.asarray(make_input("ints", _shape(layout, *shape), jnp.float32)).copy()
    xv.reshape(-1)[::7] = np.nan
    x = jnp.asarray(xv)
    y, g, _ = xla_forward_and_grad(x, 7, layout, k, s, p)
    yv = np.asarray(y).copy()
    yv.reshape(-1)[1::3] = 0.0  # 0 is in most windows but is rarely their maximum
    for y_case in (y, jnp.asarray(yv)):
        out = kernel_all_thread_counts(g, x, y_case, k, s, p, layout)
        exact = contract_reference(g, x, y_case, k, s, p, layout)
        np.testing.assert_allclose(np.asarray(out), exact, rtol=1e-6, atol=1e-6)


# Overlapping NCDHW geometries aimed at the separable first-max search: W
# strides 2 and 3 (the key row is split into stride phases), kW = 1 and kD = 1
# (a trivial reduction stage), windows wider than the padded row's remainder.
SEPARABLE = [
    ((1, 2, 5, 6, 11), (2, 2, 4), (1, 1, 3), (0, 1, 2)),
    ((2, 1, 4, 7, 9), (3, 3, 1), (1, 2, 1), (1, 1, 0)),
    ((1, 3, 3, 6, 8), (1, 3, 3), (1, 1, 2), (0, 1, 1)),
    ((1, 2, 6, 5, 13), (3, 2, 5), (2, 1, 2), (1, 0, 2)),
    # sW == 2 takes a dedicated two-phase split of the key row: a 2-D pool
    # run as depth 1 on an odd W, kW = 2 (H and D overlap instead), kW = 4.
    ((1, 2, 1, 9, 15), (1, 3, 3), (1, 2, 2), (0, 1, 1)),
    ((1, 3, 2, 5, 10), (2, 2, 2), (1, 1, 2), (0, 1, 1)),
    ((1, 2, 3, 4, 7), (2, 3, 4), (1, 2, 2), (1, 1, 0)),
]


def check_separable_search(dtype, shape, k, s, p, layout):
    """Ties everywhere ("ints", "const"), +0 next to -0, and -inf inputs (the
    first real -inf must win over padding): the separable search must still
    pick the first tap in row-major (d, h, w) order equal to output."""
    for kind in ("ints", "const", "randn"):
        xv = np.asarray(make_input(kind, shape, jnp.float32)).copy()
        if kind == "ints":
            flat = xv.reshape(-1)
            flat[flat == 0] = np.where(np.arange((flat == 0).sum()) % 2, 0.0, -0.0)
            flat[::11] = -np.inf
        x = jnp.asarray(xv).astype(DTYPES[dtype])
        y, g, _ = xla_forward_and_grad(x, 5, layout, k, s, p)
        out = kernel_all_thread_counts(g, x, y, k, s, p, layout)
        exact = contract_reference(g, x, y, k, s, p, layout)
        ours = np.asarray(out.astype(jnp.float32), np.float64)
        # A wrong tap moves a whole gradient: far outside these tolerances
        # (f32 sums several f32 terms; bf16 is rounded once from f32).
        rtol = 1e-6 if dtype == "f32" else 2 * HALF_ULP[dtype]
        np.testing.assert_allclose(ours, exact, rtol=rtol, atol=1e-6, err_msg=kind)


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("case", SEPARABLE, ids=lambda c: f"{c[0]}-k{c[1]}-s{c[2]}-p{c[3]}")
def test_separable_first_max_with_ties_zeros_and_infinities(dtype, case):
    shape, k, s, p = case
    check_separable_search(dtype, shape, k, s, p, "NCDHW")


# Overlapping NDHWC geometries aimed at its separable search (depth first,
# then W, then H, vectorised across channels, ties broken by tap order):
# channel counts that are not a multiple of the vector width (C = 1, 5, 13),
# W strides 1..3, channel blocks (C = 40 is split when two threads run),
# kD = 1 and kW = 1, windows larger than the input (kH > H, kW > W), and for
# the half types' f32 accumulator, which slides along D: long D, and depths
# no window reaches (sD > kD, and past the last window).
SEPARABLE_NDHWC = [
    ((1, 1, 5, 6, 7), (3, 3, 3), (1, 1, 1), (1, 1, 1)),
    ((2, 5, 4, 7, 9), (2, 3, 2), (2, 1, 3), (0, 1, 1)),
    ((1, 13, 6, 5, 11), (3, 2, 4), (3, 2, 1), (1, 0, 2)),
    ((1, 40, 3, 4, 6), (3, 3, 3), (2, 1, 2), (1, 1, 1)),
    ((1, 3, 2, 2, 3), (3, 4, 5), (1, 1, 1), (1, 1, 1)),
    ((1, 8, 5, 6, 6), (1, 3, 3), (1, 1, 2), (0, 1, 1)),
    ((1, 9, 6, 6, 5), (3, 3, 1), (1, 2, 1), (1, 1, 0)),
    ((1, 6, 12, 4, 5), (2, 3, 3), (1, 1, 2), (0, 1, 1)),
    ((1, 4, 11, 4, 5), (2, 2, 3), (4, 1, 1), (1, 0, 1)),
]


@pytest.mark.parametrize("dtype", ["f32", "bf16", "f16"])
@pytest.mark.parametrize("case", SEPARABLE_NDHWC, ids=lambda c: f"{c[0]}-k{c[1]}-s{c[2]}-p{c[3]}")
def test_ndhwc_separable_first_max_with_ties_zeros_and_infinities(dtype, case):
    shape, k, s, p = case
    check_separable_search(dtype, _shape("NDHWC", *shape), k, s, p, "NDHWC")


@pytest.mark.parametrize("stride", [1, 2, 3])
def test_ndhwc_ties_across_the_separable_stages(stride):
    # In every channel two taps of the first window hold the maximum 5; the
    # rest is below it. Reducing over depth first sees them in a different
    # order than row-major (d, h, w): only the first in row-major order may
    # win, e.g. (0, 1, 1) over (1, 0, 0), and (0, 0, 2) over (1, 0, 0).
    k, C = (2, 2, 3), 37
    s = (1, 1, stride)  # W windows overlap for every stride < 3 ...
    shape = (1, 2, 2, 3 + 3 * stride, C)  # ... and kD, kH > sD, sH anyway
    rs = np.random.RandomState(stride)
    xv = rs.uniform(-4.0, 4.0, size=shape).astype(np.float32)
    taps = list(itertools.product(range(2), range(2), range(3)))
    for c in range(C):
        a, b = rs.choice(len(taps), size=2, replace=False)
        for t in (taps[a], taps[b]):
            xv[(0,) + t + (c,)] = 5.0
    x = jnp.asarray(xv)
    y, g, _ = xla_forward_and_grad(x, 8, "NDHWC", k, s, (0, 0, 0))
    out = kernel_all_thread_counts(g, x, y, k, s, (0, 0, 0), "NDHWC")
    exact = contract_reference(g, x, y, k, s, (0, 0, 0), "NDHWC")
    np.testing.assert_allclose(np.asarray(out), exact, rtol=1e-6, atol=1e-6)
