"""pool3d-opt's outputs over every fixture x target x strategy, as digests: run before and after a refactor.

A change that should not alter what the pass emits (a move, a rename, a new
layer) is proven by writing the digests before it and comparing after it:

    python -m checks.opt_outputs --write before.json     # on the old tree
    python -m checks.opt_outputs --compare before.json   # on the new one: exit 1 on any difference

The checkout's own folder is written as `<root>` (remarks name the input
file), so the two runs may be in two checkouts; a moved source file that the
output names is declared with `--renamed OLD=NEW` (paths from the root). The
Pallas kernels' Triton IR is MLIR bytecode that holds the absolute path of
their source, length-prefixed, which no text replacement can even out:
`--mask-bytecode` (on both runs) compares every other byte of those outputs
and leaves the bytecode strings out; use it across checkouts or when a Pallas
source moved, and say so.

Each case runs pool3d-opt in this process (its `main`, the CLI's own path)
with `--remarks --stats`, so the digest covers the printed module, the
remarks and the stats lines. The inputs are tests/fixtures/*.mlir and the lit
tests' inputs (split at `// -----`); the targets are every registered one,
gpu once per kernel choice (CUDA, Pallas, Pallas in interpret mode).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STRATEGIES = ("auto", "recompute", "indices")
BYTECODE = re.compile(r'"ML\\EFR[^"]*"')  # an MLIR bytecode string attribute, as printed


def _inputs() -> list[tuple[Path, list[str]]]:
    fixtures = [(path, []) for path in sorted((ROOT / "tests" / "fixtures").glob("*.mlir"))]
    lit = [(path, ["--split-input-file"]) for path in sorted((ROOT / "lit_tests").glob("*.mlir"))]
    return fixtures + lit


def _targets() -> list[tuple[str, list[str]]]:
    from pool3d_pass.rewriting import targets

    choices = []
    for target in targets():
        if target == "gpu":
            choices += [("gpu-cuda", ["--target=gpu", "--gpu-kernels=cuda"]),
                        ("gpu-pallas", ["--target=gpu", "--gpu-kernels=pallas"]),
                        ("gpu-interpret", ["--target=gpu", "--gpu-kernels=pallas", "--gpu-interpret"])]
        else:
            choices.append((target, [f"--target={target}"]))
    return choices


def _run_one(argv: list[str], renamed: list[tuple[str, str]], mask_bytecode: bool) -> str:
    """The CLI's output file, stderr and exit status, as one digest."""
    from pool3d_pass.cli.pool3d_opt import main

    with tempfile.TemporaryDirectory() as folder:
        output = Path(folder) / "out.mlir"
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            status = main(argv + ["-o", str(output)])
        text = output.read_text() if output.exists() else "<no output>"
    digest = hashlib.sha256()
    for part in (text, stderr.getvalue(), str(status)):
        for old, new in renamed:
            part = part.replace(new, old)
        if mask_bytecode:
            part = BYTECODE.sub('"<bytecode>"', part)
        digest.update(part.replace(str(ROOT), "<root>").encode())
        digest.update(b"\0")
    return digest.hexdigest()


def digests(renamed: list[tuple[str, str]] = (), mask_bytecode: bool = False) -> dict[str, str]:
    result = {}
    for path, extra in _inputs():
        for name, target_args in _targets():
            for strategy in STRATEGIES:
                key = f"{path.relative_to(ROOT)} {name} {strategy}"
                result[key] = _run_one([str(path), *extra, *target_args, f"--strategy={strategy}",
                                        "--remarks", "--stats"], list(renamed), mask_bytecode)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m checks.opt_outputs", description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", metavar="FILE", help="write the digests to FILE")
    mode.add_argument("--compare", metavar="FILE", help="compare with the digests in FILE")
    parser.add_argument("--renamed", metavar="OLD=NEW", action="append", default=[],
                        help="a source file the output names moved from OLD to NEW (repeatable)")
    parser.add_argument("--mask-bytecode", action="store_true",
                        help="leave MLIR bytecode strings (the Pallas kernels' Triton IR) out of the digests")
    args = parser.parse_args(argv)
    renamed = []
    for pair in args.renamed:
        old, _, new = pair.partition("=")
        if not old or not new:
            parser.error(f"--renamed takes OLD=NEW, got {pair!r}")
        renamed.append((old, new))
    current = digests(renamed, args.mask_bytecode)
    if args.write:
        Path(args.write).write_text(json.dumps(current, indent=1, sort_keys=True) + "\n")
        print(f"{len(current)} cases written to {args.write}")
        return 0
    before = json.loads(Path(args.compare).read_text())
    changed = sorted(key for key in before.keys() | current.keys() if before.get(key) != current.get(key))
    for key in changed:
        print(f"differs: {key}" if key in before and key in current else f"only in one run: {key}")
    print(f"{len(current)} cases, {len(changed)} differ")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
