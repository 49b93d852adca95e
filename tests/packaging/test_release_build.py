"""A release build (POOL3D_REQUIRE_CUDA=1, as `make wheel` runs it) fails where the CUDA kernels cannot be built."""

from __future__ import annotations

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
