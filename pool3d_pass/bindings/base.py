"""The shape every binding has: what one call looks like to a binding, and what a binding states.

`CallSignature` is what a binding may inspect about one call before agreeing
to run it; `Binding` is a platform's entry (its functions per call, the
platform they are lowered for, its preconditions, and how strategy `auto`
decides on it: `Calibration`, whose `prior` states the stored figures
`pool3d_pass/calibration/` falls back on); `contract_preconditions` are the
limits every binding inherits. A
platform's package builds its `Binding` from these; `registry.py` collects
them. This module imports nothing of any platform.

A binding's functions are references, loaded when first used (`Functions`,
as xDSL registers its passes): which calls a binding implements is known
without importing anything, and a small loader function in the platform's
`binding.py` imports the module that defines them (and JAX with it), so
`import pool3d_pass` and pool3d-opt stay free of JAX.

What a binding reads beyond the call (the gpu binding: which kernels, Pallas
interpret mode) reaches it as an argument, `options.BindingSettings`,
resolved once per pass run: `function(call, settings=...)` binds it into the
function where the binding's functions take it (`takes_settings`), and
the calibration's prior and `describe` receive it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from pool3d_pass.contract import BACKWARD, CALLS
from pool3d_pass.contract.pool_config import HoldsPool, PoolConfig
from pool3d_pass.options import BindingSettings, binding_settings


@dataclass(frozen=True)
class CallSignature(HoldsPool):
    """What a binding may inspect about one call before agreeing to run it."""

    grad_output_type: str  # element type names, e.g. "f32"
    input_type: str
    output_type: str
    pool: PoolConfig
    call: str = BACKWARD  # which of the contract's calls (a key of contract.CALLS)

    @classmethod
    def of_pool(cls, call: str, element_type: str, pool: PoolConfig) -> CallSignature:
        """The signature of `call` on a matched pool: one element type throughout."""
        return cls(element_type, element_type, element_type, pool, call)


@dataclass(frozen=True)
class SpeedPrior:
    """What stored figures say about one call under strategy `auto`, before this machine measured anything.

    `rewrite`: whether the figures favour the kernels; `reason`: the figure and
    where it comes from (the remark); `settled`: whether the margin is wide
    enough that no machine is expected to differ (the CPU's gradients, 10x-60x
    XLA's speed), so first-use calibration leaves it alone; an unsettled prior
    (a thin margin, figures from another device) is what calibration decides.
    `source`: how the remark names the figures ("the prior", "a stored run").
    """

    rewrite: bool
    reason: str
    settled: bool = True
    source: str = "the prior"


@dataclass(frozen=True)
class Calibration:
    """How `auto` is decided on a binding's platform (pool3d_pass/calibration/, docs/calibration.md).

    `prior`: `(signature, kernel-view input shape, settings) -> SpeedPrior`,
    the stored figures used where this machine has no verdict; None: the
    kernels are used wherever they run (nothing to time against). `verify_first`:
    the numerics battery runs on a device of this platform before a class's
    first use there, under every strategy (kernels never run on such a device
    in this project's CI). `exclusive_device`: one process owns the device
    (NeuronCores), so a child cannot calibrate once the program holds it:
    calibrate before (at `enable()`, or `python -m pool3d_pass calibrate`).
    `eager`: the battery calls the functions on concrete arrays rather than
    under `jax.jit` (the Neuron SDK's kernels run that way off a device too).
    """

    prior: Callable[[CallSignature, tuple[int, ...], BindingSettings], SpeedPrior] | None = None
    verify_first: bool = False
    exclusive_device: bool = False
    eager: bool = False


class Functions(Mapping[str, Callable]):
    """A binding's functions by call kind, loaded on first use.

    `calls`: the calls it implements, known without importing anything;
    `load`: a module-level function returning {call kind: function}, which
    imports the module defining them. Reading `functions[call]` loads them;
    `call in functions` does not. `address` names `load` for a child process
    (the calibration child imports it there).
    """

    def __init__(self, load: Callable[[], Mapping[str, Callable]], calls: Iterable[str]):
        self.load = load
        self.calls = tuple(calls)

    def __getitem__(self, call: str) -> Callable:
        if call not in self.calls:
            raise KeyError(call)
        return self.load()[call]

    def __contains__(self, call: object) -> bool:
        return call in self.calls

    def __iter__(self) -> Iterator[str]:
        return iter(self.calls)

    def __len__(self) -> int:
        return len(self.calls)

    # Compared and hashed by identity (a Binding is a cache key of the splicer): equal
    # contents would mean loading them.
    __eq__ = object.__eq__
    __hash__ = object.__hash__

    @property
    def address(self) -> str:
        """"module:qualname" of `load`, by which another process imports it."""
        name = f"{self.load.__module__}:{self.load.__qualname__}"
        if "<" in name:
            raise ValueError(f"{name}: a binding's loader must be a module-level function, to be named in a child")
        return name


NO_FUNCTIONS = Functions(dict, ())


@dataclass(frozen=True, eq=False)  # hashed by identity: a cache key of the splicer
class Binding:
    platform: str
    functions: Functions  # call kind -> function, loaded when first used
    lowering_platform: str  # the JAX platform the functions are lowered for
    unsupported: Callable[[CallSignature], str | None]  # None: supported; else the reason
    require: Callable[[], None] = lambda: None  # raises ImportError naming what is missing
    # For programs compiled for several devices: versions XLA's SPMD partitioner
    # can split (see bindings/partitioned.py), by call kind.
    partitioned_functions: Functions = NO_FUNCTIONS
    # Registers the kernels with XLA, run by `import pool3d_pass` (so deserialized and
    # persistently cached executables find them); its module must not import jax.
    register_kernels: Callable[[], None] | None = None
    # How strategy "auto" decides where the kernels pay on this platform: the stored figures
    # (prior) and what the numerics battery and timing on this machine need (pool3d_pass/calibration).
    # An explicit strategy ignores every speed figure; a failed numerics battery refuses under all.
    calibration: Calibration = field(default_factory=Calibration)
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
        function = (self.partitioned_functions if partitioned else self.functions)[call]
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
