"""Parse untrusted MLIR text without letting it crash the process or run away.

MLIR's parser, verifier and printer recurse once per level of nesting, on the
C++ stack: a module nested 10,000 deep (112 KB of text), `tuple<...>`, array
attributes or `callsite(...)` locations nested 100,000 deep end in SIGSEGV
(measured on the 8 MB main stack: 1.3 to 4 KB per level, worst for regions).
Integer literals cost time superlinear in their length (10,000 digits: 3.5 s;
20,000: ~20 s). Aliases (`#a1 = [#a0, #a0]`, ...) build a DAG that the
printer, and the pass's walk over locations, expand: each alias doubles it.
A decimal list of `i16777215` elements allocates 2 MB per two bytes of text.
So `check_text` rejects, before MLIR sees the text:

* nesting deeper than `MAX_NESTING` (1,000) levels of `()`, `[]`, `{}` and
  `<>` together, counted outside string literals and comments (`->`, `<=`
  and `>=` are not brackets), through aliases too (an alias used at depth d
  adds its own depth to d);
* a run of more than `MAX_DIGITS` (100) decimal digits outside string
  literals and comments (any number: integer, float, dimension);
* an integer type wider than `MAX_INT_WIDTH` (128) bits (`iN`, `siN`, `uiN`);
* a `padding = dense<...> : tensor<...>` attribute of more than
  `MAX_PADDING_ELEMENTS` (8,192) elements: StableHLO's verifiers expand it
  element by element even when it is a splat (`dense<0> : tensor<100000000x2xi64>`,
  5 KB of text, took 1.6 GB; 2^40 elements ended in an exception);
* aliases whose uses would make the text longer than `MAX_ALIAS_EXPANSION`
  (16 MiB) or `ALIAS_EXPANSION_RATIO` (16) times its length, whichever is
  larger, if every alias use were replaced by its definition (recursively);

and `run_with_large_stack` runs the parse (and, in pool3d-opt, the pass and
the printer) on a thread with a `WORKER_STACK_BYTES` (256 MiB, reserved, not
committed) stack, 60 times what 1,000 levels need at 4 KB each.

Real programs sit far inside: the lit tests and the fixtures (JAX, Flax,
Equinox, Keras, TensorFlow, torch-xla) nest at most 32 deep (callsite
location chains), use numbers of at most 13 digits and integer types of at
most 64 bits, and their aliases expand them at most 6.1 times.

Measured (pool3d-opt in-process, 2 busy cores, excluding its ~1 s start):
every nesting construct at the limit 0.02-0.10 s; 1M `i128` elements (3 MB)
0.9 s; alias bombs just under the expansion limit 0.5 s (types, attributes)
and 1.2 s (locations, which the pass walks); a 2 MB module of ordinary ops
0.9 s. `check_text` itself costs 0.02-0.2 microseconds per byte on real and
list-heavy text, at most ~0.9 on text that is nothing but brackets or quotes.

Violations raise `InputLimitError` (a `ValueError`) with the 1-based line and
column (in UTF-8 bytes, as MLIR counts) of the first place a limit is
crossed."""

from __future__ import annotations

import bisect
import re
import threading
import traceback
from collections.abc import Callable
from typing import TypeVar

MAX_NESTING = 1_000
MAX_DIGITS = 100
MAX_INT_WIDTH = 128
MAX_PADDING_ELEMENTS = 8192  # a window padding is (rank x 2)
MAX_ALIAS_EXPANSION = 16 * 2**20
ALIAS_EXPANSION_RATIO = 16
WORKER_STACK_BYTES = 256 * 2**20

_T = TypeVar("_T")

_OPEN = {"(": ")", "[": "]", "{": "}", "<": ">"}
_CLOSE_TO_OPEN = {")": "(", "]": "[", "}": "{"}

