"""Recognise the contract's neutral calls, so a later run can bind them to a platform.

`pool3d-opt` (target neutral) leaves `custom_call @pool3d.max_pooling_3d_*`
(any of the contract's calls) with `api_version = 4` and its attributes in
`backend_config`. Running the
pass again with `--target=P` splices P's binding in its place. A call already
bound (the CPU binding's own call has `api_version = 1` and
`mhlo.backend_config`, the spelling of `jax.ffi.ffi_call`) is not neutral.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from jaxlib.mlir import ir

from pool3d_pass.contract import API_VERSION_TYPED_FFI, CALLS
from pool3d_pass.contract.pool_config import PoolConfig

_CALL_OF_TARGET = {spec.target: call for call, spec in CALLS.items()}


@dataclass(frozen=True)
class NeutralCall:
    call: str  # a key of contract.CALLS
    pool: PoolConfig


def read_neutral_call(op: ir.OpView) -> NeutralCall | None:
    """The contract attributes of `op` if it is an unbound neutral call, else None."""
    attributes = op.attributes
    call = _CALL_OF_TARGET.get(ir.StringAttr(attributes["call_target_name"]).value)
    if call is None:
        return None
    if "api_version" not in attributes or ir.IntegerAttr(attributes["api_version"]).value != API_VERSION_TYPED_FFI:
        return None
    spec = CALLS[call]
    config = attributes["backend_config"] if "backend_config" in attributes else None
    if not isinstance(config, ir.DictAttr) or any(name not in config for name in spec.attributes):
        return None
    if (len(op.operands), len(op.results)) != (len(spec.operands), len(spec.results)):
        return None

    def triple(name):
        return tuple(int(v) for v in np.asarray(config[name]).reshape(-1))

    return NeutralCall(call, PoolConfig(
        triple("kernel_size"),
        triple("stride"),
        triple("padding"),
        ir.StringAttr(config["data_format"]).value,
        ir.StringAttr(config["output_format"]).value,
    ))
