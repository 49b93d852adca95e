"""The pass's settings and their words: one frozen `PassOptions`, every field checked when it is made.

Every entry point makes one and the pass carries it unchanged: `rewrite`,
`rewrite_text`, `add_pass`, `pool3d-opt`, and the JAX entries `pool3d_pass.jit`,
`enable` and `enabled` (whose compile hook fills in each compile's target and mesh).
Two kinds of field:

* what the input is: `target` (`NEUTRAL`, the platform-neutral calls of
  docs/contract.md, or a platform with a binding, whose binding is spliced in;
  the bindings' registry says which), `mesh` (a `jax.sharding.Mesh` of the
  program's devices, for programs compiled for several devices, or None) and
  `filename` (the input's name in locations and parse errors, or None). Under
  JAX's entries the compile sets them: those entries refuse them.
* the settings (`SETTINGS`, the fields with `setting(...)` metadata): the
  choices a user makes, taken by every entry alike, as keywords of the same
  names (and as `pool3d-opt` flags, `--gpu-kernels` for `gpu_kernels`). Each
  is defined once, below: its words, its default, and where an environment
  variable (environment.py) gives the default, that variable, read when the
  options are made and never later inside the pass.

None for any field is the default, as leaving it out. A value of the wrong
type is a TypeError, an unknown word a ValueError, each naming the argument
(or the environment variable), the value and what is accepted.

This module imports only environment.py (the variables' names); the words
`target` accepts are the bindings' registry's (`set_platforms`).
`BindingSettings` is the part of the options a binding reads.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pool3d_pass import environment

NEUTRAL = "neutral"

RECOMPUTE = "recompute"
INDICES = "indices"
AUTO = "auto"
STRATEGIES = (AUTO, RECOMPUTE, INDICES)
GPU_KERNELS = (AUTO, "cuda", "pallas")
BOOLEAN = (True, False)

# An environment variable's words for a boolean setting.
_TRUE_WORDS = ("1", "true", "yes", "on")
_FALSE_WORDS = ("0", "false", "no", "off", "")


def setting(words: tuple, default: Any, help: str, variable: str | None = None) -> dict:
    """A settings field's metadata: accepted `words` (BOOLEAN for a flag), `default`, `help`, `variable`."""
    return {"setting": {"words": words, "default": default, "help": help, "variable": variable}}


@dataclass(frozen=True)
class PassOptions:
    target: str = NEUTRAL
    strategy: str = field(default=AUTO, metadata=setting(
        STRATEGIES, AUTO,
        "auto: the platform's choice (recompute for neutral output, indices where the binding has the layer "
        "calls); recompute: one backward call on (grad_output, input, output); indices: forward call + "
        "backward from its indices, or one fused call where no forward exists"))
    mesh: Any = None  # jax.sharding.Mesh | None
    filename: str | None = None
    gpu_kernels: str = field(default=None, metadata=setting(
        GPU_KERNELS, AUTO,
        "the gpu binding's kernels: auto (the CUDA kernels where their library loads, else Pallas), cuda or pallas",
        environment.GPU_KERNELS))
    gpu_interpret: bool = field(default=None, metadata=setting(
        BOOLEAN, False,
        "the gpu binding's Pallas kernels in interpret mode (plain StableHLO that runs on any backend)",
        environment.GPU_INTERPRET))

    def __post_init__(self) -> None:
        # None stands for the default, exactly as leaving the argument out.
        if self.target is None:
            object.__setattr__(self, "target", NEUTRAL)
        _check_type("target", self.target, str, f"'{NEUTRAL}' or a platform name")
        if self.target != NEUTRAL:
            check_word("target", self.target, targets())
        for name, spec in SETTING_SPECS.items():
            object.__setattr__(self, name, _setting_value(name, spec, getattr(self, name)))
        if self.mesh is not None and not (hasattr(self.mesh, "axis_names") and hasattr(self.mesh, "devices")):
            raise TypeError(f"mesh must be a jax.sharding.Mesh or None, got {self.mesh!r:.60} "
                            f"({type(self.mesh).__name__})")
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

    def settings(self) -> dict[str, Any]:
        """The settings' values, by name (what every entry takes)."""
        return {name: getattr(self, name) for name in SETTINGS}

    def replace(self, **changes: Any) -> PassOptions:
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class BindingSettings:
    """The settings a binding reads beyond its call: an argument of its functions, a key of each lowering.

    `gpu_kernels`: the gpu binding's kernels asked for ("auto", "cuda",
    "pallas"); `gpu_interpret`: whether its Pallas kernels run in interpret
    mode. Other bindings ignore both.
    """

    gpu_kernels: str = AUTO
    gpu_interpret: bool = False


def binding_settings(options: PassOptions | None = None) -> BindingSettings:
    """The binding's settings of a run with `options`; None: `PassOptions()`'s (the defaults).

    Taken from the options once per pass run and handed to the binding with
    every call (`Binding.function(call, settings=...)`), so two runs with
    different settings never share a cached lowering.
    """
    options = PassOptions() if options is None else options
    return BindingSettings(options.gpu_kernels, options.gpu_interpret)


