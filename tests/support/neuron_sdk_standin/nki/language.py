"""STAND-IN for `nki.language` (tests only; see ../README.md): just what the stand-in kernel uses."""

from __future__ import annotations

shared_hbm = "shared_hbm"
sbuf = "sbuf"


class ndarray:  # the SDK's name
    """A tensor allocation: its shape and dtype are all the stand-in's 'trace' reads."""

    def __init__(self, shape, dtype, buffer=None):
        self.shape = tuple(shape)
        self.dtype = dtype
        self.buffer = buffer
