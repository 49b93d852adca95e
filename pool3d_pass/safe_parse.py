"""Parse untrusted MLIR text without letting it crash the process or run away.

MLIR's parser, verifier and printer recurse once per level of nesting, on the
C++ stack: a module nested 10,000 deep (112 KB of text), `tuple<...>`, array
attributes or `callsite(...)` locations nested 100,000 deep end in SIGSEGV.
Its integer literals cost time superlinear in their length (20,000 digits:
about 20 s). Aliases (`#a1 = [#a0, #a0]`) make a DAG whose printed form doubles
with each alias, and a decimal list of `i16777215` elements allocates 2 MB per
two bytes of text. So `check_text` rejects, before MLIR sees the text:

* nesting deeper than `MAX_NESTING` (1,000) levels of `()`, `[]`, `{}` and
  `<>` together, counted outside string literals and comments, through aliases
  too (an alias used at depth d adds its own depth to d);
* a run of more than `MAX_DIGITS` (100) decimal digits outside string literals
  and comments (a literal, a dimension, a hex literal's decimal digits);
* an integer type wider than `MAX_INT_WIDTH` (1,024) bits (`i`, `si`, `ui`);
* aliases whose uses would make the text longer than `MAX_ALIAS_EXPANSION`
  (64 MiB) or `ALIAS_EXPANSION_RATIO` (32) times its length, whichever is
  larger, if every alias use were replaced by its definition (recursively):
  `#a1 = [#a0, #a0]`, `#a2 = [#a1, #a1]`, ... doubles with each alias, and
  the printer and the pass's location walk would expand it.

and `run_with_large_stack` runs the parse (and, in pool3d-opt, the pass and
the printer) on a thread with a `WORKER_STACK_BYTES` (256 MiB, reserved, not
committed) stack: at the measured 1-5 KB of C++ stack per nesting level,
anything under the nesting limit needs at most a few MB.

What the limits leave (measured on 2 busy cores, see tests/test_safe_parse.py):
real programs nest at most ~15 deep and use literals of at most ~20 digits;
an input at every limit at once (1,000 levels of each construct, 100-digit
literals) parses in well under a second; time is then linear in the input's
length, at no more than about 2 microseconds per byte.

Violations raise `InputLimitError` (a `ValueError`) with the 1-based line and
column (in UTF-8 bytes, as MLIR counts) where the limit is crossed.
"""

from __future__ import annotations

import re
import threading
import traceback
from collections.abc import Callable
from typing import TypeVar

MAX_NESTING = 1_000
MAX_DIGITS = 100
MAX_INT_WIDTH = 1_024
MAX_ALIAS_EXPANSION = 64 * 2**20
ALIAS_EXPANSION_RATIO = 32
WORKER_STACK_BYTES = 256 * 2**20

_T = TypeVar("_T")

_OPEN = {"(": ")", "[": "]", "{": "}", "<": ">"}
_CLOSE_TO_OPEN = {")": "(", "]": "[", "}": "{"}

# One token of interest per match; everything between matches is skipped.
_TOKEN = re.compile(
    r"""
      (?P<string>"(?:[^"\\\n]|\\[^\n])*"?)       # string literal (MLIR ends an unterminated one at the newline)
    | (?P<comment>//[^\n]*)
    | (?P<arrow>->)
    | (?P<cmp>[<>]=)
    | (?P<bracket>[\[\]{}()<>])
    | (?P<newline>\n)
    | (?P<alias>[\#!][A-Za-z_][A-Za-z0-9_$.]*)    # alias definition or use, or a dialect name
    | (?P<ssa>[%^@][A-Za-z0-9_$.\-]*)              # value, block and symbol names
    | (?P<digits>[0-9]+)
    | (?P<word>[A-Za-z_][A-Za-z0-9_$.]*)           # keywords, types, `x`-separated dimension lists
    """,
    re.VERBOSE,
)
_DIGIT_RUN = re.compile(r"[0-9]{%d,}" % (MAX_DIGITS + 1))
_INT_TYPE = re.compile(r"(?:^|x)[su]?i([0-9]+)(?=x|$)")
_DEFINITION = re.compile(r"[ \t]*=")


class InputLimitError(ValueError):
    """The text exceeds one of this module's limits; `line`, `column` are 1-based."""

    def __init__(self, line: int, column: int, message: str):
        super().__init__(f"{line}:{column}: {message}")
        self.line = line
        self.column = column
        self.message = message


class _Alias:
    __slots__ = ("name", "start", "end", "base", "max_depth", "refs", "depth", "size", "state")

    def __init__(self, name: str, start: int, base: int):
        self.name = name
        self.start = start
        self.end = start
        self.base = base
        self.max_depth = 0
        self.refs: list[tuple[str, int, int]] = []  # (name, local depth, offset)
        self.depth = 0
        self.size = 0
        self.state = 0  # 0 new, 1 in progress, 2 done


def _position(text: str, offset: int) -> tuple[int, int]:
    line_start = text.rfind("\n", 0, offset) + 1
    return text.count("\n", 0, offset) + 1, len(text[line_start:offset].encode("utf-8")) + 1


def _error(text: str, offset: int, message: str) -> InputLimitError:
    line, column = _position(text, offset)
    return InputLimitError(line, column, message)


