"""Building the CUDA kernels' library (`_cuda_kernels.so`) with nvcc: where nvcc is found and its command line.

CMakeLists.txt runs this file when the package is built (so `pip install`,
`pip install -e .` and `make wheel` get the library wherever an nvcc is
found): `python build.py --output LIB --ffi-include DIR` builds the
library, says why not where it cannot, and exits 0 either way;
`python build.py --depends` lists the files it is built from. The tests
call `build()` to read ptxas' report. Standard library only: it runs before
the package is importable.

Where nvcc comes from (`find_nvcc`, first found): `$NVCC`; `nvcc` on PATH;
`$CUDA_HOME/bin/nvcc` (default /usr/local/cuda); the nvcc of an installed
`nvidia-cuda-nvcc` wheel (CUDA 12: `nvidia/cuda_nvcc/bin`, CUDA 13:
`nvidia/cu13/bin`). None: no library, and the gpu binding uses its Pallas
kernels. A release build (`make wheel`) sets `POOL3D_REQUIRE_CUDA=1`: there
a missing or failing nvcc fails the build instead of leaving the library out.

Whether a build compiles them at all (`wanted()`, asked by CMakeLists.txt at
configure time, `python build.py --decide`): nvcc takes minutes, so they are
built where they can run, a machine with an NVIDIA driver (its
/proc/driver/nvidia/version, or a loadable libcuda.so.1), or where asked:
`POOL3D_BUILD_CUDA=1` (`make test`'s main venv, for the tests that read
their machine code), `POOL3D_REQUIRE_CUDA=1` (`make wheel`);
`POOL3D_BUILD_CUDA=0` never. An nvcc on PATH alone is no reason: machines
without a GPU often have one.

Which toolkit a release is built with: the CUDA 12 nvcc wheels on PyPI
(`nvidia-cuda-nvcc-cu12`, 12.0 to 12.9) carry ptxas, libnvvm and the crt
headers but no `nvcc` driver, cudafe++, cicc or fatbinary, and
`nvidia-cuda-runtime-cu12` no static cudart, so no CUDA 12 toolkit can be
assembled from PyPI; the oldest complete one there is CUDA 13.0 (the
`nvidia-cuda-nvcc`, `-crt`, `-nvvm`, `-runtime`, `-cccl` and `-culibos`
13.0 wheels: Makefile's `wheel`). Its static cudart needs a CUDA 13 driver
(r580 or later) when a kernel runs; loading and registering the library
need no driver at all.

What is built: SASS for sm_80 (A100) and sm_90a (H100/H200) plus PTX for
compute_90 (JIT-compiled by the driver for later GPUs), the CUDA runtime
linked statically (`-cudart static`: the library needs only the driver's
libcuda.so.1 at run time, loaded when a kernel first runs, so it loads and
registers on machines without a GPU), with libstdc++ linked statically too
(the library then asks only glibc and libgcc_s of the machine, which lets
the wheel carry an older manylinux tag), against the XLA FFI headers of the
jaxlib in the build environment (the same ones as the CPU kernels: with
pip's build isolation the OLDEST supported jaxlib, pyproject.toml).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys

LIBRARY_NAME = "_cuda_kernels.so"
HERE = os.path.dirname(os.path.abspath(__file__))
# pool3d_pass/bindings: sources name the C++ they share with the CPU kernels
# "shared_kernels/NAME" (nothing of bindings/cpu is compiled here)
BINDINGS_DIR = os.path.dirname(os.path.dirname(HERE))
SHARED_DIR = os.path.join(BINDINGS_DIR, "shared_kernels")
SOURCES = (
    os.path.join(HERE, "kernels.cu"),
    # the operand and attribute checks the CPU kernels make: the same errors
    os.path.join(SHARED_DIR, "validate.cc"),
    # arc4random for the static libstdc++, so the wheel's manylinux tag stays 2_34
    os.path.join(SHARED_DIR, "glibc_compat.cc"),
    # the CUDA release built with, for library.py's driver check
    os.path.join(HERE, "version.cc"),
)
INCLUDE_DIRS = (BINDINGS_DIR, HERE)
GENCODE = (
    "-gencode=arch=compute_80,code=sm_80",
    "-gencode=arch=compute_90a,code=sm_90a",
    "-gencode=arch=compute_90,code=compute_90",
)
SKIP_ENV = "POOL3D_BUILD_CUDA"  # 0: never build; 1: build without a driver too
REQUIRE_ENV = "POOL3D_REQUIRE_CUDA"
DRIVER_FILE = "/proc/driver/nvidia/version"  # the NVIDIA kernel module's; absent without a GPU
DRIVER_LIBRARY = "libcuda.so.1"  # the driver's user-space library (what a container with a GPU mounts)


def gpu_driver() -> str | None:
    """Where this machine shows an NVIDIA driver (its file, or its library where it loads), or None."""
    if os.path.exists(DRIVER_FILE):
        return DRIVER_FILE
    import ctypes

    try:
        ctypes.CDLL(DRIVER_LIBRARY)
    except OSError:
        return None
    return DRIVER_LIBRARY


def wanted() -> tuple[bool, str]:
    """Whether this build compiles the CUDA kernels, and why (see the module docstring)."""
    asked = os.environ.get(SKIP_ENV)
    if os.environ.get(REQUIRE_ENV) == "1":
        return True, f"{REQUIRE_ENV}=1"
    if asked in ("0", "1"):
        return asked == "1", f"{SKIP_ENV}={asked}"
    driver = gpu_driver()
    if driver is not None:
        return True, f"an NVIDIA driver is present ({driver})"
    return False, (f"no NVIDIA driver on this machine (no {DRIVER_FILE}, no {DRIVER_LIBRARY}); "
                   f"{SKIP_ENV}=1 builds them anyway")


def depends() -> list[str]:
    """Every file the library is built from (sources and headers)."""
    files = list(SOURCES)
    for folder in (HERE, SHARED_DIR):
        files += glob.glob(os.path.join(folder, "*.h"))
    return sorted(set(files))


def find_tool(name: str, env: str) -> str | None:
    """A CUDA tool (nvcc, cuobjdump, nvdisasm), or None: `$env`; `name` on PATH;
    `$CUDA_HOME/bin` (default /usr/local/cuda); the tool of an installed NVIDIA
    wheel (CUDA 12: `nvidia/cuda_<name>/bin`, CUDA 13: `nvidia/cu13/bin`)."""
    named = os.environ.get(env)
    if named:
        return named if os.path.isfile(named) else shutil.which(named)
    on_path = shutil.which(name)
    if on_path:
        return on_path
    home = os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", name)
    if os.path.isfile(home):
        return home
    for entry in sys.path:
        for sub in (("nvidia", f"cuda_{name}", "bin", name), ("nvidia", "cu13", "bin", name)):
            path = os.path.join(entry, *sub)
            if os.path.isfile(path) and os.access(path, os.X_OK):
                return path
    return None


def find_nvcc() -> str | None:
    """The nvcc to build with, or None (see the module docstring for the order)."""
    return find_tool("nvcc", "NVCC")


def command(nvcc: str, ffi_include_dir: str, output: str, *, ptxas_report: bool = True) -> list[str]:
    """The nvcc command line that builds the library into `output`."""
    cmd = [
        # --threads 0: the architectures compiled side by side, one per core; -lineinfo: each instruction's
        # source line (the same machine code: for compute-sanitizer's reports and checks/gpu_model.py's paths)
        nvcc, "-std=c++17", "-O3", "-shared", "-cudart", "static", "--threads", "0", "-lineinfo",
        "-Xcompiler", "-fPIC,-fvisibility=hidden,-pthread",
        "-Xlinker", "--exclude-libs,ALL", "-Xcompiler", "-static-libstdc++",
        *GENCODE,
    ]
    if ptxas_report:
        cmd += ["-Xptxas", "-v"]
    for folder in INCLUDE_DIRS:
        cmd += ["-I", folder]
    # The nvidia-cuda-* wheels put the static cudart in the toolkit's lib/,
    # where their nvcc.profile names only lib64/ (a toolkit install's).
    libraries = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(nvcc))), "lib")
    if os.path.isfile(os.path.join(libraries, "libcudart_static.a")):
        cmd += ["-L", libraries]
    cmd += ["-isystem", ffi_include_dir, *SOURCES, "-o", output]
    return cmd


def build(output: str, ffi_include_dir: str, nvcc: str | None = None) -> tuple[bool, str]:
    """Build the library into `output`: (whether it was built, nvcc's output or why not)."""
    if os.environ.get(SKIP_ENV) == "0":
        return False, f"{SKIP_ENV}=0"
    nvcc = nvcc or find_nvcc()
    if nvcc is None:
        return False, "no nvcc found ($NVCC, PATH, $CUDA_HOME/bin, nvidia-cuda-nvcc wheels)"
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    partial = output + ".partial"
    try:
        done = subprocess.run(
            command(nvcc, ffi_include_dir, partial), capture_output=True, text=True, check=False
        )
    except OSError as error:
        return False, f"{nvcc} did not run: {error}"
    log = done.stdout + done.stderr
    if done.returncode != 0 or not os.path.exists(partial):
        if os.path.exists(partial):
            os.remove(partial)
        return False, f"{nvcc} failed (exit {done.returncode}):\n{log}"
    os.replace(partial, output)
    # The build's report (ptxas: registers, spills) beside the library, for the
    # tests, which then need not build it again.
    with open(report_path(output), "w", encoding="utf-8") as report:
        report.write(log)
    return True, log


def report_path(library: str) -> str:
    """Where build() leaves nvcc's report of `library`."""
    return library + ".log"


def nvcc_version(nvcc: str) -> str:
    """The toolkit release nvcc reports ("13.0, V13.0.88"), or why it could not be read."""
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=False).stdout
    except OSError as error:
        return f"unknown ({error})"
    found = [line.split("release", 1)[1].strip() for line in out.splitlines() if "release" in line]
    return found[0] if found else "unknown"


