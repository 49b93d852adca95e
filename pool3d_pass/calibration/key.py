"""What a verdict is about: the device it was measured on, and the configuration class.

A verdict holds only on the device, software and kernels it was measured
with, so its key names them all (`Device`): the platform and device model
(a CPU's model name and core count), the runtime (the PJRT client's
platform version, a CUDA driver), the kernels (which serve, and a digest of
their files: a rebuilt extension is another key), and the pool3d_pass, jax
and jaxlib versions. A cache written by another version is not read: its
keys differ.

`Subject` is the class: numerics (layout, element type, window, stride,
padding: the battery runs every call kind of the binding on it) or speed
(that, plus the job and the calls the pass emits for it, a size bucket:
input bytes in powers of 4, and for an inference pool whether its input is
made by an elementwise op XLA would fuse into its reduce_window). `shape` is the shape timed, the first one met
in its bucket; it is recorded, not part of the identity.

No JAX is imported here.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
from dataclasses import dataclass, field

NUMERICS, SPEED = "numerics", "speed"
ITEMSIZE = {"f32": 4, "bf16": 2, "f16": 2}
# Job names: the device check's (checks/device_check/timing.py) and the bench's.
GRADIENT_ONLY, FORWARD_AND_GRADIENT, INFERENCE = "gradient only", "forward + gradient", "inference"
FORWARD_OUTPUT_CALLS = "forward-output"  # the calls of an inference job (the plan kinds name a gradient's)


@dataclass(frozen=True)
class Device:
    """The device and software a verdict was measured with (see the module docstring)."""

    platform: str  # the compile's platform: "cpu", "gpu", "neuron"
    model: str
    runtime: str
    kernels: str  # which kernels serve, and the digest of their files
    versions: str

    def describe(self) -> str:
        return f"{self.platform} {self.model}"


@dataclass(frozen=True)
class Subject:
    """The configuration class of a verdict (see the module docstring)."""

    kind: str  # NUMERICS or SPEED
    layout: str
    dtype: str  # "f32", "bf16", "f16"
    kernel: tuple[int, int, int]
    stride: tuple[int, int, int]
    padding: tuple[int, int, int]
    job: str = ""  # SPEED: GRADIENT_ONLY, FORWARD_AND_GRADIENT or INFERENCE
    calls: str = ""  # SPEED: the plan kind the pass emits (rewriting/strategy.py), or FORWARD_OUTPUT_CALLS
    size: int = 0  # SPEED: size bucket, input bytes in (4^(size-1), 4^size]
    producer: bool = False  # SPEED, inference: the pool's input comes from an elementwise op XLA fuses into it
    shape: tuple[int, ...] = field(default=(), compare=False)  # SPEED: the shape to time (not part of the key)

    def numerics(self) -> Subject:
        """The numerics subject of the same layout, element type and window."""
        return Subject(NUMERICS, self.layout, self.dtype, self.kernel, self.stride, self.padding)

    def describe(self) -> str:
        window = f"k{_triple(self.kernel)} s{_triple(self.stride)} p{_triple(self.padding)}"
        text = f"{self.layout} {self.dtype} {window}"
        if self.kind == SPEED:
            text += f", {self.job} ({self.calls}{', after a fused producer' if self.producer else ''}), input " \
                    f"{size_label(self.size)}"
        return text

    def identity(self) -> dict:
        fields = dataclasses.asdict(self)
        del fields["shape"]
        return fields


def _triple(values) -> str:
    return str(values[0]) if len(set(values)) == 1 else "x".join(map(str, values))


def size_bucket(shape, dtype: str) -> int:
    """The size bucket of an input: ceil(log4(bytes))."""
    size = max(1, math.prod(shape) * ITEMSIZE.get(dtype, 4))
    return max(0, math.ceil(math.log2(size) / 2))


def size_label(bucket: int) -> str:
    def human(n: int) -> str:
        for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
            if n < 1024:
                return f"{n} {unit}"
            n //= 1024
        return f"{n} PiB"

    return f"{human(4 ** (bucket - 1)) if bucket else '0 B'}-{human(4 ** bucket)}"


@functools.lru_cache(maxsize=4096)
def digest(device: Device, subject: Subject) -> str:
    """The store's name for the verdict of `subject` on `device` (hex, 24 digits)."""
    text = json.dumps({"device": dataclasses.asdict(device), "subject": subject.identity()}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def shared_name(platform: str, kernels: str, subject: Subject, strategy: str) -> str:
    """The name several processes share one decision under (agreement.py): no host-specific field."""
    text = json.dumps({"platform": platform, "kernels": kernels, "strategy": strategy,
                       "subject": subject.identity()}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:24]
