"""The shape every binding has: what one call looks like to a binding, and what a binding states.

`CallSignature` is what a binding may inspect about one call before agreeing
to run it; `Binding` is a platform's entry (its functions per call, the
platform they are lowered for, its preconditions, its speed rule under
`auto`); `contract_preconditions` are the limits every binding inherits. A
platform's package builds its `Binding` from these; `registry.py` collects
them. This module imports nothing of any platform.

What a binding reads beyond the call (the gpu binding: which kernels, Pallas
interpret mode) reaches it as an argument, `options.BindingSettings`,
resolved once per pass run: `function(call, settings=...)` binds it into the
function where the binding's functions take it (`takes_settings`), and
`auto_refusal` and `describe` receive it.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from pool3d_pass.contract import BACKWARD, CALLS
from pool3d_pass.options import BindingSettings, binding_settings
from pool3d_pass.contract.pool_config import HoldsPool, PoolConfig


@dataclass(frozen=True)
class CallSignature(HoldsPool):
    """What a binding may inspect about one call before agreeing to run it."""

    grad_output_type: str  # element type names, e.g. "f32"
    input_type: str
    output_type: str
    pool: PoolConfig
    call: str = BACKWARD  # which of the contract's calls (a key of contract.CALLS)

    @classmethod
    def of_pool(cls, call: str, element_type: str, pool: PoolConfig) -> "CallSignature":
        """The signature of `call` on a matched pool: one element type throughout."""
        return cls(element_type, element_type, element_type, pool, call)


@dataclass(frozen=True, eq=False)  # hashed by identity: a cache key of the splicer
class Binding:
    platform: str
    functions: Mapping[str, str]  # call kind -> "module:function", imported when first used
    lowering_platform: str  # the JAX platform the functions are lowered for
    unsupported: Callable[[CallSignature], str | None]  # None: supported; else the reason
    require: Callable[[], None] = lambda: None  # raises ImportError naming what is missing
    # For programs compiled for several devices: versions XLA's SPMD partitioner
    # can split (see bindings/partitioned.py), by call kind.
    partitioned_functions: Mapping[str, str] = field(default_factory=dict)
    # "module:function" registering the kernels with XLA, run by `import pool3d_pass`
    # (so deserialized and persistently cached executables find them); must not import jax.
    register_kernels: str | None = None
    # A binding that is not faster than the platform's compiler everywhere: under strategy
    # "auto", (signature, kernel-view input shape, settings) -> why that call is left to the
    # compiler (the remark), or None to use the binding. An explicit strategy ignores it.
    auto_refusal: Callable[[CallSignature, tuple[int, ...], BindingSettings], str | None] | None = None
    # Optional: one short phrase naming the kernels that serve with these settings (the gpu
    # binding: "CUDA kernels" or "Pallas kernels (why)"), appended to each rewrite's remark.
    describe: Callable[[BindingSettings], str] | None = None
    # Whether the functions take the keyword `settings=` (a BindingSettings): `function` binds it.
    takes_settings: bool = False

    def implements(self, call: str, *, partitioned: bool = False) -> bool:
        return call in (self.partitioned_functions if partitioned else self.functions)

    def function(self, call: str = BACKWARD, *, partitioned: bool = False,
                 settings: BindingSettings | None = None) -> Callable:
        """The binding's function for `call`, with `settings` bound where it takes them.

        `settings`: the pass run's (`options.binding_settings(options)`); None: the
        environment's alone, as for a run without options.
        """
        path = (self.partitioned_functions if partitioned else self.functions)[call]
        module_name, name = path.split(":")
        function = getattr(importlib.import_module(module_name), name)
        if not self.takes_settings:
            return function
        bound = functools.partial(function, settings=binding_settings() if settings is None else settings)
        return functools.update_wrapper(bound, function)  # its name and docstring: the call's


def contract_preconditions(signature: CallSignature) -> str | None:
    """The contract's own limits, which every binding inherits."""
    if signature.call not in CALLS:
        return f"unknown call {signature.call!r}"
    if len({signature.grad_output_type, signature.input_type, signature.output_type}) != 1:
        return "grad_output, input and output differ in element type"
    return signature.pool.invalid()
