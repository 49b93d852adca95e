"""The CUDA kernels' sm_90a machine code (SASS) without a GPU: each kernel's main loop by issue pipe.

Why: what bounds a memory-bound kernel's speed can be read from its machine
code before any device run: local memory (spills or stack arrays), run-time
integer division, scalar global accesses where a vector path was meant, and
the instructions each loop iteration issues on each pipe (checks/gpu_model.py
turns those into predicted times; tests/bindings/gpu/test_cuda_sass.py fails on
the first three).

How: `build()` compiles each CUDA source of the library
(`cuda_build.SOURCES`, with its include folders) for sm_90a alone into a
cubin; `dump()` runs `cuobjdump --dump-sass` on it (cuobjdump and the
nvdisasm it runs are found like nvcc: `cuda_build.find_tool`; the CUDA 13
wheels `nvidia-cuda-cuobjdump` and `nvidia-cuda-nvdisasm` put them in a
venv); `parse()` splits the listing into functions (names demangled with
binutils' c++filt), instructions and basic blocks. A kernel's main loop is
its grid-stride loop: the address range from the outermost backward branch's
target to that branch (no loop: the whole body). Its cost per iteration is
the heaviest or the lightest path through that range, or every block of it
(a warp whose lanes take every side of every branch), inner loops counted
once per trip (the caller gives the trips), a call with its subroutine's
instructions, and divided by the copies where nvcc unrolled the loop.

`python -m checks.sass [--cubin FILE] [--kernel REGEX]` prints each kernel's
main loop by pipe, its global access widths, local memory and divisions.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile

from pool3d_pass.bindings.gpu.cuda import build as cuda_build

ARCH = "sm_90a"

# Issue pipes of Hopper (sm_90) by SASS opcode (the part before the first dot).
# Rates per SM and clock are in the CUDA C++ Programming Guide's "Arithmetic
# Instructions" table (compute capability 9.0): 32-bit integer add, compare,
# min/max, shift, logic: 64 lanes (ALU); 32-bit integer multiply-add: 64 lanes
# and 32-bit float add/multiply/fma 128 (FMA: counted at the IMAD rate, see
# checks/gpu_model.py); type conversions, reciprocal/transcendentals,
# population count, leading-zero count, bit reverse: 16 lanes (XU).
# Assumptions, not from that table: VIADD (an integer add that ptxas places
# to balance the pipes) on FMA like IMAD.IADD; I2FP and F2FP (sm_86+
# conversions) on the ALU; MOV on the ALU; the packed 16-bit compares and
# maxima (HSET2 writing a mask, HSETP2 a predicate, HMNMX2) on the ALU with
# the f32 ones (FSETP, FMNMX), the packed adds and multiplies (HADD2,
# HFMA2) on the FMA pipe with the f32 ones.
PIPES: dict[str, tuple[str, ...]] = {
    "alu": ("IADD3", "IADD", "IADD32I", "LOP3", "LOP", "LOP32I", "SHF", "SHL", "SHR", "SEL", "ISETP", "PRMT",
            "LEA", "IABS", "IMNMX", "VIMNMX", "VIADDMNMX", "FMNMX", "FSETP", "FSEL", "FCHK", "BMSK", "SGXT",
            "PLOP3", "P2R", "R2P", "MOV", "CS2R", "ISCADD", "HSETP2", "HSET2", "HMNMX2", "I2FP", "F2FP", "VABSDIFF",
            "VABSDIFF4", "FSWZADD", "BFE", "BFI"),
    "fma": ("FFMA", "FADD", "FMUL", "FFMA32I", "FADD32I", "FMUL32I", "IMAD", "IMUL", "VIADD", "HFMA2", "HADD2",
            "HMUL2", "IDP", "IDP4A", "DFMA", "DADD", "DMUL"),
    "xu": ("MUFU", "I2F", "F2I", "F2F", "I2I", "FRND", "POPC", "FLO", "BREV"),
    "memory": ("LDG", "STG", "LD", "ST", "LDS", "STS", "LDL", "STL", "LDC", "ATOM", "ATOMG", "ATOMS", "RED",
               "REDG", "LDSM", "LDGSTS", "LDGDEPBAR", "SHFL", "MATCH", "MEMBAR", "CCTL", "FENCE", "ERRBAR"),
    "control": ("BRA", "BRX", "JMP", "JMX", "EXIT", "BSYNC", "BSSY", "WARPSYNC", "NOP", "YIELD", "CALL", "RET",
                "BREAK", "BPT", "KILL", "NANOSLEEP", "BMOV"),
    # every other opcode starting with U runs on the uniform datapath (one value per warp)
    "uniform": ("R2UR", "S2UR", "VOTEU"),
}
PIPE_OF = {opcode: pipe for pipe, opcodes in PIPES.items() for opcode in opcodes}
PIPE_NAMES = (*PIPES, "other")

_FUNCTION = re.compile(r"^\s*Function : (\S+)")
_REGISTER = re.compile(r"(?<![\w.])R(\d+)((?:\.[A-Za-z0-9]+)*)")
# opcodes whose first operand is read, not written
_NO_DESTINATION = frozenset(("STG", "ST", "STS", "STL", "RED", "REDG", "BRA", "BRX", "JMP", "JMX", "EXIT", "RET",
                             "CALL", "BSSY", "BSYNC", "WARPSYNC", "BREAK", "NOP", "YIELD", "MEMBAR", "ERRBAR",
                             "CCTL", "FENCE"))


def _split_operands(text: str) -> list[str]:
    """Operands at the top level (commas inside [...] kept)."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        depth += {"[": 1, "]": -1}.get(c, 0)
        if c == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    if text.strip():
        parts.append(text[start:].strip())
    return parts


