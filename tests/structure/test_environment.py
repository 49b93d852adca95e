"""Every environment variable the package and its build read is named, with its meaning, in environment.py."""

from __future__ import annotations

import re
from pathlib import Path

from pool3d_pass import environment

REPOSITORY = Path(__file__).resolve().parents[2]
NAMED = re.compile(r"""["'](POOL3D_[A-Z_]+)["']""")
# CMakeLists.txt reads the environment as $ENV{NAME}.
NAMED_BY_CMAKE = re.compile(r"\$ENV\{(POOL3D_[A-Z_]+)\}")


def test_every_variable_read_is_listed():
    sources = [*(REPOSITORY / "pool3d_pass").rglob("*.py"), *(REPOSITORY / "pool3d_pass").rglob("*.cc"),
               *(REPOSITORY / "pool3d_pass").rglob("*.h"), *(REPOSITORY / "pool3d_pass").rglob("*.cu"),
               REPOSITORY / "CMakeLists.txt"]
    read = {name for path in sources for pattern in (NAMED, NAMED_BY_CMAKE)
            for name in pattern.findall(path.read_text(encoding="utf-8"))}
    # the scan sees Python, C++ and the build (gpu/cuda/build.py, CMakeLists.txt)
    assert {"POOL3D_GPU_IMPL", "POOL3D_CPU_THREADS", "POOL3D_BUILD_CUDA", "POOL3D_FFI_INCLUDE"} <= read
    assert read == set(environment.VARIABLES), read ^ set(environment.VARIABLES)


def test_pass_level_variables_name_existing_options():
    from pool3d_pass.options import PassOptions

    fields = set(PassOptions.__dataclass_fields__)
    assert all(option in fields for _, option, _ in environment.VARIABLES.values() if option is not None)


def test_command_flags_repeat_the_gpu_settings_in_force(monkeypatch):
    """A reproducer line carries the gpu kernels and interpret mode in force: the options', whose defaults
    are the environment's when the options are made."""
    from pool3d_pass.options import BindingSettings, PassOptions, binding_settings, command_flags

    monkeypatch.delenv(environment.GPU_KERNELS, raising=False)
    monkeypatch.delenv(environment.GPU_INTERPRET, raising=False)
    assert command_flags(PassOptions(target="cpu")) == "--target=cpu --strategy=auto"
    assert (command_flags(PassOptions(strategy="indices", gpu_kernels="pallas"), target="gpu")
            == "--target=gpu --strategy=indices --gpu-kernels=pallas")
    monkeypatch.setenv(environment.GPU_KERNELS, "pallas")
    monkeypatch.setenv(environment.GPU_INTERPRET, "1")
    made_now = PassOptions(target="gpu")
    assert command_flags(made_now) == "--target=gpu --strategy=auto --gpu-kernels=pallas --gpu-interpret"
    assert command_flags(PassOptions(target="gpu", gpu_kernels="cuda", gpu_interpret=False)) == (
        "--target=gpu --strategy=auto --gpu-kernels=cuda")
    monkeypatch.delenv(environment.GPU_KERNELS)
    monkeypatch.delenv(environment.GPU_INTERPRET)
    # read once, when the options were made: never again inside the pass
    assert command_flags(made_now).endswith("--gpu-kernels=pallas --gpu-interpret")
    assert binding_settings(made_now) == BindingSettings("pallas", True)
