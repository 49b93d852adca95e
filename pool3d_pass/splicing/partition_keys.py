"""Process-independent keys for the `custom_partitioning` calls a partitionable binding emits.

`jax.experimental.custom_partitioning` lowers to
`custom_call @CustomSPMDPartitioning` whose `backend_config` is
`str(id(callback))`, the key under which XLA's partitioner later looks the
Python callback up (`jax._src.custom_partitioning._sharding_callbacks`, a
weak-value dictionary). An object's id differs in every process, so JAX's
persistent compilation cache, which hashes the module, never hits again for a
program holding such a call. JAX's flag
`jax_remove_custom_partitioning_ptr_from_cache_key` would drop the key from
the hash, but it applies to the whole process, the user's own
custom_partitioning calls included (whose callbacks may differ between
processes under one key), so pool3d_pass leaves it alone.

Instead each of pool3d_pass's own calls gets a key computed from what the
lowering depends on (binding, call, operand shapes and types, attributes, mesh
axes and device ids) and its callback is registered under that key too. Two
lowerings with one key are the same lowering, so either callback serves. The
keys are `pool3d_pass:` plus a digest: never an `id()` (digits only), so they
cannot collide with JAX's own. The caller holds the returned callbacks for as
long as a compile may need them.
"""

from __future__ import annotations

import hashlib
import re

PARTITIONING_TARGET = "CustomSPMDPartitioning"
KEY_PREFIX = "pool3d_pass:"
_CALL = re.compile(r'@' + PARTITIONING_TARGET + r'\b[^\n]*?backend_config = "(\d+)"')


def mesh_identity(mesh) -> tuple:
    """What of `mesh` a partitioned lowering depends on: axis names and sizes, device ids in order."""
    return (
        tuple(mesh.axis_names),
        tuple(mesh.devices.shape),
        tuple(int(device.id) for device in mesh.devices.flat),
        tuple(sorted({device.platform for device in mesh.devices.flat})),
    )


def stable_key(identity: tuple, occurrence: int) -> str:
    digest = hashlib.sha256(repr((identity, occurrence)).encode()).hexdigest()[:32]
    return KEY_PREFIX + digest


def _callbacks():
    from jax._src import custom_partitioning  # the registry XLA's partitioner reads (jax_compat.JAX_INTERNALS)

    return custom_partitioning._sharding_callbacks


def rekey(text: str, identity: tuple) -> tuple[str, tuple]:
    """`text` with each CustomSPMDPartitioning key replaced by a stable one; the callbacks, now under both."""
    registry = _callbacks()
    found = []

    def replace(match: re.Match) -> str:
        old = match.group(1)
        callback = registry[old.encode()]  # KeyError: the lowering's callback died already (never expected)
        new = stable_key(identity, len(found))
        registry[new.encode()] = callback
        found.append(callback)
        return match.group(0)[: match.start(1) - match.start(0)] + new + '"'

    return _CALL.sub(replace, text), tuple(found)