# The characters that can start a token of interest; everything else is skipped
# by one search (a character set: the regex engine's fast scan).
_NEXT = re.compile(r'["/\-<>\[\]{}()\n#!]')
_STRING = re.compile(r'"(?:[^"\\\n]|\\[^\n])*"?')  # MLIR ends an unterminated string at the newline
_ALIAS = re.compile(r"[#!][A-Za-z_][A-Za-z0-9_$.]*")  # alias definition or use, or a dialect name
# Found in the whole text, then kept only outside strings and comments.
_DIGIT_RUN = re.compile(r"[0-9]{" + str(MAX_DIGITS + 1) + ",}")
_WIDE_INT = re.compile(r"(?<![A-Za-z0-9_$.%^@#!?])(?:[0-9?]*x)*([su]?i)([0-9]{"
                       + str(len(str(MAX_INT_WIDTH))) + r",})(?![A-Za-z0-9_$.])")
_WIDE_HINT = re.compile(r"i[0-9]{" + str(len(str(MAX_INT_WIDTH))) + "}")
_DEFINITION = re.compile(r"[ \t]*=")
# `padding = dense<...> : tensor<NxMx...>`: StableHLO's verifiers expand a padding
# attribute element by element, even a splat (2^27 elements: ~2 GB).
_PADDING_LITERAL = re.compile(r"\bpadding\s*=\s*dense<[^<>]*>\s*:\s*tensor<([0-9?x]*[A-Za-z][A-Za-z0-9]*)>")


class InputLimitError(ValueError):
    """The text exceeds one of this module's limits; `line`, `column` are 1-based (in `source_name`, if known)."""

    def __init__(self, line: int, column: int, message: str, source_name: str | None = None):
        super().__init__(f"{source_name + ':' if source_name else ''}{line}:{column}: {message}")
        self.line = line
        self.column = column
        self.message = message
        self.source_name = source_name


class ParseFailure(ValueError):
    """MLIR's parser raised something other than a diagnostic (e.g. an allocation too large)."""


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
    """Raise InputLimitError if `text` exceeds a limit (the first one in the text); else None. Linear time."""
    stack: list[str] = []
    aliases: dict[str, _Alias] = {}
    uses: list[tuple[str, int, int]] = []  # alias uses outside definitions: (name, depth, offset)
    skipped: list[tuple[int, int]] = []  # strings and comments, in order
    current: _Alias | None = None
    line_start = 0
    first: tuple[int, str] | None = None  # the first violation: (offset, message)
    position = 0
    search = _NEXT.search
    while True:
        match = search(text, position)
        if match is None:
            break
        start = match.start()
        char = text[start]
        position = start + 1
        if char in _OPEN:
            if char == "<" and text.startswith("=", position):  # `<=`
                position += 1
                continue
            stack.append(char)
            if len(stack) > MAX_NESTING:
                first = (start, f"nesting deeper than {MAX_NESTING} levels")
                break
            if current is not None:
                current.max_depth = max(current.max_depth, len(stack) - current.base)
        elif char == ">":  # also the `>` of `>=`
            if stack and stack[-1] == "<":
                stack.pop()
        elif char in _CLOSE_TO_OPEN:
            opener = _CLOSE_TO_OPEN[char]
            if opener in stack:  # drop any unclosed '<' (a comparison inside a dialect body)
                while stack.pop() != opener:
                    pass
        elif char == "\n":
            line_start = position
            if current is not None and len(stack) <= current.base:
                current.end = start
                current = None
        elif char == '"':
            position = _STRING.match(text, start).end()
            skipped.append((start, position))
        elif char == "/":
            if text.startswith("/", position):  # a comment, to the end of the line
                newline = text.find("\n", position)
                position = len(text) if newline < 0 else newline
                skipped.append((start, position))
        elif char == "-":
            if text.startswith(">", position):  # `->`
                position += 1
        else:  # '#' or '!'
            alias = _ALIAS.match(text, start)
            if alias is None:
                continue
            token = alias.group()
            position = alias.end()
            if not text[line_start:start].strip() and _DEFINITION.match(text, position):
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

    # Long numbers and wide integer types: rare, so found in the whole text and
    # kept if outside every string and comment (and before a nesting error).
    starts = [start for start, _ in skipped]
    end_of_scan = first[0] if first else len(text)

    def outside(offset: int) -> bool:
        i = bisect.bisect_right(starts, offset) - 1
        return i < 0 or offset >= skipped[i][1]

    for run in _DIGIT_RUN.finditer(text, 0, end_of_scan):
        if outside(run.start()):
            first = (run.start(), f"a number with more than {MAX_DIGITS} digits")
            end_of_scan = run.start()
            break
    wide_ints = _WIDE_INT.finditer(text, 0, end_of_scan) if _WIDE_HINT.search(text, 0, end_of_scan) else ()
    for wide in wide_ints:
        digits = wide.group(2)
        if (len(digits) > len(str(MAX_INT_WIDTH)) or int(digits) > MAX_INT_WIDTH) and outside(wide.start(1)):
            first = (wide.start(1), f"an integer type wider than {MAX_INT_WIDTH} bits")
            end_of_scan = wide.start(1)
            break
    for padding in _PADDING_LITERAL.finditer(text, 0, end_of_scan):
        elements = 1
        for size in padding.group(1).split("x")[:-1]:
            elements *= int(size) if size.isdigit() else 1
        if elements > MAX_PADDING_ELEMENTS and outside(padding.start()):
            first = (padding.start(), f"a padding attribute of {elements} elements (at most {MAX_PADDING_ELEMENTS})")
            break
    if first is not None:
        raise _error(text, *first)
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