def _registers(operand: str) -> tuple[int, ...]:
    """General registers named in one operand ("R4", "-R3", "[R2.64+0x10]": a .64 pair is two)."""
    regs: list[int] = []
    for m in _REGISTER.finditer(operand):
        r = int(m.group(1))
        regs += [r, r + 1] if ".64" in m.group(2) else [r]
    return tuple(regs)


def _width(modifiers: tuple[str, ...]) -> int:
    """Registers a load or store moves, from its size modifier."""
    return 4 if "128" in modifiers else 2 if "64" in modifiers else 1
_ARCH = re.compile(r"^\s*code for (sm_\w+)")
_INSTRUCTION = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_.]*)\s*([^;]*);")
_ADDRESS = re.compile(r"0x([0-9a-f]+)\b")


def pipe(opcode: str) -> str:
    """The issue pipe of a SASS opcode (modifiers allowed: "IMAD.WIDE.U32" is fma)."""
    base = opcode.split(".", 1)[0]
    if base in PIPE_OF:
        return PIPE_OF[base]
    return "uniform" if base.startswith("U") else "other"


@dataclasses.dataclass(frozen=True)
class Instruction:
    address: int
    predicate: str  # "" or e.g. "@!P0"
    opcode: str  # with modifiers, e.g. "LDG.E.128.CONSTANT"
    operands: str
    # the source lines it comes from, innermost first (its inline chain), where the cubin has line info
    where: tuple[tuple[str, int], ...] = ()
    tags: frozenset = frozenset()  # the model tags of those lines (source_tags)

    @property
    def base(self) -> str:
        return self.opcode.split(".", 1)[0]

    @property
    def modifiers(self) -> tuple[str, ...]:
        return tuple(self.opcode.split(".")[1:])

    @property
    def pipe(self) -> str:
        return pipe(self.opcode)

    @property
    def target(self) -> int | None:
        """The address a branch or call goes to (None for anything else)."""
        if self.base not in ("BRA", "CALL", "JMP"):
            return None
        m = _ADDRESS.search(self.operands)
        return int(m.group(1), 16) if m else None

    @property
    def ends_block(self) -> bool:
        return self.base in ("BRA", "BRX", "JMP", "JMX", "EXIT", "RET", "BREAK", "KILL")

    @property
    def unconditional(self) -> bool:
        return self.predicate in ("", "@PT")

    @property
    def loads_global(self) -> bool:
        """A load from global memory (or a generic load, or a local one: each waits for memory)."""
        return self.base in ("LDG", "LD", "LDL")

    @property
    def destinations(self) -> tuple[int, ...]:
        """The general registers this instruction writes (a load's whole vector; other wide results: the first)."""
        if self.base in _NO_DESTINATION:
            return ()
        first = _split_operands(self.operands)[:1]
        regs = _registers(first[0]) if first else ()
        if regs and self.loads_global:
            width = max(1, (self.global_bits or 32) // 32) if self.base == "LDG" else _width(self.modifiers)
            return tuple(range(regs[0], regs[0] + width))
        return regs

    @property
    def sources(self) -> tuple[int, ...]:
        """The general registers this instruction reads (a store's whole data vector)."""
        parts = _split_operands(self.operands)
        if self.base not in _NO_DESTINATION and parts and _registers(parts[0]):
            parts = parts[1:]
        regs: list[int] = []
        for k, part in enumerate(parts):
            found = list(_registers(part))
            if self.base in ("STG", "ST", "STS", "STL") and k == len(parts) - 1 and found:
                found = list(range(found[0], found[0] + _width(self.modifiers)))
            regs += found
        return tuple(regs)

    @property
    def global_bits(self) -> int | None:
        """Width of a global load or store in bits (None for other instructions); plain = 32 or less."""
        if self.base not in ("LDG", "STG"):
            return None
        for bits in ("128", "64"):
            if bits in self.modifiers:
                return int(bits)
        return 32


@dataclasses.dataclass(frozen=True)
class PathCost:
    """One main-loop iteration along one path: instructions by pipe (and "total"), the global-load round
    trips a thread waits for, and the global loads it issues (warp instructions) and their bytes per thread."""

    pipes: dict[str, float]
    rounds: float
    loads: float
    load_bytes: float


@dataclasses.dataclass
class Function:
    """One function of the listing; `name` demangled."""

    name: str
    mangled: str
    instructions: list[Instruction]
    registers: int | None = None  # per thread, from ptxas' report where the build gave one

    @functools.cached_property
    def tag_set(self) -> frozenset:
        """Every model tag an instruction of this function carries."""
        return frozenset().union(*(ins.tags for ins in self.instructions))

    @functools.cached_property
    def index(self) -> dict[int, int]:
        return {ins.address: i for i, ins in enumerate(self.instructions)}

    # --- structure ------------------------------------------------------------

    @functools.cached_property
    def subroutines(self) -> list[tuple[int, int]]:
        """(first, last) instruction positions of each called subroutine (from its address to its RET)."""
        out = []
        for target in sorted({ins.target for ins in self.instructions if ins.base == "CALL"} - {None}):
            start = self.index.get(target)
            if start is None:
                continue
            end = next((i for i in range(start, len(self.instructions)) if self.instructions[i].base == "RET"),
                       len(self.instructions) - 1)
            out.append((start, end))
        return out

    @functools.cached_property
    def body_end(self) -> int:
        """One past the kernel body's last instruction: subroutines and the trailing trap loop excluded."""
        end = min((s for s, _ in self.subroutines), default=len(self.instructions))
        while end > 0 and (self.instructions[end - 1].base == "NOP" or self._self_loop(end - 1)):
            end -= 1
        return end

    def _self_loop(self, i: int) -> bool:
        ins = self.instructions[i]
        return ins.base == "BRA" and ins.target == ins.address

    @functools.cached_property
    def loops(self) -> list[tuple[int, int]]:
        """(head, last backward branch) instruction positions of every loop in the body (self-loops excluded;
        several backward branches to one head, as `continue` makes, are one loop)."""
        last: dict[int, int] = {}
        for i in range(self.body_end):
            ins = self.instructions[i]
            if ins.base == "BRA" and ins.target is not None and ins.target < ins.address:
                head = self.index.get(ins.target)
                if head is not None:
                    last[head] = i
        return sorted(last.items())

    @functools.cached_property
    def main_loop(self) -> tuple[int, int] | None:
        """The grid-stride loop: the widest outermost backward-branch range (None: no loop)."""
        if not self.loops:
            return None
        return max(self.loops, key=lambda loop: (loop[1] - loop[0], -loop[0]))

    @functools.cached_property
    def unroll(self) -> int:
        """Units per main-loop iteration: nvcc may unroll a grid-stride loop (a loop of u copies plus a
        one-copy remainder loop beside it); u is read from their global stores, else 1."""
        if self.main_loop is None:
            return 1
        top = [lp for lp in self.loops
               if not any(o != lp and o[0] <= lp[0] and lp[1] <= o[1] for o in self.loops)]
        others = [lp for lp in top if lp != self.main_loop]

        def stores(lp):
            return sum(1 for ins in self.instructions[lp[0]:lp[1] + 1] if ins.base == "STG")

        main = stores(self.main_loop)
        counts = [stores(lp) for lp in others if stores(lp)]
        if not counts or main % min(counts) or main // min(counts) < 2:
            return 1
        return main // min(counts)

    def main_range(self) -> tuple[int, int]:
        """Instruction positions [first, last] of the main loop, else of the whole body."""
        return self.main_loop or (0, self.body_end - 1)

    def inner_loops(self) -> list[tuple[int, int]]:
        """Loops strictly inside the main loop, outermost first (by start, then widest)."""
        first, last = self.main_range()
        inner = [lp for lp in self.loops if lp != self.main_loop and first <= lp[0] and lp[1] <= last]
        return sorted(inner, key=lambda lp: (lp[0], -lp[1]))

    def loop_depths(self) -> list[tuple[tuple[int, int], int]]:
        """Each inner loop with its nesting depth below the main loop (1 = directly inside it)."""
        loops = self.inner_loops()
        return [(lp, 1 + sum(1 for o in loops if o != lp and o[0] <= lp[0] and lp[1] <= o[1])) for lp in loops]

    # --- detectors ------------------------------------------------------------

    def local_memory(self) -> list[Instruction]:
        """Loads and stores to local memory (spills, stack arrays) anywhere in the function."""
        return [ins for ins in self.instructions if ins.base in ("LDL", "STL")]

    def divisions(self, first: int | None = None, last: int | None = None) -> list[Instruction]:
        """The run-time integer division idiom in [first, last] (default: the main loop).

        A 32-bit division or modulo by a run-time value compiles to I2F.RP (or
        I2F.U32.RP), MUFU.RCP and F2I.FTZ.U32.TRUNC plus integer fix-ups: each
        I2F with .RP counts once. A 64-bit one is a CALL to a subroutine holding
        that idiom (I2F.U64.RP, MUFU.RCP.64H): each such CALL counts once.
        """
        if first is None or last is None:
            first, last = self.main_range()
        found = []
        for i in range(first, last + 1):
            ins = self.instructions[i]
            if ins.base == "I2F" and "RP" in ins.modifiers:
                found.append(ins)
            elif ins.base == "CALL" and self._divides(ins.target):
                found.append(ins)
        return found

    def _divides(self, target: int | None) -> bool:
        for start, end in self.subroutines:
            if self.instructions[start].address == target:
                body = self.instructions[start:end + 1]
                return (any(i.base == "MUFU" and "RCP" in i.modifiers or i.base == "MUFU" and "RCP64H" in i.modifiers
                            for i in body) and any(i.base == "I2F" and "RP" in i.modifiers for i in body))
        return False

    def global_widths(self, first: int | None = None, last: int | None = None) -> collections.Counter:
        """Global loads and stores by (LDG/STG, bits) in [first, last] (default: the whole function)."""
        first = 0 if first is None else first
        last = len(self.instructions) - 1 if last is None else last
        return collections.Counter((ins.base, ins.global_bits) for ins in self.instructions[first:last + 1]
                                   if ins.global_bits is not None)

    # --- cost -----------------------------------------------------------------

    def iteration_cost(self, trips: dict[int, float] | None = None, path: str = "heaviest") -> dict[str, float]:
        """Instructions one main-loop iteration issues, by pipe (and "total").

        `path`: "heaviest" (most instructions) or "lightest" path from the loop
        head to its backward branch, forward edges only; "every" block of the
        loop (a warp whose lanes take every side of every branch). An inner loop
        at depth d is one node whose weight is every instruction of its range
        (nested loops inside it by their own trips) times `trips[d]` (default 1):
        its trip count per iteration of the loop around it. A CALL adds its
        subroutine's instructions.
        """
        if path not in ("heaviest", "lightest", "every"):
            raise ValueError(f"path: one of heaviest, lightest, every, not {path!r}")
        return self._path(trips or {}, path, None)[0]

    def path_cost(self, allowed: frozenset | set = frozenset(), trips: dict[int, float] | None = None) -> PathCost:
        """What one main-loop iteration issues and waits for along the path a unit of tags `allowed` takes.

        An instruction counts where its model tags (`Instruction.tags`, from the
        source's `// model: TAG` comments) are all in `allowed`; untagged code
        counts on every path, but an inner loop holding an instruction that does
        not count is left out whole (its counters carry no line of the path). The path is the heaviest one through what counts
        (so guarded stores, taken by the common data, are on it; a tagged body
        another kind of unit runs weighs nothing). Inner loops count `trips` as
        in iteration_cost. Rounds: the global-load round trips along that path
        (`load_rounds`).
        """
        allowed = frozenset(allowed)
        pipes, ranges = self._path(trips or {}, "heaviest", allowed)
        rounds, loads, nbytes = self._load_rounds(ranges, trips or {}, allowed)
        return PathCost(pipes, rounds, loads, nbytes)

    def counts(self, i: int, allowed: frozenset | None) -> bool:
        return allowed is None or self.instructions[i].tags <= allowed

    def _path(self, trips: dict[int, float], path: str, allowed: frozenset | None):
        """(cost by pipe, the (first, last) instruction ranges of the chosen nodes in order)."""
        first, last = self.main_range()
        depths = self.loop_depths()
        top = [lp for lp, d in depths if d == 1]

        def weight(lo: int, hi: int, depth: int) -> collections.Counter:
            w: collections.Counter = collections.Counter()
            if depth > 0 and not all(self.counts(k, allowed) for k in range(lo, hi + 1)):
                return w  # a loop of a path not taken (its untagged counters with it)
            i = lo
            while i <= hi:
                nested = next((lp for lp, d in depths if d == depth + 1 and lp[0] == i and lp[1] <= hi
                               and not (lo == lp[0] and hi == lp[1])), None)
                if nested is not None:
                    inner = weight(nested[0], nested[1], depth + 1)
                    for k, v in inner.items():
                        w[k] += v * trips.get(depth + 1, 1)
                    i = nested[1] + 1
                    continue
                if self.counts(i, allowed):
                    w.update(self._instruction_cost(i))
                i += 1
            return w

        # nodes in address order: single instructions grouped into blocks, inner loops collapsed
        nodes: list[tuple[int, int, collections.Counter]] = []
        i = first
        leaders = self._leaders(first, last)
        while i <= last:
            loop = next((lp for lp in top if lp[0] == i), None)
            if loop is not None:
                inner = weight(loop[0], loop[1], 1)
                nodes.append((loop[0], loop[1], collections.Counter({k: v * trips.get(1, 1)
                                                                     for k, v in inner.items()})))
                i = loop[1] + 1
                continue
            j = i
            while j < last and not self.instructions[j].ends_block and (j + 1) not in leaders \
                    and not any(lp[0] == j + 1 for lp in top):
                j += 1
            w: collections.Counter = collections.Counter()
            for k in range(i, j + 1):
                if self.counts(k, allowed):
                    w.update(self._instruction_cost(k))
            nodes.append((i, j, w))
            i = j + 1

        node_of = {}
        for n, (lo, hi, _) in enumerate(nodes):
            for k in range(lo, hi + 1):
                node_of[k] = n
        if path == "every":
            total: collections.Counter = collections.Counter()
            for _, _, w in nodes:
                total.update(w)
            return {p: float(total.get(p, 0)) for p in (*PIPE_NAMES, "total")}, [(lo, hi) for lo, hi, _ in nodes]
        better = (lambda a, b: a > b) if path == "heaviest" else (lambda a, b: a < b)
        best: list[collections.Counter | None] = [None] * len(nodes)
        prev: list[int | None] = [None] * len(nodes)
        best[0] = nodes[0][2]
        for n, (_lo, hi, _w) in enumerate(nodes):
            if best[n] is None:
                continue
            for succ in self._successors(hi, node_of, n, nodes):
                candidate = best[n] + nodes[succ][2]
                if best[succ] is None or better(candidate["total"], best[succ]["total"]):
                    best[succ], prev[succ] = candidate, n
        end = len(nodes) - 1 if best[-1] is not None else max(
            (n for n, b in enumerate(best) if b is not None), key=lambda n: best[n]["total"])
        chosen, n = [], end
        while n is not None:
            chosen.append((nodes[n][0], nodes[n][1]))
            n = prev[n]
        return {p: float(best[end].get(p, 0)) for p in (*PIPE_NAMES, "total")}, chosen[::-1]

    def _load_rounds(self, ranges: list[tuple[int, int]], trips: dict[int, float],
                     allowed: frozenset | None) -> tuple[float, float, float]:
        """(round trips, global loads, bytes loaded) along `ranges` of instruction positions.

        A round trip is an instruction that reads (or overwrites) a register a
        global load still in flight writes: the thread waits for that load, and
        with it for every load in flight (issued a few clocks apart, they come
        back together). Loads issued together and consumed later share one
        round trip. An inner loop counts its own round trips once per trip
        (`trips` by depth).
        """
        depths = self.loop_depths()
        pending: set[int] = set()  # registers a load in flight writes

        def walk(lo: int, hi: int, depth: int) -> tuple[float, float, float]:
            rounds = loads = nbytes = 0.0
            if depth > 0 and not all(self.counts(k, allowed) for k in range(lo, hi + 1)):
                return rounds, loads, nbytes
            i = lo
            while i <= hi:
                nested = next((lp for lp, d in depths if d == depth + 1 and lp[0] == i and lp[1] <= hi
                               and not (lo == lp[0] and hi == lp[1])), None)
                if nested is not None:
                    r, n, b = walk(nested[0], nested[1], depth + 1)
                    t = trips.get(depth + 1, 1)
                    rounds, loads, nbytes = rounds + r * t, loads + n * t, nbytes + b * t
                    i = nested[1] + 1
                    continue
                if self.counts(i, allowed):
                    ins = self.instructions[i]
                    if any(r in pending for r in (*ins.sources, *ins.destinations)):
                        rounds += 1
                        pending.clear()
                    if ins.loads_global:
                        loads += 1
                        nbytes += (ins.global_bits or 32) / 8
                        pending.update(ins.destinations)
                i += 1
            return rounds, loads, nbytes

        totals = [0.0, 0.0, 0.0]
        top = {lp for lp, d in depths if d == 1}
        for lo, hi in ranges:
            loop = (lo, hi) in top
            r, n, b = walk(lo, hi, 1 if loop else 0)
            if loop:  # an inner loop's node: its body walked once, counted once per trip
                r, n, b = (v * trips.get(1, 1) for v in (r, n, b))
            totals = [a + v for a, v in zip(totals, (r, n, b))]
        return tuple(totals)

    def _instruction_cost(self, i: int) -> collections.Counter:
        ins = self.instructions[i]
        c = collections.Counter({ins.pipe: 1, "total": 1})
        if ins.base == "CALL":
            for start, end in self.subroutines:
                if self.instructions[start].address == ins.target:
                    for sub in self.instructions[start:end + 1]:
                        c.update({sub.pipe: 1, "total": 1})
        return c

    def _leaders(self, first: int, last: int) -> set[int]:
        leaders = {first}
        for i in range(first, last + 1):
            ins = self.instructions[i]
            if ins.base in ("BRA", "JMP") and ins.target in self.index:
                leaders.add(self.index[ins.target])
            if ins.ends_block:
                leaders.add(i + 1)
        return leaders

    def _successors(self, hi: int, node_of: dict[int, int], n: int, nodes) -> list[int]:
        """Forward successors of node n (its last instruction at hi) inside the range: its branches' targets
        (an inner loop's exits included) and the next node where it falls through."""
        ins = self.instructions[hi]
        out = []
        for k in range(nodes[n][0], hi + 1):
            branch = self.instructions[k]
            if branch.base in ("BRA", "JMP") and branch.target in self.index:
                t = self.index[branch.target]
                if t in node_of and node_of[t] > n and node_of[t] not in out:
                    out.append(node_of[t])
        falls_through = not (ins.base in ("BRA", "JMP", "EXIT", "RET", "KILL") and ins.unconditional)
        # a loop node ends on its own backward branch, which falls through when the inner loop ends
        if nodes[n][0] != nodes[n][1] and self.instructions[nodes[n][1]].target is not None \
                and self.instructions[nodes[n][1]].target <= self.instructions[nodes[n][0]].address:
            falls_through = True
        if falls_through and n + 1 < len(nodes):
            out.append(n + 1)
        return out


# --- reading a listing ------------------------------------------------------------


def demangle(names: list[str]) -> list[str]:
    """Itanium C++ names demangled by binutils' c++filt (CUDA's device names are Itanium names); as given without it."""
    tool = shutil.which("c++filt")
    if tool is None or not names:
        return list(names)
    done = subprocess.run([tool], input="\n".join(names) + "\n", capture_output=True, text=True, check=False)
    out = done.stdout.splitlines()
    return out if done.returncode == 0 and len(out) == len(names) else list(names)


def parse(text: str, arch: str = ARCH, lines: dict | None = None, tags: dict | None = None,
          registers: dict | None = None) -> list[Function]:
    """The functions of a `cuobjdump --dump-sass` listing compiled for `arch` (other sections skipped).

    `lines` ({mangled name: {address: inline chain}}, `line_map`) gives each
    instruction its source lines, `tags` ({(file, line): tags}, `source_tags`)
    its model tags, `registers` ({mangled name: registers}, `ptxas_registers`)
    each function its registers per thread.
    """
    functions: list[tuple[str, list[Instruction]]] = []
    current_arch = None
    current: list[Instruction] | None = None
    chains: dict = {}
    for line in text.splitlines():
        if m := _ARCH.match(line):
            current_arch, current = m.group(1), None
            continue
        if m := _FUNCTION.match(line):
            current = None
            if current_arch in (None, arch):
                current = []
                functions.append((m.group(1), current))
                chains = (lines or {}).get(m.group(1), {})
            continue
        if current is not None and (m := _INSTRUCTION.match(line)):
            address = int(m.group(1), 16)
            where = chains.get(address, ())
            found = frozenset().union(*(tags.get(place, ()) for place in where)) if tags and where else frozenset()
            current.append(Instruction(address, (m.group(2) or "").strip(), m.group(3), m.group(4).strip(),
                                       where, found))
    names = demangle([name for name, _ in functions])
    return [Function(name, mangled, ins, (registers or {}).get(mangled))
            for name, (mangled, ins) in zip(names, functions)]


# --- source lines, model tags and registers ---------------------------------------

_SECTION = re.compile(r"^\.text\.(\S+):\s*$")
_LOCATION = re.compile(r'^\s*//## File "([^"]+)", line (\d+)')
_NVDISASM_INSTRUCTION = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/")
# `// model: TAG[, TAG]` on a source line: every instruction inlined through that line carries the tags
TAG_COMMENT = re.compile(r"//\s*model:\s*([\w-]+(?:\s*,\s*[\w-]+)*)")
_ENTRY = re.compile(r"Compiling entry function '(\w+)' for '(sm_\w+)'")
_USED = re.compile(r"Used (\d+) registers")


def line_map(text: str) -> dict[str, dict[int, tuple[tuple[str, int], ...]]]:
    """{mangled name: {address: inline chain}} from `nvdisasm -gi` output: each instruction's source lines,
    innermost first (a line of an inlined function, then the line it was inlined at, and so on)."""
    out: dict[str, dict[int, tuple]] = {}
    current: dict | None = None
    chain: list = []
    fresh = False
    for line in text.splitlines():
        if m := _SECTION.match(line):
            current, chain, fresh = out.setdefault(m.group(1), {}), [], False
            continue
        if current is None:
            continue
        if m := _LOCATION.match(line):
            if not fresh:
                chain, fresh = [], True
            chain.append((os.path.realpath(m.group(1)), int(m.group(2))))
            continue
        if m := _NVDISASM_INSTRUCTION.match(line):
            fresh = False
            current[int(m.group(1), 16)] = tuple(chain)
    return out


def source_tags(files: list[str] | None = None) -> dict[tuple[str, int], frozenset]:
    """{(file, line): tags} of every `// model: TAG` comment in the CUDA library's sources and headers."""
    found = {}
    for path in files if files is not None else cuda_build.depends():
        try:
            with open(path, encoding="utf-8") as f:
                for number, text in enumerate(f, 1):
                    if m := TAG_COMMENT.search(text):
                        found[(os.path.realpath(path), number)] = frozenset(t.strip() for t in m.group(1).split(","))
        except OSError:
            continue
    return found


def ptxas_registers(report: str, arch: str = ARCH) -> dict[str, int]:
    """{mangled name: registers per thread} of the entry functions compiled for `arch` in a ptxas -v report."""
    out, current = {}, None
    for line in report.splitlines():
        if m := _ENTRY.search(line):
            current = m.group(1) if m.group(2) == arch else None
        elif current and (m := _USED.search(line)):
            out[current], current = int(m.group(1)), None
    return out


# --- building and dumping ------------------------------------------------------------


class Unavailable(RuntimeError):
    """A tool the SASS needs is missing; the message says which and where it was looked for."""


def tools() -> tuple[str, str, str]:
    """(nvcc, cuobjdump, nvdisasm), or Unavailable naming what is missing."""
    found = {name: cuda_build.find_tool(name, name.upper()) for name in ("nvcc", "cuobjdump", "nvdisasm")}
    missing = [name for name, path in found.items() if path is None]
    if missing:
        raise Unavailable(
            f"no {', '.join(missing)} found ($NVCC/$CUOBJDUMP/$NVDISASM, PATH, $CUDA_HOME/bin, the "
            "nvidia-cuda-nvcc/-cuobjdump/-nvdisasm wheels: pip install 'nvidia-cuda-cuobjdump>=13,<14' "
            "'nvidia-cuda-nvdisasm>=13,<14')")
    return found["nvcc"], found["cuobjdump"], found["nvdisasm"]


def sources() -> list[str]:
    """The CUDA sources of the library (kernels live only in .cu files)."""
    return [s for s in cuda_build.SOURCES if s.endswith(".cu")]


def gencode() -> str:
    """The library's sm_90a SASS target (cuda_build.GENCODE holds it with the others)."""
    return next(g for g in cuda_build.GENCODE if f"code={ARCH}" in g)


def command(nvcc: str, ffi_include_dir: str, source: str, output: str) -> list[str]:
    """nvcc compiling one source to an sm_90a cubin, as the library is compiled (flags, includes)."""
    cmd = [nvcc, "-std=c++17", "-O3", "-cubin", gencode(), "-Xptxas", "-v", "-lineinfo"]
    for folder in cuda_build.INCLUDE_DIRS:
        cmd += ["-I", folder]
    return [*cmd, "-isystem", ffi_include_dir, source, "-o", output]


def ffi_include_dir() -> str:
    import jax  # only here: parsing needs no JAX

    return jax.ffi.include_dir()


def build(folder: str, ffi_include: str | None = None) -> tuple[list[str], str]:
    """Each CUDA source compiled to `folder`/NAME.sm_90a.cubin: (cubins, ptxas' report). Raises Unavailable, or
    RuntimeError with nvcc's output when it fails."""
    nvcc, _, _ = tools()
    ffi_include = ffi_include or ffi_include_dir()
    os.makedirs(folder, exist_ok=True)
    cubins, log = [], ""
    for source in sources():
        out = os.path.join(folder, os.path.splitext(os.path.basename(source))[0] + f".{ARCH}.cubin")
        done = subprocess.run(command(nvcc, ffi_include, source, out), capture_output=True, text=True, check=False)
        log += done.stdout + done.stderr
        if done.returncode != 0:
            raise RuntimeError(f"{nvcc} failed on {source} (exit {done.returncode}):\n{done.stdout}{done.stderr}")
        cubins.append(out)
    return cubins, log


def dump(cubin: str) -> str:
    """`cuobjdump --dump-sass` of a cubin (or object, or library), its sm_90a code only; nvdisasm found for it."""
    _, cuobjdump, nvdisasm = tools()
    env = dict(os.environ, NVDISASM_PATH=os.path.dirname(nvdisasm))
    env["PATH"] = os.path.dirname(nvdisasm) + os.pathsep + env.get("PATH", "")
    done = subprocess.run([cuobjdump, "--dump-sass", "-arch", ARCH, cubin], capture_output=True, text=True,
                          check=False, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{cuobjdump} --dump-sass {cubin} failed (exit {done.returncode}):\n{done.stderr}")
    return done.stdout


def fresh_library() -> str | None:
    """The package's built CUDA library where it is newer than every file it is built from (its sm_90a SASS
    is then the sources' own), else None."""
    from pool3d_pass.bindings.gpu.cuda import library as cuda_library

    path = cuda_library.library_path()
    if not os.path.isfile(path):
        return None
    newest = max((os.path.getmtime(f) for f in cuda_build.depends() if os.path.exists(f)), default=0.0)
    return path if os.path.getmtime(path) >= newest else None


def cubins_of(path: str, folder: str) -> list[str]:
    """The sm_90a cubins of a library or object (extracted into `folder`), or [path] for a cubin."""
    if path.endswith(".cubin"):
        return [path]
    _, cuobjdump, _ = tools()
    done = subprocess.run([cuobjdump, "-xelf", "all", os.path.abspath(path)], capture_output=True, text=True,
                          check=False, cwd=folder)
    if done.returncode != 0:
        raise RuntimeError(f"{cuobjdump} -xelf all {path} failed (exit {done.returncode}):\n{done.stderr}")
    return sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(f".{ARCH}.cubin"))


def lines_of(cubin: str) -> dict:
    """line_map of a cubin's `nvdisasm -gi` listing (empty where it holds no line info)."""
    _, _, nvdisasm = tools()
    done = subprocess.run([nvdisasm, "-gi", "-c", cubin], capture_output=True, text=True, check=False)
    return line_map(done.stdout) if done.returncode == 0 else {}


def kernels(folder: str | None = None, cubins: list[str] | None = None, report: str | None = None) -> list[Function]:
    """Every kernel's SASS: built into `folder` (a temporary one if None) unless `cubins` (cubins, or libraries
    with their ptxas report beside them, build.report_path) are given; with source lines, model tags and
    registers where the cubins and the report hold them."""
    if cubins is None:
        if folder is None:
            with tempfile.TemporaryDirectory(prefix="pool3d-sass-") as tmp:
                return kernels(folder=tmp)
        built, log = build(folder)
        return kernels(cubins=built, report=log)
    if report is None:
        texts = []
        for c in cubins:
            try:
                with open(cuda_build.report_path(c), encoding="utf-8") as f:
                    texts.append(f.read())
            except OSError:
                continue
        report = "\n".join(texts)
    tags, registers = source_tags(), ptxas_registers(report)
    out = []
    with tempfile.TemporaryDirectory(prefix="pool3d-elf-") as tmp:
        for given in cubins:
            lines = {}
            for cubin in cubins_of(given, tmp):
                lines.update(lines_of(cubin))
            out += parse(dump(given), lines=lines, tags=tags, registers=registers)
    return out


# --- the command line ------------------------------------------------------------


def describe(fn: Function) -> str:
    first, last = fn.main_range()
    cost = fn.iteration_cost()
    widths = fn.global_widths()
    pipes = " ".join(f"{p} {cost[p]:.0f}" for p in PIPE_NAMES if cost[p])
    loop = "main loop" if fn.main_loop else "no loop: body"
    inner = len(fn.inner_loops())
    lines = [
        fn.name,
        f"  {loop} {fn.instructions[first].address:#06x}-{fn.instructions[last].address:#06x} "
        f"({fn.unroll} unit(s) an iteration), {inner} inner loop(s); one iteration (inner loops once): "
        f"{cost['total']:.0f} instructions: {pipes}",
        "  global accesses: " + (", ".join(f"{op}.{bits} x{n}" for (op, bits), n in sorted(widths.items())) or "none"),
        f"  local memory: {len(fn.local_memory())} LDL/STL; divisions in the main loop: {len(fn.divisions())}",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cubin", action="append", help="read this cubin/object/library instead of building")
    parser.add_argument("--kernel", default="", help="only kernels whose demangled name matches this regex")
    args = parser.parse_args(argv)
    try:
        pattern = re.compile(args.kernel)
    except re.error as error:
        parser.error(f"--kernel: not a regular expression: {error}")
    try:
        functions = kernels(cubins=args.cubin)
    except (Unavailable, RuntimeError) as error:
        print(f"checks.sass: {error}", file=sys.stderr)
        return 1
    for fn in functions:
        if pattern.search(fn.name):
            print(describe(fn))
    return 0


if __name__ == "__main__":
    sys.exit(main())
