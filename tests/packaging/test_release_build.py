"""Whether a build compiles the CUDA kernels: where a GPU driver is present or asked for; a release build
(POOL3D_REQUIRE_CUDA=1, as `make wheel` runs it) fails where they cannot be built."""

from __future__ import annotations

import pytest

from pool3d_pass.bindings.gpu.cuda import build as cuda_build


def test_a_release_build_without_nvcc_fails(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("NVCC", str(tmp_path / "no-nvcc"))
    monkeypatch.setenv(cuda_build.REQUIRE_ENV, "1")
    assert cuda_build.main(["--output", str(tmp_path / "lib.so"), "--ffi-include", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "no nvcc found" in err and f"{cuda_build.REQUIRE_ENV}=1" in err
    assert not (tmp_path / "lib.so").exists()


def test_a_release_build_refuses_the_skip_switch(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv(cuda_build.SKIP_ENV, "0")
    monkeypatch.setenv(cuda_build.REQUIRE_ENV, "1")
    assert cuda_build.main(["--output", str(tmp_path / "lib.so"), "--ffi-include", str(tmp_path)]) == 1
    assert f"{cuda_build.SKIP_ENV}=0" in capsys.readouterr().err


def test_a_plain_build_without_nvcc_goes_on(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("NVCC", str(tmp_path / "no-nvcc"))
    monkeypatch.setenv(cuda_build.SKIP_ENV, "1")
    monkeypatch.delenv(cuda_build.REQUIRE_ENV, raising=False)
    assert cuda_build.main(["--output", str(tmp_path / "lib.so"), "--ffi-include", str(tmp_path)]) == 0
    assert "not built" in capsys.readouterr().out


def test_the_build_links_libstdcxx_in_and_finds_the_wheels_static_cudart(tmp_path):
    """The nvidia-cuda-* wheels' layout: cudart_static in <toolkit>/lib, which the command names."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "libcudart_static.a").write_bytes(b"")
    cmd = cuda_build.command(str(tmp_path / "bin" / "nvcc"), "/ffi", "/out.so")
    assert "-static-libstdc++" in cmd and ["-L", str(tmp_path / "lib")] == cmd[cmd.index("-L"):cmd.index("-L") + 2]
    (tmp_path / "lib" / "libcudart_static.a").unlink()  # a toolkit whose nvcc.profile names its libraries
    assert "-L" not in cuda_build.command(str(tmp_path / "bin" / "nvcc"), "/ffi", "/out.so")


@pytest.mark.parametrize(("build", "require", "driver", "wanted", "why"), [
    (None, None, None, False, "no NVIDIA driver"),  # an nvcc on PATH is no reason: nvcc's minutes for nothing
    (None, None, "/proc/driver/nvidia/version", True, "/proc/driver/nvidia/version"),
    ("1", None, None, True, "POOL3D_BUILD_CUDA=1"),
    ("0", None, "libcuda.so.1", False, "POOL3D_BUILD_CUDA=0"),
    ("0", "1", None, True, "POOL3D_REQUIRE_CUDA=1"),  # then build() refuses: the test above
])
def test_the_cuda_kernels_are_built_where_a_driver_is_present_or_asked_for(monkeypatch, build, require, driver,
                                                                            wanted, why):
    for name, value in ((cuda_build.SKIP_ENV, build), (cuda_build.REQUIRE_ENV, require)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    monkeypatch.setattr(cuda_build, "gpu_driver", lambda: driver)
    assert cuda_build.wanted()[0] is wanted
    assert why in cuda_build.wanted()[1]


def test_without_a_driver_the_build_says_why_and_how_to_ask(monkeypatch, tmp_path, capsys):
    for name in (cuda_build.SKIP_ENV, cuda_build.REQUIRE_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(cuda_build, "gpu_driver", lambda: None)
    assert cuda_build.main(["--decide"]) == 3
    assert f"{cuda_build.SKIP_ENV}=1 builds them anyway" in capsys.readouterr().out
    assert cuda_build.main(["--output", str(tmp_path / "lib.so"), "--ffi-include", str(tmp_path)]) == 0
    assert "not built (no NVIDIA driver" in capsys.readouterr().out
    assert not (tmp_path / "lib.so").exists()