def parse_module(text: str, context=None, source_name: str | None = None):
    """`ir.Module.parse(text)` after `check_text`, on a large-stack thread.

    `context`: the MLIR context (default: the current one of the calling thread).
    `source_name`: the name the locations the parser gives (and its errors)
    carry, as mlir-opt names them after the input file; None: "-" (MLIR's
    default). Returns an `ir.Module`, or with `source_name` possibly the
    parsed `builtin.module` operation itself (the same `.operation`, `.context`
    and `.body`). Raises InputLimitError, ir.MLIRError or ParseFailure.
    """
    from jaxlib.mlir import ir

    try:
        check_text(text)
    except InputLimitError as error:
        if source_name is None:
            raise
        raise InputLimitError(error.line, error.column, error.message, source_name) from None
    if context is None:
        context = ir.Context.current
    parse = (lambda: ir.Module.parse(text, context=context)) if source_name is None else (
        lambda: _parse_named(text, source_name, context))
    try:
        return run_with_large_stack(parse)
    except (ir.MLIRError, InputLimitError):
        raise
    except (ValueError, MemoryError, OverflowError) as error:  # from inside MLIR: no location
        raise ParseFailure(f"MLIR's parser failed: {type(error).__name__}: {error}") from None


_SEVERAL_OPERATIONS = "single top-level operation"  # Operation.parse's complaint about an implicit module


def _parse_named(text: str, source_name: str, context):
    """`text` parsed with its locations named `source_name`.

    `ir.Module.parse` has no name argument, `ir.Operation.parse` has; it
    takes one top-level operation. A `builtin.module` is returned as parsed;
    one other operation is put into a module located at `source_name:0:0`,
    as MLIR's parser does for an implicit module. Several top-level
    operations are parsed as an implicit module and printed with their
    locations, whose parser name is replaced by `source_name`, then parsed
    again: the locations are then exactly those of a named parse.
    """
    from jaxlib.mlir import ir

    try:
        parsed = ir.Operation.parse(text, source_name=source_name, context=context)
    except ir.MLIRError as error:
        if _SEVERAL_OPERATIONS not in str(error):
            raise
        module = ir.Module.parse(text, context=context)
        unnamed, named = (str(ir.Location.file(name, 0, 0, context=context)).split(":")[0]
                          for name in ("-", source_name))
        # The printer escapes every '"' inside a string, so `loc("-":` occurs only as a location.
        printed = module.operation.get_asm(enable_debug_info=True).replace(unnamed + ":", named + ":")
        try:
            return ir.Operation.parse(printed, source_name=source_name, context=context)
        except ir.MLIRError:  # never expected: keep MLIR's own name rather than fail
            return module
    if parsed.operation.name == "builtin.module":
        return parsed
    module = ir.Module.create(loc=ir.Location.file(source_name, 0, 0, context=context))
    module.body.append(parsed.operation)
    return module
