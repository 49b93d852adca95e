"""The CUDA kernels compile nothing of the CPU binding: the C++ both use is `bindings/shared_kernels/`.

Every quoted `#include` of the CUDA library's sources (`cuda/build.py`'s
SOURCES), of its headers and of the host-compiled test of its per-thread code
(`tests/bindings/gpu/host/cuda_elements_host.cc`) is resolved the way the
preprocessor resolves it (the including file's folder, then the library's
include folders), recursively; none may land under `bindings/cpu/`. An include
that resolves nowhere fails too (only the XLA FFI headers come from outside the
tree), so a renamed file cannot make the check pass by being skipped. No nvcc
needed.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pool3d_pass.bindings.gpu.cuda import build as cuda_build

# The sources are read where the package is: an editable install's tree ($(VENV), where the
# gpu binding's tests run); a regular install holds no headers.
pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[3]
BINDINGS = Path(cuda_build.BINDINGS_DIR)
CPU = BINDINGS / "cpu"
HOST_TEST = Path(__file__).resolve().parent / "host" / "cuda_elements_host.cc"
OUTSIDE = ("xla/ffi/",)  # jaxlib's headers, given with -isystem
QUOTED = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def closure(starts, include_dirs) -> dict[Path, Path | None]:
    """Every file the quoted includes of `starts` reach: {file: the file that first included it}. Raises
    AssertionError naming an include that resolves nowhere."""
    seen = {Path(s).resolve(): None for s in starts}
    todo = list(seen)
    while todo:
        current = todo.pop()
        for name in QUOTED.findall(current.read_text(encoding="utf-8")):
            if name.startswith(OUTSIDE):
                continue
            found = next((d / name for d in (current.parent, *map(Path, include_dirs)) if (d / name).is_file()), None)
            assert found is not None, f"{current}: #include \"{name}\" resolves nowhere"
            found = found.resolve()
            if found not in seen:
                seen[found] = current
                todo.append(found)
    return seen


def cpu_files(reached: dict[Path, Path | None], cpu: Path) -> list[str]:
    return [f"{file} (included by {by})" for file, by in reached.items() if file.is_relative_to(cpu.resolve())]


def cuda_files() -> list[Path]:
    here = Path(cuda_build.HERE)
    return [*map(Path, cuda_build.SOURCES), *sorted(here.glob("*.h")), HOST_TEST]


def test_no_cuda_source_includes_the_cpu_binding():
    reached = closure(cuda_files(), cuda_build.INCLUDE_DIRS)
    assert cpu_files(reached, CPU) == []
    # the check saw the shared C++ (so it did follow the includes)
    assert BINDINGS.resolve() / "shared_kernels" / "window_scan.h" in reached


def test_the_cuda_build_names_no_cpu_folder_or_source():
    for path in (*cuda_build.SOURCES, *cuda_build.INCLUDE_DIRS, *cuda_build.depends()):
        assert not Path(path).resolve().is_relative_to(CPU.resolve()), path


@pytest.mark.parametrize("line", ['#include "cpu/kernels/kernels.h"', '#include "../cpu/kernels/kernels.h"'])
def test_the_check_finds_an_include_of_the_cpu_binding(tmp_path, line):
    (tmp_path / "cpu" / "kernels").mkdir(parents=True)
    (tmp_path / "cpu" / "kernels" / "kernels.h").write_text("")
    (tmp_path / "cuda").mkdir()
    (tmp_path / "cuda" / "units.h").write_text(line + "\n")
    (tmp_path / "cuda" / "kernels.cu").write_text('#include "units.h"\n')
    reached = closure([tmp_path / "cuda" / "kernels.cu"], [tmp_path, tmp_path / "cuda"])
    assert cpu_files(reached, tmp_path / "cpu") == [
        f"{(tmp_path / 'cpu' / 'kernels' / 'kernels.h').resolve()} (included by {(tmp_path / 'cuda' / 'units.h').resolve()})"]


def test_an_include_that_resolves_nowhere_fails_the_check(tmp_path):
    (tmp_path / "kernels.cu").write_text('#include "common/gone.h"\n')
    with pytest.raises(AssertionError, match="gone.h"):
        closure([tmp_path / "kernels.cu"], [tmp_path])