def targets() -> str:
    """What GENCODE builds, for the build log: "sm_80, sm_90a (SASS), compute_90 (PTX)"."""
    codes = [flag.rsplit("code=", 1)[1] for flag in GENCODE]
    sass = [code for code in codes if code.startswith("sm_")]
    ptx = [code for code in codes if code.startswith("compute_")]
    return f"{', '.join(sass)} (SASS), {', '.join(ptx)} (PTX)"


def main(argv: list[str] | None = None) -> int:
    """The build's entry point (CMakeLists.txt): a missing or failing nvcc is reported, an error only where
    $POOL3D_REQUIRE_CUDA is 1 (a release build)."""
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depends", action="store_true", help="print the files the library is built from")
    parser.add_argument("--decide", action="store_true",
                        help="print whether this build compiles the library and why; exit 0 if it does, 3 if not")
    parser.add_argument("--output", help="the library to build")
    parser.add_argument("--ffi-include", help="the folder holding xla/ffi/api/ffi.h")
    args = parser.parse_args(argv)
    if args.depends:
        print("\n".join(depends()))
        return 0
    build_it, why = wanted()
    if args.decide:
        print(why)
        return 0 if build_it else 3
    if not (args.output and args.ffi_include):
        parser.error("--output and --ffi-include are needed to build")
    required = os.environ.get(REQUIRE_ENV) == "1"
    if not build_it:
        print(f"pool3d_pass: the CUDA kernels' library is not built ({why}); the gpu binding uses its Pallas kernels")
        return 0
    nvcc = find_nvcc()
    built, log = build(args.output, args.ffi_include, nvcc)
    if built:
        print(f"pool3d_pass: built the CUDA kernels' library {args.output} for {targets()} "
              f"with nvcc {nvcc} (CUDA {nvcc_version(nvcc)})\n{log}")
        return 0
    if required:
        print(f"pool3d_pass: error: the CUDA kernels' library is not built ({log.strip()}) and "
              f"{REQUIRE_ENV}=1 asks for it: name an nvcc with NVCC=/path/to/nvcc", file=sys.stderr)
        return 1
    print(f"pool3d_pass: the CUDA kernels' library is not built ({log.strip()}); "
          "the gpu binding uses its Pallas kernels")
    return 0


if __name__ == "__main__":
    sys.exit(main())
