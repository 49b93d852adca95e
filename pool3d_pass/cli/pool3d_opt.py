"""pool3d-opt: read textual MLIR, run the pool3d pass (and optional upstream passes), print it.

    pool3d-opt model.mlir -o rewritten.mlir --stats --remarks
    pool3d-opt - < model.mlir
    pool3d-opt cases.mlir --split-input-file
    pool3d-opt m.mlir --pass-pipeline=canonicalize,pool3d-max-pool-backward,cse

Bad input never produces a traceback or a partial output file: the error is
one line, `file:line:col: error: message` where the place is known, and the
exit status is 1. `-o` replaces a regular file atomically (temporary file, then
rename); a device or FIFO such as /dev/null is written into, never replaced.
Without jax/jaxlib (what the pass is built on) the error is one line too, so
this module imports nothing of them before `main` has checked; `--version`
works without them.
"""

from __future__ import annotations

import argparse
import functools
import importlib.metadata
import importlib.util
import os
import re
import stat
import sys
import tempfile
from dataclasses import dataclass

from pool3d_pass import jax_compat, safe_parse
from pool3d_pass.options import BOOLEAN, NEUTRAL, SETTING_SPECS, PassOptions, command_flags, targets
from pool3d_pass.report import RewriteReport

SPLIT_MARKER = re.compile(r"^// -----\s*$", re.MULTILINE)
PROG = "pool3d-opt"


class UserError(Exception):
    """A one-line message for the user; no traceback."""


@dataclass
class Chunk:
    text: str
    first_line: int  # 1-based line of the chunk in the input


def version() -> str:
    """What `--version` prints: this package's version, and the JAX it runs on (read without importing it)."""
    jax, jaxlib = jax_compat.installed_version("jax"), jax_compat.installed_version("jaxlib")
    found = f"jax {jax}, jaxlib {jaxlib}" if jax and jaxlib else "jax and jaxlib are not both installed"
    return (f"{PROG} (pool3d_pass {jax_compat.installed_version('pool3d_pass') or 'not installed as a distribution'}); {found}; "
            f"supported {jax_compat.supported_range_text()}")


def missing_dependencies() -> str | None:
    """Why the pass cannot run here (jax, jaxlib or numpy not installed), or None."""
    missing = []
    for name in ("jax", "jaxlib", "numpy"):
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(name)
    if not missing:
        return None
    supported = jax_compat.supported_range_text()
    return (f"{' and '.join(missing)} not installed: pool3d_pass needs jax and jaxlib ({supported}) and numpy; "
            f"install them first, e.g. pip install 'jax{supported}'")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    from pool3d_pass.cli.pipeline import DEFAULT_PIPELINE

    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("input", nargs="?", default="-", help="input file, or - for stdin (default)")
    parser.add_argument("-o", dest="output", default="-", help="output file, or - for stdout (default)")
    parser.add_argument("--split-input-file", action="store_true", help="process each `// -----` chunk on its own")
    parser.add_argument("--stats", action="store_true", help="print how many gradients were found/rewritten/missed")
    parser.add_argument("--remarks", action="store_true", help="print a remark per gradient: rewritten, or why not")
    parser.add_argument(
        "--pass-pipeline",
        default=DEFAULT_PIPELINE,
        help=f"comma-separated passes; upstream names (canonicalize, cse, ...) and {DEFAULT_PIPELINE}",
    )
    parser.add_argument(
        "--target",
        default=NEUTRAL,
        choices=targets(),
        help="neutral: the platform-neutral call (default); a platform: splice its binding in",
    )
    for name, spec in SETTING_SPECS.items():  # every setting of PassOptions, as the JAX entries take them
        flag, variable = "--" + name.replace("_", "-"), spec["variable"]
        default = f"${variable}, else {_word(spec['default'])}" if variable else _word(spec["default"])
        if spec["words"] is BOOLEAN:
            parser.add_argument(flag, dest=name, action=argparse.BooleanOptionalAction, default=None,
                                help=f"{spec['help']} (default: {default})")
        else:
            parser.add_argument(flag, dest=name, default=None, choices=list(spec["words"]),
                                help=f"{spec['help']} (default: {default})")
    parser.add_argument("--print-debuginfo", action="store_true", help="print op locations")
    parser.add_argument("--version", action="version", version=version(),
                        help="print pool3d_pass's version and the JAX it runs on")
    return parser.parse_args(argv)


