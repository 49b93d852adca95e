"""The release wheel in dist/ (`make wheel`), where one is built: one abi3 wheel, manylinux-tagged, with the kernels.

`make test` does not build a wheel (minutes of compiling); where dist/ holds
none these tests skip, saying so. Where nvcc is found on this machine the
wheel must carry the CUDA kernels' library: a release build that silently
left CUDA out fails here (and `make wheel` itself, POOL3D_REQUIRE_CUDA=1).
"""

from __future__ import annotations

import importlib.util
import zipfile
from pathlib import Path

import pytest

from pool3d_pass.bindings.gpu.cuda import build as cuda_build

REPOSITORY = Path(__file__).resolve().parents[2]
WHEELS = sorted((REPOSITORY / "dist").glob("pool3d_pass-*.whl"))
needs_wheel = pytest.mark.skipif(not WHEELS, reason="no wheel in dist/ (make wheel builds one)")


def _contents():
    spec = importlib.util.spec_from_file_location("wheel_contents", REPOSITORY / "scripts" / "wheel_contents.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@needs_wheel
def test_one_wheel_for_every_python():
    assert len(WHEELS) == 1, WHEELS
    assert "-cp311-abi3-manylinux_" in WHEELS[0].name, WHEELS[0].name


@needs_wheel
@pytest.mark.parametrize("wheel", WHEELS, ids=lambda p: p.name)
def test_tags_and_libraries(wheel):
    facts, wrong = _contents().problems(str(wheel), require_cuda=cuda_build.find_nvcc() is not None)
    assert not wrong, "\n".join(facts + wrong)


@needs_wheel
@pytest.mark.parametrize("wheel", WHEELS, ids=lambda p: p.name)
def test_license_and_no_sources(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), names
    assert not [n for n in names if n.endswith((".cc", ".h", ".cu"))]


def test_the_checker_refuses_a_wheel_without_cuda_or_abi3(tmp_path):
    """The checks above can fail: a version-specific wheel without the CUDA library is refused on both counts."""
    wheel = tmp_path / "pool3d_pass-0.1.0-cp312-cp312-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("pool3d_pass-0.1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nTag: cp312-cp312-linux_x86_64\n")
        archive.writestr("pool3d_pass/bindings/cpu/_kernel.cpython-312-x86_64-linux-gnu.so", b"")
    _, wrong = _contents().problems(str(wheel), require_cuda=True)
    assert len(wrong) == 4, wrong
    assert any("CUDA kernels were left out" in line for line in wrong)
