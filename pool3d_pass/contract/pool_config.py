"""One pool's attributes as the contract's calls carry them, and the shapes they imply.

`PoolConfig` is the one definition of a call's configuration (docs/contract.md,
"Attributes"): kernel_size, stride and padding (D, H, W), the input's and the
results' layouts. The pass's matched pools and neutral calls hold one, a
binding's `CallSignature` and the Pallas kernels' geometry hold one
(`HoldsPool` reads its fields through them), and the bindings read the rank-5
shapes through it (`split`, `pooled_shape`), so no two places disagree on the
output size or on what a valid configuration is.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pool3d_pass.contract import ATTRIBUTE_NAMES, LAYOUTS, MAX_WINDOW_ELEMENTS, SPATIAL_RANK, pooled_extent


def split(shape: Sequence[int], layout: str) -> tuple[int, int, tuple[int, ...]]:
    """(batch, channels, spatial) of a rank-5 shape in `layout`."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}; expected one of {', '.join(LAYOUTS)}")
    if len(shape) != 5:
        raise ValueError(f"operands must have rank 5, got shape {tuple(shape)}")
    shape = tuple(int(n) for n in shape)
    if layout == "NDHWC":
        return shape[0], shape[4], shape[1:4]
    return shape[0], shape[1], shape[2:5]


def shaped(batch: int, channels: int, spatial: Sequence[int], layout: str) -> tuple[int, ...]:
    """The rank-5 shape in `layout` of (batch, channels, spatial); the inverse of `split`."""
    if layout == "NDHWC":
        return (batch, *spatial, channels)
    return (batch, channels, *spatial)


@dataclass(frozen=True)
class PoolConfig:
    """A call's five attributes; `output_format` defaults to `data_format`."""

    kernel_size: tuple[int, ...]
    stride: tuple[int, ...]
    padding: tuple[int, ...]  # symmetric, per spatial dimension
    data_format: str = "NCDHW"
    output_format: str | None = None

    def __post_init__(self):
        for name in ("kernel_size", "stride", "padding"):
            object.__setattr__(self, name, tuple(int(v) for v in getattr(self, name)))
        if self.output_format is None:
            object.__setattr__(self, "output_format", self.data_format)

    @classmethod
    def of(cls, keywords: Mapping) -> PoolConfig:
        """The configuration among a call's keyword arguments (`input_shape=` and the like left out)."""
        return cls(**{name: keywords[name] for name in ATTRIBUTE_NAMES})

    def attributes(self) -> dict:
        """The call's attributes by name, as `contract.custom_call.build_call` and the bindings' functions take them."""
        return {"kernel_size": self.kernel_size, "stride": self.stride, "padding": self.padding,
                "data_format": self.data_format, "output_format": self.output_format}

    def invalid(self) -> str | None:
        """Why no kernel can run this configuration (the contract's limits), or None."""
        for name in ("kernel_size", "stride", "padding"):
            if len(getattr(self, name)) != SPATIAL_RANK:
                return f"{name} must have {SPATIAL_RANK} entries (D, H, W), got {list(getattr(self, name))}"
        if any(k < 1 for k in self.kernel_size) or any(s < 1 for s in self.stride) or any(p < 0 for p in self.padding):
            return (f"bad attributes kernel_size={list(self.kernel_size)} stride={list(self.stride)} "
                    f"padding={list(self.padding)}")
        if math.prod(self.kernel_size) > MAX_WINDOW_ELEMENTS:
            return f"prod(kernel_size) = {math.prod(self.kernel_size)} > {MAX_WINDOW_ELEMENTS}"
        if any(p >= k for p, k in zip(self.padding, self.kernel_size)):
            return f"padding {list(self.padding)} is not smaller than kernel_size {list(self.kernel_size)}"
        if self.data_format not in LAYOUTS or self.output_format not in LAYOUTS:
            return f"layouts {self.data_format}/{self.output_format} are not {' or '.join(LAYOUTS)}"
        return None

    def pooled_spatial(self, spatial: Sequence[int], *, at_least_one: bool = False) -> tuple[int, ...]:
        """The output's (D, H, W) for an input's. `at_least_one` keeps it computable for invalid
        attributes (stride < 1, an empty output), which a kernel then rejects with its own error."""
        if len(self.kernel_size) != SPATIAL_RANK or len(self.stride) != SPATIAL_RANK or len(self.padding) != SPATIAL_RANK:
            raise ValueError("kernel_size, stride and padding must have 3 elements (D, H, W)")
        if at_least_one:
            return tuple(max(1, pooled_extent(n, k, max(1, s), p, p))
                         for n, k, s, p in zip(spatial, self.kernel_size, self.stride, self.padding))
        return tuple(pooled_extent(n, k, s, p, p) for n, k, s, p in zip(spatial, self.kernel_size, self.stride, self.padding))

    def pooled_shape(self, input_shape: Sequence[int], *, at_least_one: bool = False) -> tuple[int, ...]:
        """The shape of the pooled results (output, indices, grad_output), in `output_format`,
        of an input shaped `input_shape` in `data_format`."""
        batch, channels, spatial = split(input_shape, self.data_format)
        return shaped(batch, channels, self.pooled_spatial(spatial, at_least_one=at_least_one), self.output_format)


class HoldsPool:
    """For a type that holds one `pool: PoolConfig`: its attributes read directly (`signature.kernel_size`)."""

    kernel_size = property(lambda self: self.pool.kernel_size)
    stride = property(lambda self: self.pool.stride)
    padding = property(lambda self: self.pool.padding)
    data_format = property(lambda self: self.pool.data_format)
    output_format = property(lambda self: self.pool.output_format)
