"""The device mesh of a program about to be compiled for several devices.

The partitionable bindings (`bindings/partitioned.py`) are lowered for a
`jax.sharding.Mesh` over the compile's device assignment, in its order. A
Shardy program gets its own: the axes of its (single) `sdy.mesh`. A GSPMD
program (`jax_use_shardy_partitioner=False`: no `sdy.mesh`, shardings as
`mhlo.sharding`) names no axes; it gets a 1-D mesh over its devices, which
serves as well, since the partitioning callbacks read the `HloSharding` XLA
hands them, not a mesh's axes. Anything else (several Shardy meshes, explicit
device ids) is not read: the program is then compiled unrewritten.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np
from jaxlib.mlir import ir

if TYPE_CHECKING:  # an annotation only: the mesh is built with jax imported inside program_mesh
    import jax

GSPMD_AXIS = "devices"  # the one axis of a GSPMD program's mesh
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


def _int_attribute(module: ir.Module, name: str) -> int | None:
    try:
        return ir.IntegerAttr(module.operation.attributes[name]).value
    except (KeyError, ValueError, TypeError):
        return None


def program_mesh(module: ir.Module, devices) -> jax.sharding.Mesh | None:
    """The program's mesh over `devices` (the device assignment, in order), or None if unclear."""
    from jax.sharding import Mesh

    devices = list(np.ravel(devices))
    if not any(op.operation.name == "sdy.mesh" for op in module.body.operations):
        # GSPMD: an SPMD program over the devices (not replicas: JAX 0.9's own pmap path)
        if _int_attribute(module, "mhlo.num_partitions") != len(devices):
            return None
        return Mesh(np.array(devices, dtype=object), (GSPMD_AXIS,))
    candidates = {axes for axes in mesh_axes(module) if int(np.prod(axes[1])) == len(devices)}
    if len(candidates) != 1:
        # Several Shardy meshes, or one with explicit device ids: which one the
        # program's shardings use is not read here.
        return None
    names, sizes = candidates.pop()
    return Mesh(np.array(devices, dtype=object).reshape(sizes), names)
