"""contract.pool_config: one call's attributes, the shapes they imply and what makes them invalid."""

from __future__ import annotations

import pytest

from pool3d_pass.contract import pooled_extent
from pool3d_pass.contract.pool_config import PoolConfig, shaped, split


def test_fields_are_int_tuples_and_output_format_defaults_to_data_format():
    import numpy as np

    pool = PoolConfig(np.array([2, 3, 2]), [2, 2, 1], (0, 1, 0), "NDHWC")
    assert pool.kernel_size == (2, 3, 2) and all(type(v) is int for v in pool.kernel_size)
    assert pool.output_format == "NDHWC"
    assert pool.attributes() == {"kernel_size": (2, 3, 2), "stride": (2, 2, 1), "padding": (0, 1, 0),
                                 "data_format": "NDHWC", "output_format": "NDHWC"}
    assert PoolConfig(**pool.attributes()) == pool
    assert PoolConfig.of({**pool.attributes(), "input_shape": (1, 2, 3, 4, 5)}) == pool


@pytest.mark.parametrize("layout, shape, parts", [
    ("NCDHW", (2, 3, 5, 6, 7), (2, 3, (5, 6, 7))),
    ("NDHWC", (2, 5, 6, 7, 3), (2, 3, (5, 6, 7))),
])
def test_split_and_shaped_are_inverses(layout, shape, parts):
    assert split(shape, layout) == parts
    assert shaped(*parts, layout) == shape


def test_pooled_shape_follows_the_output_size_rule_in_the_output_layout():
    pool = PoolConfig((3, 2, 2), (2, 2, 1), (1, 0, 0), "NCDHW", "NDHWC")
    expected = tuple(pooled_extent(n, k, s, p, p) for n, k, s, p in zip((9, 8, 5), (3, 2, 2), (2, 2, 1), (1, 0, 0)))
    assert expected == (5, 4, 4)
    assert pool.pooled_shape((2, 3, 9, 8, 5)) == (2, *expected, 3)


def test_at_least_one_keeps_invalid_attributes_computable():
    pool = PoolConfig((5, 2, 2), (0, 2, 2), (0, 0, 0))
    assert pool.pooled_shape((1, 1, 4, 4, 4), at_least_one=True) == (1, 1, 1, 2, 2)
    with pytest.raises(ZeroDivisionError):
        pool.pooled_shape((1, 1, 4, 4, 4))


@pytest.mark.parametrize("pool, reason", [
    (PoolConfig((2, 2), (2, 2, 2), (0, 0, 0)), "kernel_size must have 3 entries (D, H, W), got [2, 2]"),
    (PoolConfig((2, 0, 2), (2, 2, 2), (0, 0, 0)), "bad attributes kernel_size=[2, 0, 2]"),
    (PoolConfig((2, 2, 2), (2, 2, 2), (0, -1, 0)), "bad attributes"),
    (PoolConfig((17, 17, 17), (1, 1, 1), (0, 0, 0)), "prod(kernel_size) = 4913 > 4096"),
    (PoolConfig((2, 2, 2), (2, 2, 2), (0, 2, 0)), "padding [0, 2, 0] is not smaller than kernel_size [2, 2, 2]"),
    (PoolConfig((2, 2, 2), (2, 2, 2), (0, 0, 0), "NCDHW", "NHWC"), "layouts NCDHW/NHWC are not NCDHW or NDHWC"),
])
def test_invalid_names_what_is_wrong(pool, reason):
    assert reason in pool.invalid()


def test_a_valid_configuration_is_not_invalid():
    assert PoolConfig((3, 3, 3), (2, 2, 2), (1, 1, 1), "NDHWC").invalid() is None


@pytest.mark.parametrize("shape, layout, message", [
    ((1, 2, 3, 4), "NCDHW", "rank 5"),
    ((1, 2, 3, 4, 5), "NHWC", "unknown layout"),
])
def test_split_rejects_what_is_not_a_rank5_layout_shape(shape, layout, message):
    with pytest.raises(ValueError, match=message):
        split(shape, layout)
