"""The device mesh of a program about to be compiled for several devices.

The partitionable CPU binding decodes the shardings XLA's partitioner hands it
against a `jax.sharding.Mesh`; that mesh must be the program's own: the axes
of its (single) Shardy `sdy.mesh`, laid over the compile's device assignment.
Anything else (no Shardy mesh, several, explicit device ids) is not read:
the program is then compiled unrewritten.
"""

from __future__ import annotations

import re

import numpy as np
from jaxlib.mlir import ir

_AXIS = re.compile(r'"([^"]+)"\s*=\s*(\d+)')


def mesh_axes(module: ir.Module) -> list[tuple[tuple[str, ...], tuple[int, ...]]]:
    """(axis names, axis sizes) of every `sdy.mesh` at the top of `module`, with no explicit device ids."""
    meshes = []
    for op in module.body.operations:
        if op.operation.name != "sdy.mesh":
            continue
        text = str(op.attributes["mesh"])
        if "device_ids" in text:
            continue
        axes = _AXIS.findall(text)
        meshes.append((tuple(name for name, _ in axes), tuple(int(size) for _, size in axes)))
    return meshes


def program_mesh(module: ir.Module, devices) -> "jax.sharding.Mesh | None":  # noqa: F821
    """The program's mesh over `devices` (the device assignment, in order), or None if unclear."""
    from jax.sharding import Mesh

    devices = list(np.ravel(devices))
    candidates = {axes for axes in mesh_axes(module) if int(np.prod(axes[1])) == len(devices)}
    if len(candidates) != 1:
        # No Shardy mesh (e.g. jax_use_shardy_partitioner=False) or several:
        # the shardings the partitioner hands over could not be decoded safely.
        return None
    names, sizes = candidates.pop()
    return Mesh(np.array(devices, dtype=object).reshape(sizes), names)
