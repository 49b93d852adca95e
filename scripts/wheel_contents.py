"""What a built pool3d_pass wheel holds: its tags and compiled libraries, checked against what a release needs.

`make wheel` runs it on the repaired wheel (`--require-cuda`): the wheel must
be tagged cp311-abi3 (one wheel for Python 3.11 and later) with a manylinux
platform tag (auditwheel's repair), hold the CPU extension built for the
stable ABI and, with `--require-cuda`, the CUDA kernels' library. It prints
one line per finding and exits non-zero on any problem. Standard library
only: it runs outside any venv of the project. tests/packaging/test_wheel.py
runs the same checks on a wheel in dist/.
"""

from __future__ import annotations

import argparse
import sys
import zipfile

CPU_EXTENSION = "pool3d_pass/bindings/cpu/_kernel.abi3.so"
CUDA_LIBRARY = "pool3d_pass/bindings/gpu/cuda/_cuda_kernels.so"
ABI_TAG = "cp311-abi3"


def tags(wheel: zipfile.ZipFile) -> list[str]:
    """The `Tag:` lines of the wheel's WHEEL file ("cp311-abi3-manylinux_2_28_x86_64", ...)."""
    name = next(n for n in wheel.namelist() if n.endswith(".dist-info/WHEEL"))
    lines = wheel.read(name).decode().splitlines()
    return [line.split(":", 1)[1].strip() for line in lines if line.startswith("Tag:")]


def problems(path: str, require_cuda: bool) -> tuple[list[str], list[str]]:
    """(what the wheel holds, what is wrong with it), each a list of lines."""
    with zipfile.ZipFile(path) as wheel:
        names = set(wheel.namelist())
        found = tags(wheel)
        libraries = sorted((n, wheel.getinfo(n).file_size) for n in names if n.endswith(".so"))
    facts = [f"tags: {', '.join(found)}"]
    facts += [f"{name}: {size / 1e6:.1f} MB" for name, size in libraries]
    wrong = []
    if not found or not all(tag.startswith(ABI_TAG + "-") for tag in found):
        wrong.append(f"not a {ABI_TAG} wheel (tags {found}): wheel.py-api in pyproject.toml")
    if not found or not all("manylinux" in tag.split("-", 2)[2] for tag in found):
        wrong.append(f"no manylinux platform tag (tags {found}): the wheel was not repaired by auditwheel")
    if CPU_EXTENSION not in names:
        other = [n for n, _ in libraries if "/cpu/_kernel" in n]
        wrong.append(f"no {CPU_EXTENSION} (the CPU extension is {other or 'missing'})")
    if require_cuda and CUDA_LIBRARY not in names:
        wrong.append(f"no {CUDA_LIBRARY}: the CUDA kernels were left out of a build that had nvcc")
    return facts, wrong


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wheels", nargs="+", help="the wheel file(s) to check")
    parser.add_argument("--require-cuda", action="store_true", help="the CUDA kernels' library must be in it")
    args = parser.parse_args(argv)
    status = 0
    for path in args.wheels:
        facts, wrong = problems(path, args.require_cuda)
        print(f"{path}:")
        for line in facts:
            print(f"  {line}")
        for line in wrong:
            print(f"  error: {line}")
        status |= bool(wrong)
    return status


if __name__ == "__main__":
    sys.exit(main())
