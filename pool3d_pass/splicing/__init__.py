"""Splicing: how the rewrite emits each contract call, as the neutral custom call or as a platform's binding.

The layer between the rewrite (`rewriting/`, which decides what replaces a
gradient) and the bindings (`bindings/`, which say what runs each call):

- `emit.py`: `emitter(options, binding)`, the one callable (`Emit`) the
  strategies build their replacements with; it emits the neutral custom call
  (`contract.custom_call`) or splices the target's binding in;
- `splice.py`: `splice_call`, lowering a binding's function for one call with
  JAX (cached per call, shapes, attributes, mesh and binding settings) and
  moving its ops in place (each lowering appended to the caller's
  `spliced` list, whose holder keeps their partitioning callbacks alive);
- `per_shard.py`: which code of a multi-device program runs per shard (a
  shard_map body), where the binding's single-device function is spliced;
- `partition_keys.py`: process-independent keys for the `custom_partitioning`
  callbacks a partitionable lowering names.
"""

from pool3d_pass.splicing.emit import Emit, emitter
from pool3d_pass.splicing.per_shard import PerShardCode
from pool3d_pass.splicing.splice import BindingLoweringError, splice_call

__all__ = ["BindingLoweringError", "Emit", "PerShardCode", "emitter", "splice_call"]
