"""`deviceless.missing_wheels()` recognises the CUDA 12 and the CUDA 13 wheels' layouts (no wheel installed here)."""

from __future__ import annotations

import importlib
import sys

import pytest

from checks import deviceless

pytestmark = pytest.mark.gpu


def _fake_site(tmp_path, files):
    for relative in files:
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
    return tmp_path


@pytest.fixture
def site(tmp_path, monkeypatch):
    def make(*files):
        _fake_site(tmp_path, files)
        monkeypatch.syspath_prepend(str(tmp_path))
        for name in [m for m in sys.modules if m.startswith(("jax_plugins", "nvidia"))]:
            monkeypatch.delitem(sys.modules, name)
        importlib.invalidate_caches()
    return make


@pytest.mark.parametrize("plugin, ptxas", [("jax_plugins/xla_cuda12/__init__.py", "nvidia/cuda_nvcc/bin/ptxas"),
                                           ("jax_plugins/xla_cuda13/__init__.py", "nvidia/cu13/bin/ptxas")])
def test_either_plugin_with_its_ptxas_is_enough(site, plugin, ptxas):
    site(plugin, ptxas)
    assert deviceless.missing_wheels() is None


def test_a_plugin_without_its_ptxas_names_the_wheel(site):
    site("jax_plugins/xla_cuda13/__init__.py", "nvidia/cu13/lib/libcudart.so.13")
    reason = deviceless.missing_wheels()
    assert reason.startswith("no ptxas") and "nvidia-cuda-nvcc>=13,<14" in reason


def test_no_plugin_names_both(site):
    site("nvidia/cu13/bin/ptxas")
    if any(deviceless._has_module(p) for p, *_ in deviceless.CUDA_PLUGINS.values()):
        pytest.skip("a real JAX CUDA plugin is installed in this environment")
    reason = deviceless.missing_wheels()
    assert "jax-cuda12-plugin" in reason and "jax-cuda13-plugin" in reason