def _word(value) -> str:
    return {True: "on", False: "off"}.get(value, value) if isinstance(value, bool) else str(value)


def read_input(path: str) -> tuple[str, str]:
    """(text, name used in messages)."""
    if path == "-":
        return sys.stdin.read(), "<stdin>"
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read(), path
    except (OSError, UnicodeDecodeError) as error:
        raise UserError(f"{PROG}: error: cannot read '{path}': {getattr(error, 'strerror', None) or error}") from None


def split_chunks(text: str, split: bool) -> list[Chunk]:
    if not split:
        return [Chunk(text, 1)]
    chunks, start, line = [], 0, 1
    for marker in SPLIT_MARKER.finditer(text):
        chunks.append(Chunk(text[start : marker.start()], line))
        line += text.count("\n", start, marker.end())
        start = marker.end()
    chunks.append(Chunk(text[start:], line))
    return chunks


MAX_MESSAGE = 1_000  # characters of a diagnostic kept in the one error line
_PLACE = re.compile(r".+:\d+:\d+")


def _one_line(message: str) -> str:
    """A diagnostic on one line (MLIR may append an op's dump), cut to MAX_MESSAGE characters."""
    text = " ".join(part.strip() for part in message.splitlines() if part.strip()) or "failed"
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 3] + "..."


def _diagnostic_line(error, name: str) -> str:
    """file:line:col: error: message, from an MLIRError's first diagnostic.

    The place is the op's location: a file:line:col in the input, or in the
    program's source where the input carries one (as mlir-opt reports it). A
    location with no file in it (a name, unknown) gives `name: error: ...`.
    """
    from pool3d_pass.ir.locations import format_location

    diagnostics = getattr(error, "error_diagnostics", None) or []
    if not diagnostics:
        message = str(error).strip().splitlines()
        return f"{name}: error: {_one_line(message[-1] if message else 'failed')}"
    first = diagnostics[0]
    place = format_location(first.location, name)
    if not _PLACE.fullmatch(place) or "\n" in place:
        place = name
    return f"{place}: error: {_one_line(first.message)}"


def process_chunk(chunk: Chunk, options: PassOptions, args: argparse.Namespace, report: RewriteReport) -> str:
    from jaxlib.mlir import ir

    from pool3d_pass.ir.context import make_context

    name = options.filename
    # Leading newlines keep the parser's line numbers equal to the input file's.
    source = "\n" * (chunk.first_line - 1) + chunk.text
    with make_context():
        try:
            module = safe_parse.parse_module(source, source_name=name)  # locations name the input, as mlir-opt's
        except safe_parse.InputLimitError as error:
            raise UserError(f"{name}:{error.line}:{error.column}: error: {error.message}") from None
        except ir.MLIRError as error:
            raise UserError(_diagnostic_line(error, name)) from None
        except safe_parse.ParseFailure as error:
            raise UserError(f"{name}: error: {_one_line(str(error))}") from None
        try:
            from pool3d_pass.cli.pipeline import build_pass_manager

            pm = build_pass_manager(args.pass_pipeline, options=options, on_report=report.merge)
        except ImportError as error:
            raise UserError(f"{PROG}: error: {error}") from None
        except ValueError as error:
            raise UserError(f"{PROG}: error: bad --pass-pipeline: {_one_line(str(error).splitlines()[0])}") from None
        try:
            pm.run(module.operation)
        except ir.MLIRError as error:
            raise UserError(_diagnostic_line(error, name)) from None
        except Exception as error:  # noqa: BLE001 - a binding that fails to lower, or a bug: one line, no traceback
            first_line = _one_line((str(error).strip().splitlines() or [""])[0])
            raise UserError(
                f"{name}: error: the pass failed ({type(error).__name__}: {first_line}); "
                f"reproduce with: {PROG} {name} {command_flags(options)}"
            ) from None
        return module.operation.get_asm(enable_debug_info=args.print_debuginfo)


