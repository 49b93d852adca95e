"""The NKI kernel's algorithm (a numpy transcription of its source) against the contract.

`oracles/nki_max_pool_backward_numpy.py` transcribes nkilib's
`max_pooling_3d_backward` (its docstring names the source). Here it runs as the
neuron binding runs the kernel (the input trimmed to what the windows cover,
`neuron.covered_extent`; the result zero-padded back) against the contract's
float64 reference (`oracles/contract_numpy.py`), over drawn configurations and inputs
with ties, NaN, infinities and signed zeros in the input and in the gradient.
Every difference must be one of the neuron binding's deviations that
docs/contract.md lists ("The neuron binding's deviations":
`oracles/neuron_deviations.py`), and each of those must show. This is the algorithm as written, with IEEE arithmetic; what the
engines do is `make neuron-check`'s to measure on a Trn2 host.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from oracles.contract_numpy import max_pool_grad_reference, output_shape
from oracles.neuron_deviations import DTYPES, classify, inputs
from oracles.nki_max_pool_backward_numpy import OwnedBoxOutsideWindows
from oracles.nki_max_pool_backward_numpy import max_pooling_3d_backward as transcription
from pool3d_pass.bindings import neuron

# inf + -inf in the reference's float64 sums is NaN, as the contract says; numpy warns of it.
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")


def spatial_axes(layout):
    return (2, 3, 4) if layout == "NCDHW" else (1, 2, 3)


def through_the_binding(g, x, y, kernel_size, stride, padding, layout, tile):
    """What the neuron binding computes with the kernel: trimmed input, zero-padded result."""
    limit = list(x.shape)
    for axis, k, s, p in zip(spatial_axes(layout), kernel_size, stride, padding):
        limit[axis] = neuron.covered_extent(x.shape[axis], k, s, p)
    trimmed = x[tuple(slice(0, n) for n in limit)]
    result = transcription(g, trimmed, y, kernel_size, stride, padding, layout, layout, tile=tile)
    return np.pad(result, [(0, full - n) for full, n in zip(x.shape, limit)])


@st.composite
def problems(draw):
    layout = draw(st.sampled_from(["NCDHW", "NDHWC"]))
    dtype = draw(st.sampled_from(sorted(DTYPES)))
    kernel, stride, padding, spatial = [], [], [], []
    for _ in range(3):
        k = draw(st.integers(1, 3))
        s = draw(st.integers(1, k))  # stride > kernel_size is refused (unsupported)
        p = draw(st.integers(0, k - 1))
        kernel.append(k), stride.append(s), padding.append(p)
        spatial.append(draw(st.integers(max(1, k - 2 * p), 7)))
    batch, channels = draw(st.integers(1, 2)), draw(st.integers(1, 3))
    tile = draw(st.one_of(st.none(), st.tuples(st.integers(0, 2), st.integers(1, 3))))
    seed = draw(st.integers(0, 2**32 - 1))
    specials = draw(st.sampled_from(["none", "input", "gradient", "both"]))
    return layout, dtype, tuple(kernel), tuple(stride), tuple(padding), (batch, channels, *spatial), tile, seed, specials


@given(problems())
def test_the_kernels_algorithm_meets_the_contract_but_for_the_listed_deviations(problem):
    layout, dtype, kernel, stride, padding, ncdhw, tile, seed, specials = problem
    x, g, y, reference, geometry = inputs(problem)
    note(f"{layout} {dtype} k={kernel} s={stride} p={padding} {ncdhw} tile={tile} {specials}")
    to_layout = (lambda a: np.moveaxis(a, 1, -1)) if layout == "NDHWC" else (lambda a: a)
    got = through_the_binding(to_layout(g), to_layout(x), to_layout(y), kernel, stride, padding, layout, tile)
    got = np.moveaxis(got, -1, 1) if layout == "NDHWC" else got
    classify(x, g, y, reference, geometry, got)


def measure(examples: int, seed: int = 0) -> dict[str, int]:
    """Deviation counts over `examples` drawn problems (the figures docs/contract.md quotes)."""
    rng = np.random.default_rng(seed)
    totals = {"problems": 0, "elements": 0}
    for _ in range(examples):
        kernel = tuple(int(k) for k in rng.integers(1, 4, 3))
        stride = tuple(int(rng.integers(1, k + 1)) for k in kernel)
        padding = tuple(int(rng.integers(0, k)) for k in kernel)
        spatial = tuple(int(rng.integers(max(1, k - 2 * p), 8)) for k, p in zip(kernel, padding))
        tile = None if rng.random() < 0.5 else (int(rng.integers(0, 3)), int(rng.integers(1, 4)))
        problem = ("NCDHW", str(rng.choice(sorted(DTYPES))), kernel, stride, padding,
                   (int(rng.integers(1, 3)), int(rng.integers(1, 4)), *spatial), tile,
                   int(rng.integers(0, 2**32)), str(rng.choice(["none", "input", "gradient", "both"])))
        x, g, y, reference, geometry = inputs(problem)
        got = through_the_binding(g, x, y, kernel, stride, padding, "NCDHW", tile)
        for name, count in classify(x, g, y, reference, geometry, got).items():
            totals[name] = totals.get(name, 0) + count
        totals["problems"] += 1
        totals["elements"] += x.size
    return totals


def test_each_listed_deviation_shows():
    counts = measure(150)
    assert counts["nan instead of the contract's value"] > 0 and counts["-0 instead of +0"] > 0, counts


@pytest.mark.parametrize("selected", [0, 3])
def test_inf_gradient_gives_nan_to_the_real_taps_of_its_window(selected):
    # One 2x2x2 window: the contract gives +inf to the selected tap and 0 elsewhere. The sweep's
    # first unselected tap makes 0 * inf = NaN, and its running gradient inf - NaN = NaN.
    x = np.zeros((1, 1, 2, 2, 2), np.float32)
    x.ravel()[selected] = 5
    y = np.full((1, 1, 1, 1, 1), 5, np.float32)
    g = np.full((1, 1, 1, 1, 1), np.inf, np.float32)
    got = transcription(g, x, y, 2, 2, 0).ravel()
    others = np.delete(got, selected)
    assert np.isnan(others).all()
    assert got[selected] == np.inf if selected == 0 else np.isnan(got[selected])


def test_negative_gradient_leaves_minus_zero_before_the_selected_tap_without_overlap():
    x = np.zeros((1, 1, 2, 2, 2), np.float32)
    x[0, 0, 1, 1, 1] = 5  # the last tap
    y = np.full((1, 1, 1, 1, 1), 5, np.float32)
    g = np.full((1, 1, 1, 1, 1), -3, np.float32)
    got = transcription(g, x, y, 2, 2, 0)
    assert got[0, 0, 1, 1, 1] == -3
    assert (got.ravel()[:7] == 0).all() and np.signbit(got.ravel()[:7]).all()


@pytest.mark.parametrize("size, kernel, stride, padding", [(7, 2, 2, 0), (10, 3, 2, 0), (9, 3, 3, 1)])
def test_cells_after_the_last_window_need_the_bindings_trim(size, kernel, stride, padding):
    # The kernel alone reads past its accumulator there; the binding hands it the covered part.
    assert neuron.covered_extent(size, kernel, stride, padding) < size
    x = np.arange(size**3, dtype=np.float32).reshape(1, 1, size, size, size)
    window, strides, pads = (1, 1, *(kernel,) * 3), (1, 1, *(stride,) * 3), ((0, 0), (0, 0), *((padding, padding),) * 3)
    reference = max_pool_grad_reference(x, np.ones(output_shape(x.shape, window, strides, pads)), window, strides, pads)
    g = np.ones(reference.y.shape, np.float32)
    with pytest.raises(OwnedBoxOutsideWindows):
        transcription(g, x, reference.y.astype(np.float32), kernel, stride, padding)
    got = through_the_binding(g, x, reference.y.astype(np.float32), (kernel,) * 3, (stride,) * 3, (padding,) * 3,
                              "NCDHW", None)
    np.testing.assert_array_equal(got, reference.grad)


def test_stride_beyond_the_window_fails_the_kernel_when_an_axis_is_cut():
    # Why the binding refuses stride > kernel_size: a cut axis leaves tiles in the gaps.
    x = np.zeros((1, 1, 7, 4, 4), np.float32)
    g = np.ones((1, 1, 3, 2, 2), np.float32)
    y = np.zeros_like(g)
    transcription(g, x, y, (1, 2, 2), (3, 2, 2), 0)  # one tile: the gaps are zero-filled
    with pytest.raises(OwnedBoxOutsideWindows):
        transcription(g, x, y, (1, 2, 2), (3, 2, 2), 0, tile=(0, 1))
