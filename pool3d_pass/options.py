"""The pass's settings and their words: one frozen `PassOptions`, checked when it is made.

Every entry point makes one (`pool3d-opt`, `rewrite`, `rewrite_text`,
`add_pass`, `pool3d_pass.jit` / `enable` for the compile hook) and the pass
carries it unchanged:

* `target`: `NEUTRAL` (the platform-neutral calls of docs/contract.md) or a
  platform name ("cpu", "neuron", ...) whose binding is spliced in; a platform
  without a binding gets no rewrite.
* `strategy`: `AUTO` (the platform's choice), `RECOMPUTE` (one backward call
  on grad_output, input, output) or `INDICES` (the forward call and the
  gradient from its indices, or one fused call where no forward exists); see
  docs/contract.md, "Strategies", and rewriting/strategy.py.
* `mesh`: a `jax.sharding.Mesh` of the program's devices, for programs
  compiled for several devices (the binding's partitionable functions), or None.
* `filename`: the name locations are reported under, or None.
* `gpu_kernels`: the gpu binding's kernels, `"auto"` (the CUDA kernels where
  their library loads, else Pallas), `"cuda"` or `"pallas"`; None: the
  environment's override (environment.py) or auto.
* `gpu_interpret`: the gpu binding's Pallas kernels in interpret mode (plain
  StableHLO that runs on any backend); None: the environment's override.

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
        if self.strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {self.strategy!r}; expected one of {', '.join(STRATEGIES)}")
        if self.gpu_kernels is not None and self.gpu_kernels not in GPU_KERNELS:
            raise ValueError(f"unknown gpu_kernels {self.gpu_kernels!r}; expected one of {', '.join(GPU_KERNELS)}")
        if self.gpu_interpret is not None and not isinstance(self.gpu_interpret, bool):
            raise ValueError(f"gpu_interpret must be True, False or None, got {self.gpu_interpret!r}")

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


def pass_options(options: PassOptions | None = None, **keywords: Any) -> PassOptions:
    """`options`, or one made from the keyword arguments (`target=`, `strategy=`, `mesh=`, `filename=`,
    `gpu_kernels=`, `gpu_interpret=`).

    The keyword APIs (`rewrite(module, target=..., strategy=...)`) and the
    options object are two spellings of one thing; giving both is an error.
    """
    if options is None:
        return PassOptions(**keywords)
    if keywords:
        raise TypeError(f"give either options or keyword arguments, not both ({', '.join(sorted(keywords))})")
    if not isinstance(options, PassOptions):
        raise TypeError(f"options must be a PassOptions, got {type(options).__name__}")
    return options
