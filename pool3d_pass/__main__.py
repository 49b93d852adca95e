"""`python -m pool3d_pass`: what this installation has, one line per piece; `... calibrate`: strategy auto's verdicts.

Says which kernels the installation can use and with which JAX: the CPU
kernels (the extension is built and loads), the CUDA kernels (the library is
in the package and loads), the Pallas kernels (JAX's Triton backend imports),
the Neuron SDK (nki and nkilib import), and the jax/jaxlib versions against
the supported range. Each piece is looked at on its own and reported, never
raised: a missing JAX or a broken piece is a line of the report, so the
command works in exactly the installations that need it most. Exits 0.
Then the verdict cache of strategy auto's calibration: where it is and what
it holds (docs/calibration.md).

`python -m pool3d_pass calibrate ...` measures verdicts ahead of time
(pool3d_pass/cli/calibrate.py; `--help` says how).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import platform
import sys

SUPPORTED = ">=0.9.0,<0.13"  # pyproject.toml's range (jax_compat.SUPPORTED_RANGE where jaxlib imports)


def _first_line(error: BaseException) -> str:
    text = (str(error).strip().splitlines() or [""])[0]
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def jax_line() -> str:
    jax, jaxlib = _version("jax"), _version("jaxlib")
    if jax is None or jaxlib is None:
        missing = " and ".join(name for name, v in (("jax", jax), ("jaxlib", jaxlib)) if v is None)
        return f"JAX: {missing} not installed (pool3d_pass needs jax and jaxlib {SUPPORTED})"
    line = f"JAX: jax {jax}, jaxlib {jaxlib} (supported {SUPPORTED})"
    try:
        from pool3d_pass import jax_compat

        low, high = (jax_compat.parse_version(v) for v in jax_compat.SUPPORTED_RANGE)
        if not all(low <= jax_compat.parse_version(v) < high for v in (jax, jaxlib)):
            line += ": OUTSIDE the supported range"
    except Exception as error:  # noqa: BLE001 - a report line, never a crash
        line += f" (range not checked: {_first_line(error)})"
    return line


def cpu_line() -> str:
    try:
        from pool3d_pass.bindings.cpu import registration

        module = registration.load_kernel_module()
        module.handlers()
        return f"CPU kernels: built, loaded ({module.__file__})"
    except Exception as error:  # noqa: BLE001 - a report line, never a crash
        return f"CPU kernels: not usable ({_first_line(error)})"


def cuda_line() -> str:
    try:
        from pool3d_pass.bindings.gpu.cuda import library as cuda_library

        path = cuda_library.library_path()
        if not cuda_library.is_built():
            return (f"CUDA kernels: not in this installation ({path} is missing: built only where nvcc is "
                    "found); the gpu binding uses the Pallas kernels")
        reason = cuda_library.unavailable()
        if reason is not None:
            return f"CUDA kernels: library present, not usable: {reason}"
        built = cuda_library.built_with(cuda_library.load())
        driver = cuda_library.driver_version()
        return (f"CUDA kernels: library present, loads ({path}); built with CUDA "
                f"{'(not recorded)' if built is None else cuda_library.release(built)}, "
                + ("no NVIDIA driver here" if driver is None
                   else f"this NVIDIA driver supports CUDA {cuda_library.release(driver)}"))
    except Exception as error:  # noqa: BLE001 - a report line, never a crash
        return f"CUDA kernels: not checked ({_first_line(error)})"


def pallas_line() -> str:
    try:
        importlib.import_module("jax.experimental.pallas.triton")
        return "Pallas: importable (jax.experimental.pallas.triton: the gpu binding's Pallas kernels)"
    except Exception as error:  # noqa: BLE001 - a report line, never a crash
        return f"Pallas: not importable ({_first_line(error)})"


def neuron_line() -> str:
    try:
        from pool3d_pass.bindings.neuron import sdk

        found = sdk.problems()
    except Exception as error:  # noqa: BLE001 - a report line, never a crash
        return f"Neuron SDK: not checked ({_first_line(error)})"
    if not found:
        return "Neuron SDK: importable (nki and nkilib: the neuron binding's kernel)"
    return f"Neuron SDK: not importable ({'; '.join(found)}; see docs/neuron.md)"


def calibration_lines() -> list[str]:
    try:
        from pool3d_pass.cli.calibrate import cache_lines

        return cache_lines()
    except Exception as error:  # noqa: BLE001 - a report line, never a crash
        return [f"Calibration cache: not read ({_first_line(error)})"]


def report() -> list[str]:
    """The lines `python -m pool3d_pass` prints."""
    here = os.path.dirname(os.path.abspath(__file__))
    version = _version("pool3d_pass") or "not installed as a distribution"
    return [
        f"pool3d_pass {version} ({here})",
        f"Python {platform.python_version()} ({sys.executable})",
        jax_line(),
        cpu_line(),
        cuda_line(),
        pallas_line(),
        neuron_line(),
        *calibration_lines(),
    ]


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["calibrate"]:
        from pool3d_pass.cli.calibrate import main as calibrate

        return calibrate(argv[1:])
    if argv:
        print("usage: python -m pool3d_pass [calibrate ...]  (calibrate --help says more)", file=sys.stderr)
        return 2
    for line in report():
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