SETTING_SPECS: dict[str, dict] = {f.name: f.metadata["setting"] for f in dataclasses.fields(PassOptions)
                                  if "setting" in f.metadata}
SETTINGS = tuple(SETTING_SPECS)
FIELDS = tuple(f.name for f in dataclasses.fields(PassOptions))
INPUT_FIELDS = tuple(name for name in FIELDS if name not in SETTINGS)  # target, mesh, filename
_INPUT_DEFAULTS = {f.name: f.default for f in dataclasses.fields(PassOptions) if f.name in INPUT_FIELDS}


def _setting_value(name: str, spec: dict, value: Any) -> Any:
    """A setting's value checked, None replaced by its variable's value (checked too), else its default."""
    words, variable = spec["words"], spec["variable"]
    if value is None and variable is not None and os.environ.get(variable) is not None:
        raw = os.environ[variable].strip()
        if words is BOOLEAN:
            if raw.lower() not in _TRUE_WORDS + _FALSE_WORDS:
                raise ValueError(f"{variable}={raw!r} (the default of {name}): expected one of "
                                 f"{', '.join(w for w in _TRUE_WORDS + _FALSE_WORDS if w)} or empty")
            return raw.lower() in _TRUE_WORDS
        if raw:
            try:
                check_word(name, raw.lower(), words)
            except ValueError as error:
                raise ValueError(f"{variable}={raw!r} (the default of {name}): {error}") from None
            return raw.lower()
    if value is None:
        return spec["default"]
    if words is BOOLEAN:
        if not isinstance(value, bool):
            raise TypeError(f"{name} must be True, False or None, got {value!r} ({type(value).__name__})")
        return value
    _check_type(name, value, str, ", ".join(map(repr, words)))
    check_word(name, value, words)
    return value


# The platforms with a binding, as the bindings' registry lists them (bindings/registry.py hands over its
# `platforms` when it is imported, which `import pool3d_pass` does before any PassOptions can be made).
_platforms: Callable[[], list[str]] = list


def set_platforms(source: Callable[[], list[str]]) -> None:
    """Where the words of `target` come from: the bindings' registry's `platforms`."""
    global _platforms
    _platforms = source


def targets() -> list[str]:
    """The words `target` accepts: neutral, and every platform with a binding."""
    return [NEUTRAL, *_platforms()]


def check_word(argument: str, value: Any, accepted: tuple[str, ...] | list[str]) -> None:
    """ValueError naming `argument`, `value` and `accepted` unless `value` is one of `accepted`."""
    if value in accepted:
        return
    hint = f" (the names are lower case: {value.lower()!r})" if isinstance(value, str) and value.lower() in accepted else ""
    raise ValueError(f"unknown {argument} {value!r}; expected one of {', '.join(accepted)}{hint}")


def _check_type(argument: str, value: Any, kind: type, accepted: str) -> None:
    if not isinstance(value, kind):
        raise TypeError(f"{argument} must be a {kind.__name__} ({accepted}), got {value!r} ({type(value).__name__})")


def pass_options(options: PassOptions | None = None, **keywords: Any) -> PassOptions:
    """`options`, or one made from the keyword arguments (any of `FIELDS`).

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


def compile_options(options: PassOptions | None = None, **keywords: Any) -> PassOptions:
    """The options of a JAX entry (`jit`, `enable`, `enabled`): the settings, as `options` or keywords.

    The input's fields (`INPUT_FIELDS`) are each compile's own there (the
    platform, the devices, the module), so giving one is a TypeError saying so.
    """
    given = sorted(name for name in INPUT_FIELDS if name in keywords
                   or (isinstance(options, PassOptions) and getattr(options, name) != _INPUT_DEFAULTS[name]))
    if given:
        raise TypeError(f"{', '.join(given)}: set by each compile under pool3d_pass.jit and enable() (the "
                        f"platform, the devices, the module); the settings are {', '.join(SETTINGS)}")
    return pass_options(options, **keywords)


def command_flags(options: PassOptions, target: str | None = None) -> str:
    """The pool3d-opt flags that repeat a run of the pass with `options`: what a reproducer line prints.

    `--target`, then every setting that differs from its default or is the
    strategy (the gpu binding's only for the gpu target). `target` names the
    platform where the run's options leave it to the compile (the JAX hook).
    """
    target = target or options.target
    flags = [f"--target={target}"]
    for name, spec in SETTING_SPECS.items():
        value = getattr(options, name)
        if name.startswith("gpu_") and target != "gpu":
            continue
        if spec["words"] is BOOLEAN:
            if value:
                flags.append(f"--{name.replace('_', '-')}")
        elif name == "strategy" or name.startswith("gpu_") or value != spec["default"]:
            flags.append(f"--{name.replace('_', '-')}={value}")
    return " ".join(flags)
