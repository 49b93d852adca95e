"""Calls whose result buffers hold a known "poison" pattern when the kernel starts: unwritten elements show.

XLA gives a custom call a fresh result buffer whose contents nobody sets, so
an element a kernel forgets to write holds whatever the allocator had there
(often the right value from an earlier run). The contract's FFI targets take
a fixed number of operands, so a poisoned buffer cannot be passed in as an
extra operand aliased to the result. What does work is donation: the call
runs in its own program `f(poisons, *operands)`, with `poisons` (one buffer
per result, same shape and type, filled with a byte pattern) donated and
otherwise unused. XLA then assigns each donated buffer to the output of the
same shape, and where the program's outputs are the kernel's own results
(its entry computation holds nothing but parameters, custom calls, tuples,
get-tuple-element and bitcasts) the kernel writes straight into the poisoned
memory. `run` proves that per call: the output's device pointer must be the
donated buffer's, and the compiled program must have that form; where either
fails the record says the poison did not reach the kernel.

Each call runs twice, with two patterns (0xFF bytes: NaN for the float types,
-1 for int16; 0x7F bytes: a large finite number or NaN, 32639 for int16). An
element is unwritten when it holds the first pattern after the first run and
the second after the second: no value a kernel writes can be both.
"""

from __future__ import annotations

import functools
import re

import numpy as np

PATTERNS = (0xFF, 0x7F)
# What may stand in a program whose outputs are the kernel's own results.
PLAIN_OPS = frozenset({"parameter", "custom-call", "get-tuple-element", "tuple", "bitcast"})


def pattern_bits(dtype, byte: int) -> int:
    """The unsigned integer whose bytes are all `byte`, for an element of `dtype`."""
    size = np.dtype(dtype).itemsize
    return int.from_bytes(bytes([byte]) * size, "little")


@functools.lru_cache(maxsize=256)
def _maker(shape: tuple, dtype_name: str, byte: int):
    import jax
    import jax.numpy as jnp
    from jax import lax

    dtype = np.dtype(dtype_name) if dtype_name != "bfloat16" else jnp.dtype(jnp.bfloat16)
    unsigned = np.dtype(f"u{dtype.itemsize}")
    return jax.jit(lambda: lax.bitcast_convert_type(jnp.full(shape, pattern_bits(dtype, byte), unsigned), dtype))


def filled(shape, dtype, byte: int, device=None):
    """A device array of `shape` and `dtype`, every byte `byte` (made on the device: no host copy)."""
    import jax

    make = _maker(tuple(shape), np.dtype(dtype).name, byte)
    if device is None:
        return make()
    with jax.default_device(device):
        return jax.device_put(make(), device)


def unwritten(first, second, dtype) -> int:
    """Elements holding the first pattern after the first run and the second after the second."""
    unsigned = np.dtype(f"u{np.dtype(dtype).itemsize}")
    a = np.asarray(first).view(unsigned)
    b = np.asarray(second).view(unsigned)
    return int(np.count_nonzero((a == pattern_bits(dtype, PATTERNS[0])) & (b == pattern_bits(dtype, PATTERNS[1]))))


def hlo_op(line: str) -> str | None:
    """The op of one HLO instruction line ("%name = TYPE op(...)"); TYPE may be a parenthesised tuple."""
    _, sep, rest = line.partition(" = ")
    if not sep:
        return None
    rest = rest.lstrip()
    if rest.startswith("("):  # a tuple type: skip to its closing parenthesis
        depth = 0
        for i, ch in enumerate(rest):
            depth += {"(": 1, ")": -1}.get(ch, 0)
            if depth == 0:
                rest = rest[i + 1:]
                break
    else:
        rest = rest.split(" ", 1)[1] if " " in rest else ""
    match = re.match(r"\s*([\w-]+)\(", rest)
    return match.group(1) if match else None


def plain_entry(hlo_text: str) -> bool:
    """Whether a compiled program's entry computation is only the kernel calls (its outputs are theirs)."""
    match = re.search(r"^ENTRY [^\n]*\{\n(.*?)^\}", hlo_text, re.S | re.M)
    if match is None:
        return False
    ops = [hlo_op(line) for line in match.group(1).splitlines() if line.strip()]
    return bool(ops) and all(op in PLAIN_OPS for op in ops) and "custom-call" in ops


class PoisonedCall:
    """`fn(*operands)` compiled once with donated poisoned result buffers; `call(byte, *operands)` runs it."""

    def __init__(self, fn, operand_specs, device=None):
        import jax

        self.device = device
        results = jax.eval_shape(fn, *operand_specs)
        self.multiple = isinstance(results, (tuple, list))
        self.specs = list(results) if self.multiple else [results]
        program = jax.jit(lambda poisons, *args: fn(*args), donate_argnums=0, keep_unused=True)
        self.compiled = program.lower(self.specs, *operand_specs).compile()
        self.plain = plain_entry(self.compiled.as_text())

    def call(self, byte: int, *operands) -> tuple[list, bool]:
        """(the results as a list, whether the poisoned buffers were the kernel's own result buffers)."""
        poisons = [filled(s.shape, s.dtype, byte, self.device) for s in self.specs]
        pointers = [p.unsafe_buffer_pointer() for p in poisons]
        out = self.compiled(poisons, *operands)
        out = list(out) if self.multiple else [out]
        same = [o.unsafe_buffer_pointer() for o in out] == pointers
        return out, same and self.plain

    def twice(self, *operands) -> tuple[list, list, dict]:
        """Both patterns: (first results, second results, {"unwritten": [per result], "reached": bool}).

        The results stay device arrays (a later call may take them as operands).
        """
        first, reached_first = self.call(PATTERNS[0], *operands)
        second, reached_second = self.call(PATTERNS[1], *operands)
        counts = [unwritten(a, b, s.dtype) for a, b, s in zip(first, second, self.specs)]
        return first, second, {"unwritten": counts, "reached": reached_first and reached_second}