def check_text(text: str) -> None:
    """Raise InputLimitError if `text` exceeds a limit; otherwise return None. Linear time."""
    stack: list[str] = []
    aliases: dict[str, _Alias] = {}
    uses: list[tuple[str, int, int]] = []  # alias uses outside definitions: (name, depth, offset)
    current: _Alias | None = None
    line_start = 0
    for match in _TOKEN.finditer(text):
        kind = match.lastgroup
        if kind == "bracket":
            char = match.group()
            if char in _OPEN:
                stack.append(char)
                if len(stack) > MAX_NESTING:
                    raise _error(text, match.start(), f"nesting deeper than {MAX_NESTING} levels")
                if current is not None:
                    current.max_depth = max(current.max_depth, len(stack) - current.base)
            elif char == ">":
                if stack and stack[-1] == "<":
                    stack.pop()
            else:
                opener = _CLOSE_TO_OPEN[char]
                if opener in stack:  # drop any unclosed '<' (a comparison inside a dialect body)
                    while stack.pop() != opener:
                        pass
        elif kind == "cmp":
            if match.group() == ">=" and stack and stack[-1] == "<":
                stack.pop()
        elif kind == "newline":
            line_start = match.end()
            if current is not None and len(stack) <= current.base:
                current.end = match.start()
                current = None
        elif kind == "digits" or kind == "word":
            token = match.group()
            run = _DIGIT_RUN.search(token)
            if run is not None:
                raise _error(text, match.start() + run.start(),
                             f"a number with more than {MAX_DIGITS} digits")
            if kind == "word":
                for width in _INT_TYPE.finditer(token):
                    if len(width.group(1)) > 5 or int(width.group(1)) > MAX_INT_WIDTH:
                        offset = match.start() + width.start() + width.group().startswith("x")
                        raise _error(text, offset, f"an integer type wider than {MAX_INT_WIDTH} bits")
        elif kind == "alias":
            token = match.group()
            start = match.start()
            if not text[line_start:start].strip() and _DEFINITION.match(text, match.end()):
                if current is not None:
                    current.end = start
                current = _Alias(token, start, len(stack))
                aliases.setdefault(token, current)
            elif current is not None:
                current.refs.append((token, len(stack) - current.base, start))
            else:
                uses.append((token, len(stack), start))
    if current is not None:
        current.end = len(text)
    if aliases:
        _check_aliases(text, aliases, uses)


def _check_aliases(text: str, aliases: dict[str, _Alias], uses: list[tuple[str, int, int]]) -> None:
    limit = max(MAX_ALIAS_EXPANSION, ALIAS_EXPANSION_RATIO * len(text))
    cap = limit + 1
    for root in aliases.values():
        # Depth and expanded size of every alias, depth-first without recursion.
        if root.state:
            continue
        work = [root]
        while work:
            alias = work[-1]
            if alias.state == 0:
                alias.state = 1
                work.extend(aliases[name] for name, _, _ in alias.refs
                            if name in aliases and aliases[name].state == 0)
                continue
            work.pop()
            if alias.state == 2:
                continue
            alias.depth = alias.max_depth
            size = alias.end - alias.start
            for name, depth, offset in alias.refs:
                target = aliases.get(name)
                if target is None or target.state != 2:  # unknown, or a cycle (MLIR rejects it)
                    continue
                if depth + target.depth > MAX_NESTING:
                    raise _error(text, offset, f"nesting deeper than {MAX_NESTING} levels "
                                               f"(through alias {name})")
                alias.depth = max(alias.depth, depth + target.depth)
                size = min(cap, size + target.size)
            alias.size = size
            alias.state = 2
    expansion = len(text)
    for name, depth, offset in uses:
        target = aliases.get(name)
        if target is None:
            continue
        if depth + target.depth > MAX_NESTING:
            raise _error(text, offset, f"nesting deeper than {MAX_NESTING} levels (through alias {name})")
        expansion += target.size
        if expansion > limit:
            raise _error(text, offset, f"aliases would expand the text to more than {limit:,} bytes")


def run_with_large_stack(function: Callable[[], _T]) -> _T:
    """`function()` on a fresh thread with a WORKER_STACK_BYTES stack; its result or its exception."""
    outcome: list = []

    def target() -> None:
        try:
            outcome.append((True, function()))
        except BaseException as error:  # noqa: BLE001 - handed to the caller
            # Drop the frames' locals (an MLIR module among them) here, so
            # that nothing deep is destroyed later on the caller's stack.
            traceback.clear_frames(error.__traceback__)
            outcome.append((False, error))

    with _stack_size_lock:
        try:
            previous = threading.stack_size(WORKER_STACK_BYTES)
        except (ValueError, RuntimeError):  # a platform that cannot: run here
            return function()
        try:
            worker = threading.Thread(target=target, name="pool3d-parse", daemon=True)
            worker.start()
        except RuntimeError:  # cannot reserve the stack: run here, under the same limits
            worker = None
        finally:
            threading.stack_size(previous)
    if worker is None:
        return function()
    worker.join()
    ok, value = outcome[0]
    if ok:
        return value
    raise value.with_traceback(value.__traceback__)


_stack_size_lock = threading.Lock()


def parse_module(text: str, context=None):
    """`ir.Module.parse(text)` after `check_text`, on a large-stack thread.

    `context`: the MLIR context (default: the current one of the calling thread).
    Raises InputLimitError or ir.MLIRError.
    """
    from jaxlib.mlir import ir

    check_text(text)
    if context is None:
        context = ir.Context.current
    return run_with_large_stack(lambda: ir.Module.parse(text, context=context))
