"""A description of the machine and software a benchmark ran on, for the JSON record."""

from __future__ import annotations

import datetime
import os
import platform
import sys


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gib() -> float | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 2**20, 2)
    except OSError:
        pass
    return None


def _version(module: str) -> str | None:
    try:
        mod = __import__(module)
    except ImportError:
        return None
    return getattr(mod, "__version__", "?")


def describe() -> dict:
    """CPU model, cores, memory, OS, python/numpy/jax/jaxlib/torch versions and the date."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        usable = os.cpu_count()
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": usable,
        "memory_gib": _memory_gib(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "python_implementation": sys.implementation.name,
        "numpy": _version("numpy"),
        "jax": _version("jax"),
        "jaxlib": _version("jaxlib"),
        "torch": _version("torch"),
        "env": {k: os.environ[k] for k in ("POOL3D_CPU_THREADS", "XLA_FLAGS", "OMP_NUM_THREADS")
                if k in os.environ},
    }
