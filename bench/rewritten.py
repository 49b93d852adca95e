"""Compile a function plainly (`jax.jit`) and through the pass (`pool3d_pass.jit`), and read what ran.

* `compile_plain(fun, *args)`: `jax.jit(fun).lower(*args).compile()`.
* `compile_rewritten(fun, *args, strategy=None)`: the same through
  `pool3d_pass.jit`. `strategy=None` is the pass's own choice (what a user
  gets); "recompute" / "indices" force one.
* `census(compiled)`: what XLA compiled: how many of each contract call
  (`backward`, `forward`, `backward_from_indices`, `backward_from_input`),
  and of the HLO ops that could cost time beside them (`reduce-window`,
  `select-and-scatter`, `scatter` (XLA:CPU turns `select-and-scatter` into
  an argmax `reduce-window` plus a `scatter`), `transpose`, `copy`), counted
  in the optimised HLO text (fused computations included).
* `strategy_of(census)`: the strategy those calls amount to.

So a benchmark proves which program it measured without a second compile.
"""

from __future__ import annotations

import re

import jax

import pool3d_pass
from pool3d_pass.bindings import cpu as cpu_binding
from pool3d_pass.contract import TARGETS

__all__ = ["compile_plain", "compile_rewritten", "compile_both", "census", "strategy_of",
           "binding_has_layer_calls", "calls_text"]

HLO_OPS = ("reduce-window", "select-and-scatter", "scatter", "transpose", "copy")


def binding_has_layer_calls() -> bool:
    """Whether the cpu binding runs the indices strategy's calls (then `auto` picks `indices` on CPU)."""
    from pool3d_pass.bindings.registry import binding_for
    from pool3d_pass.rewriting.strategy import preferred_strategy

    return preferred_strategy(binding_for("cpu")) == "indices"


def compile_plain(fun, *args):
    return jax.jit(fun).lower(*args).compile()


def compile_rewritten(fun, *args, strategy: str | None = None):
    """`pool3d_pass.jit(fun)` compiled for `args`, with the given strategy (None: the pass's choice)."""
    if not hasattr(pool3d_pass, "jit"):
        raise ImportError("pool3d_pass.jit (pool3d_pass.integration) is not importable")
    cpu_binding.register()
    return pool3d_pass.jit(fun, strategy=strategy).lower(*args).compile()


def census(compiled) -> dict[str, int]:
    """Contract calls by kind, and the HLO_OPS, in what XLA compiled."""
    text = compiled.as_text()
    out = {kind: text.count(f'custom_call_target="{name}"') for kind, name in TARGETS.items()}
    for op in HLO_OPS:
        out[op] = len(re.findall(rf"\s{re.escape(op)}\(", text))
    return out


def strategy_of(counts: dict[str, int]) -> str:
    """"indices", "indices (fused)", "recompute", a mix ("indices+recompute") or "none"."""
    parts = []
    if counts.get("forward") or counts.get("backward_from_indices"):
        parts.append("indices")
    if counts.get("backward_from_input"):
        parts.append("indices (fused)")
    if counts.get("backward"):
        parts.append("recompute")
    return "+".join(parts) or "none"


def calls_text(counts: dict[str, int]) -> str:
    """A short description of the calls and extra HLO ops, e.g. "forward 1, from_indices 1; reduce-window 0"."""
    short = {"backward": "backward", "forward": "forward", "backward_from_indices": "from_indices",
             "backward_from_input": "from_input"}
    calls = ", ".join(f"{short[k]} {counts[k]}" for k in TARGETS if counts.get(k))
    extra = ", ".join(f"{op} {counts[op]}" for op in ("reduce-window", "select-and-scatter", "scatter") if counts.get(op))
    return (calls or "no call") + (f"; {extra}" if extra else "")


def compile_both(fun, *args, strategy: str | None = None):
    """(plain Compiled, rewritten Compiled, census of the rewritten one)."""
    plain = compile_plain(fun, *args)
    rewritten = compile_rewritten(fun, *args, strategy=strategy)
    return plain, rewritten, census(rewritten)
