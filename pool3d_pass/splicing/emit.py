"""How the rewrite emits a call of the contract: the neutral custom call, or a platform's binding.

An `Emit` takes `(call, operands, result_types, *, kernel_size, stride,
padding, data_format[, output_format])` and returns the call's results; the
strategies (`rewriting/recompute.py`, `indices.py`, `inference.py`) build
their replacements from it and never know which one they got. Where the
output is neutral it is `contract.custom_call.CallBuilder`; otherwise it is
`splice.splice_call` with the target's binding and the run's settings bound:
the binding's function for the call is lowered with JAX and its ops moved in.

For a program compiled for several devices, a binding emits its partitionable
version, except in code that runs per shard (a `jax.shard_map` body:
`per_shard.py`), which gets its single-device function.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from jaxlib.mlir import ir

from pool3d_pass.bindings.registry import Binding
from pool3d_pass.contract.custom_call import CallBuilder
from pool3d_pass.options import BindingSettings, PassOptions
from pool3d_pass.splicing.per_shard import PerShardCode
from pool3d_pass.splicing.splice import splice_call

Emit = Callable[..., list[ir.Value]]


def emitter(options: PassOptions, binding: Binding | None, settings: BindingSettings,
            per_shard: PerShardCode | None = None, spliced: list | None = None) -> Emit:
    """The neutral call's builder, or `binding` (the target's) spliced in, on `options.mesh` if given.

    One per pass run: the neutral builder keeps the attributes it built for the run's later calls.
    (A target without a binding never emits: the pass refuses its gradients first.) `settings`:
    the run's (`options.binding_settings(options)`), handed to the binding with every call.
    `per_shard`: the run's answer to which code runs per shard (the remarks ask it too), else a new one.
    `spliced`: where given, receives each lowering spliced in (`splice.splice_call`).
    """
    if options.neutral or binding is None:
        return CallBuilder()
    if options.mesh is None:
        return functools.partial(splice_call, binding, mesh=None, settings=settings, spliced=spliced)
    per_shard = per_shard or PerShardCode()

    def emit(*args, **kwargs) -> list[ir.Value]:
        here = ir.InsertionPoint.current.block
        mesh = None if per_shard.contains(here) else options.mesh
        return splice_call(binding, *args, mesh=mesh, settings=settings, spliced=spliced, **kwargs)

    return emit