def write_output(path: str, text: str) -> None:
    if path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        existing = os.stat(path)  # follows symlinks
    except OSError:
        existing = None
    try:
        if existing is not None and not stat.S_ISREG(existing.st_mode):
            # /dev/null, /dev/stdout, a FIFO: write into it. Renaming a file
            # over it would replace the device node itself.
            with open(path, "w", encoding="utf-8") as stream:
                stream.write(text)
            return
        # Replace a symlink's target, not the link.
        target = os.path.realpath(path) if existing is not None else path
        handle, temporary = tempfile.mkstemp(prefix=".pool3d-opt-", dir=os.path.dirname(os.path.abspath(target)))
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        # mkstemp makes 0600; keep an existing file's mode, else the umask default.
        if existing is not None:
            mode = stat.S_IMODE(existing.st_mode)
        else:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except OSError as error:
        if "temporary" in locals() and os.path.exists(temporary):
            os.unlink(temporary)
        raise UserError(f"{PROG}: error: cannot write '{path}': {error.strerror or error}") from None


def run(args: argparse.Namespace) -> int:
    text, name = read_input(args.input)
    try:
        options = PassOptions(target=args.target, filename=name,
                              **{setting: getattr(args, setting) for setting in SETTING_SPECS})
    except (TypeError, ValueError) as error:  # a setting's environment variable (a flag is checked by argparse)
        raise UserError(f"{PROG}: error: {error}") from None
    report = RewriteReport()
    outputs, failed = [], False
    for chunk in split_chunks(text, args.split_input_file):
        try:
            # Parse, pass and print recurse per nesting level: on a large stack.
            outputs.append(safe_parse.run_with_large_stack(functools.partial(process_chunk, chunk, options, args, report)))
        except UserError as error:
            if not args.split_input_file:
                raise
            print(error, file=sys.stderr)
            failed = True
    if args.remarks:
        for line in report.remarks():
            print(line, file=sys.stderr)
    if args.stats:
        print("\n".join(report.lines()), file=sys.stderr)
    if options.target == "neuron":
        from pool3d_pass.bindings.neuron import artifact_remark

        remark = artifact_remark("".join(outputs))
        if remark is not None:  # always: it says where the output is valid
            print(f"{PROG}: remark: {remark}", file=sys.stderr)
    if failed and args.output != "-":
        return 1  # no partial output file
    write_output(args.output, "// -----\n".join(outputs))
    return 1 if failed else 0


def _quiet_xla_info_logs() -> None:
    """Keep XLA's C++ INFO lines (a PJRT client made while a binding is lowered) off stderr.

    stderr carries only our error line, remarks and stats. TF_CPP_MIN_LOG_LEVEL,
    if set, is the user's choice and is left alone.
    """
    if "TF_CPP_MIN_LOG_LEVEL" in os.environ:
        return
    try:
        from jaxlib import utils

        utils.absl_set_min_log_level(1)  # WARNING and above
    except (ImportError, AttributeError):  # pragma: no cover - a jaxlib without it
        pass


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--version" in argv:  # before anything that needs JAX
        print(version())
        return 0
    missing = missing_dependencies()
    if missing is not None:
        print(f"{PROG}: error: {missing}", file=sys.stderr)
        return 1
    _quiet_xla_info_logs()
    # Input may nest up to safe_parse.MAX_NESTING levels, and the pass walks
    # some of it (a location's frames) recursively in Python, on the worker
    # thread's large stack: Python's default limit of 1,000 frames is too low.
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 20 * safe_parse.MAX_NESTING))
    try:
        return run(parse_args(argv))
    except UserError as error:
        print(error, file=sys.stderr)
        return 1
    except ImportError as error:  # a piece of jaxlib the pass needs (an unsupported jaxlib): one line
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 1


if __name__ == "__main__":
    sys.exit(main())
