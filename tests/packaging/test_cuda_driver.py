"""The CUDA kernels are not chosen where the machine's NVIDIA driver is older than the CUDA release they were built with."""

from __future__ import annotations

import pytest

from pool3d_pass.bindings.gpu.cuda import library as cuda_library


class _Library:
    """Stands in for the loaded library: what its Pool3dCudaRuntimeVersion returns."""

    def __init__(self, version):
        if version is not None:
            self.Pool3dCudaRuntimeVersion = lambda: version


@pytest.mark.parametrize(
    ("built", "driver", "refused"),
    [
        (13000, 12080, True),   # the release wheel (CUDA 13.0) under a CUDA 12.8 driver
        (13000, 13000, False),
        (13000, 13020, False),  # a newer minor release of the same major
        (12080, 13000, False),  # an older runtime under a newer driver
        (13000, None, False),   # no driver: a CPU machine or a deviceless compile
        (None, 12080, False),   # a build that does not say its release
    ],
)
def test_driver_problem(monkeypatch, built, driver, refused):
    monkeypatch.setattr(cuda_library, "driver_version", lambda: driver)
    problem = cuda_library.driver_problem(_Library(built))
    assert (problem is not None) == refused, problem
    if refused:
        assert "built with CUDA 13.0" in problem and "supports CUDA 12.8" in problem


def test_unavailable_names_the_driver(monkeypatch):
    monkeypatch.setattr(cuda_library, "_load", lambda path: (_Library(13000), None))
    monkeypatch.setattr(cuda_library, "driver_version", lambda: 12020)
    assert "supports CUDA 12.2" in cuda_library.unavailable()
    monkeypatch.setattr(cuda_library, "driver_version", lambda: None)
    assert cuda_library.unavailable() is None


def test_release_words():
    assert cuda_library.release(13000) == "13.0"
    assert cuda_library.release(12090) == "12.9"
