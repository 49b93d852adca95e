"""The pass's settings and their words: one frozen `PassOptions`, checked when it is made.

Every entry point makes one (`pool3d-opt`, `rewrite`, `rewrite_text`,
`add_pass`, `pool3d_pass.jit` / `enable` for the compile hook) and the pass
carries it unchanged:

* `target`: `NEUTRAL` (the platform-neutral calls of docs/contract.md) or a
  platform name ("cpu", "neuron", ...) whose binding is spliced in; the
  platforms are the bindings' registry's, so the pass (rewriting/max_pool_backward.py)
  refuses a name without a binding, not this module.
* `strategy`: `AUTO` (the platform's choice), `RECOMPUTE` (one backward call
  on grad_output, input, output) or `INDICES` (the forward call and the
  gradient from its indices, or one fused call where no forward exists); see
  docs/contract.md, "Strategies", and rewriting/strategy.py.
* `mesh`: a `jax.sharding.Mesh` of the program's devices, for programs
  compiled for several devices (the binding's partitionable functions), or None.
* `filename`: the input's name, or None: `rewrite_text` parses under it (its
  locations and parse errors name it), remarks name parser locations ("-") with it.
* `gpu_kernels`: the gpu binding's kernels, `"auto"` (the CUDA kernels where
  their library loads, else Pallas), `"cuda"` or `"pallas"`; None: the
  environment's override (environment.py) or auto.
* `gpu_interpret`: the gpu binding's Pallas kernels in interpret mode (plain
  StableHLO that runs on any backend); None: the environment's override.

None for `target` or `strategy` is the default, as leaving it out. A value
of the wrong type is a TypeError, an unknown word a ValueError, each naming
the argument, the value and what is accepted.

This module imports nothing of the package: the bindings, the rewriting, the
command line and the JAX integration all take these words from here.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

NEUTRAL = "neutral"

RECOMPUTE = "recompute"
INDICES = "indices"
AUTO = "auto"
STRATEGIES = (AUTO, RECOMPUTE, INDICES)
GPU_KERNELS = (AUTO, "cuda", "pallas")


@dataclass(frozen=True)
class PassOptions:
    target: str = NEUTRAL
    strategy: str = AUTO
    mesh: Any = None  # jax.sharding.Mesh | None
    filename: str | None = None
    gpu_kernels: str | None = None
    gpu_interpret: bool | None = None

    def __post_init__(self) -> None:
        # None stands for the default, exactly as leaving the argument out.
        if self.target is None:
            object.__setattr__(self, "target", NEUTRAL)
        if self.strategy is None:
            object.__setattr__(self, "strategy", AUTO)
        _check_type("target", self.target, str, f"'{NEUTRAL}' or a platform name")
        _check_type("strategy", self.strategy, str, ", ".join(map(repr, STRATEGIES)))
        check_word("strategy", self.strategy, STRATEGIES)
        if self.gpu_kernels is not None:
            check_word("gpu_kernels", self.gpu_kernels, GPU_KERNELS)
        if self.gpu_interpret is not None and not isinstance(self.gpu_interpret, bool):
            raise ValueError(f"gpu_interpret must be True, False or None, got {self.gpu_interpret!r}")
        if self.filename is not None:
            _check_type("filename", self.filename, str, "the input's name")

    @property
    def neutral(self) -> bool:
        """Whether the pass emits the platform-neutral calls (no binding is spliced in)."""
        return self.target == NEUTRAL

    @property
    def partitioned(self) -> bool:
        """Whether the program spans several devices (the binding's partitionable functions)."""
        return self.mesh is not None

    def replace(self, **changes: Any) -> PassOptions:
        return dataclasses.replace(self, **changes)


def check_word(argument: str, value: Any, accepted: tuple[str, ...] | list[str]) -> None:
    """ValueError naming `argument`, `value` and `accepted` unless `value` is one of `accepted`."""
    if value in accepted:
        return
    hint = f" (the names are lower case: {value.lower()!r})" if isinstance(value, str) and value.lower() in accepted else ""
    raise ValueError(f"unknown {argument} {value!r}; expected one of {', '.join(accepted)}{hint}")


def _check_type(argument: str, value: Any, kind: type, accepted: str) -> None:
    if not isinstance(value, kind):
        raise TypeError(f"{argument} must be a {kind.__name__} ({accepted}), got {value!r} ({type(value).__name__})")


FIELDS = tuple(f.name for f in dataclasses.fields(PassOptions))


def pass_options(options: PassOptions | None = None, **keywords: Any) -> PassOptions:
    """`options`, or one made from the keyword arguments (`target=`, `strategy=`, `mesh=`, `filename=`,
    `gpu_kernels=`, `gpu_interpret=`).

    The keyword APIs (`rewrite(module, target=..., strategy=...)`) and the
    options object are two spellings of one thing; giving both is an error.
    """
    unknown = sorted(set(keywords) - set(FIELDS))
    if unknown:
        raise TypeError(f"unknown keyword argument(s) {', '.join(unknown)}; the options are {', '.join(FIELDS)}")
    if options is not None and not isinstance(options, PassOptions):
        raise TypeError(f"options must be a PassOptions or None, got {options!r} ({type(options).__name__}); "
                        f"the settings are keywords, e.g. target='cpu', strategy='indices'")
    if options is None:
        return PassOptions(**keywords)
    if keywords:
        raise TypeError(f"give either options or keyword arguments, not both ({', '.join(sorted(keywords))})")
    return options
