"""The lit tests' "nowhere in the output" claims fail on an output that breaks them.

A CHECK-NOT only sees the text between its neighbouring positive matches (or
its LABEL block's ends): placed before a prefix's first match it checks the
module header alone. For each such claim this runs the real pool3d-opt on the
lit file with that RUN line's options, checks that FileCheck (the `filecheck`
package lit.cfg.py uses) accepts the output as it is, then plants one line
holding the forbidden text right after the header and right before the
`return` of each function the claim covers, and asserts FileCheck rejects
every planted output through one of that prefix's NOT directives.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pool3d_pass.cli.pool3d_opt import main

pytestmark = pytest.mark.slow

LIT = Path(__file__).resolve().parents[2] / "lit_tests"
EVERY_FUNCTION = None


@dataclasses.dataclass(frozen=True)
class Claim:
    file: str
    options: tuple[str, ...]
    prefix: str
    forbidden: tuple[str, ...]  # lines to plant, each holding text a NOT of `prefix` forbids
    functions: tuple[str, ...] | None = EVERY_FUNCTION
    env: tuple[tuple[str, str], ...] = ()

    def id(self) -> str:
        return f"{self.file.removesuffix('.mlir')}-{self.prefix}"


GPU = "pool3d-max-pool-backward-gpu.mlir"
PALLAS = (("POOL3D_GPU_IMPL", "pallas"),)  # as the lit file's RUN lines: its checks are of the Pallas kernels
REFUSED_BY_GPU = ("neutral_call_f64_refused", "neutral_call_window_over_4096_refused")
CLAIMS = [
    # --strategy=recompute: no layer call anywhere
    Claim("pool3d-max-pool-backward-indices.mlir", ("--split-input-file", "--strategy=recompute"), "RECOMPUTE",
          ("stablehlo.custom_call @pool3d.max_pooling_3d_forward(%arg0)",
           "stablehlo.custom_call @pool3d.max_pooling_3d_backward_from_indices(%arg1, %0#1)")),
    # neutral output: no forward-output call anywhere
    Claim("pool3d-max-pool-forward-output.mlir", ("--split-input-file",), "NEUTRAL",
          ("stablehlo.custom_call @pool3d.max_pooling_3d_forward_output(%arg0)",)),
    # gpu, recompute: no forward kernel anywhere
    Claim(GPU, ("--split-input-file", "--target=gpu", "--strategy=recompute"), "RECOMPUTE",
          ('stablehlo.custom_call @__gpu$xla.gpu.triton(%0) {name = "pool3d_gpu_forward"}',
           'stablehlo.custom_call @__gpu$xla.gpu.triton(%0) {name = "pool3d_gpu_forward_output"}'), env=PALLAS),
    # gpu, auto: gradients and refused calls get no Triton call (the neutral call in between is bound)
    Claim(GPU, ("--split-input-file", "--target=gpu"), "AUTO", ("stablehlo.custom_call @__gpu$xla.gpu.triton(%0)",),
          ("training_step_forward_and_gather_kernels", "bare_gradient_indices_then_gather_bf16", *REFUSED_BY_GPU),
          env=PALLAS),
    # gpu, indices: the refused calls stay neutral; the bound neutral call leaves no @pool3d. call
    Claim(GPU, ("--split-input-file", "--target=gpu", "--strategy=indices"), "CHECK",
          ("stablehlo.custom_call @__gpu$xla.gpu.triton(%0)",), REFUSED_BY_GPU, env=PALLAS),
    Claim(GPU, ("--split-input-file", "--target=gpu", "--strategy=indices"), "CHECK",
          ("stablehlo.custom_call @pool3d.max_pooling_3d_backward(%arg0)",), ("neutral_call_bound_to_gpu",),
          env=PALLAS),
    # gpu interpret mode: no Triton call and no select_and_scatter anywhere
    Claim(GPU, ("--split-input-file", "--target=gpu", "--strategy=indices"), "INTERPRET",
          ("stablehlo.custom_call @__gpu$xla.gpu.triton(%0)", '%9 = "stablehlo.select_and_scatter"(%0, %1, %2)'),
          env=(("POOL3D_GPU_INTERPRET", "1"),)),
]


def pool3d_opt(claim: Claim, tmp_path: Path) -> str:
    out = tmp_path / "out.mlir"
    args = [str(LIT / claim.file), *claim.options, "-o", str(out)]
    if claim.env:  # switches the pass reads once per process: a process of its own
        command = [sys.executable, "-m", "pool3d_pass.cli.pool3d_opt", *args]
        result = subprocess.run(command, env={**os.environ, **dict(claim.env)}, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr
    else:
        assert main(args) == 0
    return out.read_text()


def filecheck(claim: Claim, text: str, tmp_path: Path) -> subprocess.CompletedProcess:
    path = tmp_path / "input.mlir"
    path.write_text(text)
    return subprocess.run(
        [sys.executable, "-m", "filecheck", str(LIT / claim.file), "--check-prefix", claim.prefix, "--input-file", str(path)],
        capture_output=True, text=True, timeout=120,
    )


def plant_sites(lines: list[str], functions) -> list[tuple[str, int]]:
    """(function, line index to insert at): after each named function's header and before its
    return; for a claim on the whole output, the first function's start, the middle one's
    end and the last one's end (the first place a NOT before the first match misses)."""
    sites = []
    for i, line in enumerate(lines):
        m = re.match(r"\s*func\.func (?:\w+ )?@([\w$.]+)\(", line)
        if not m or (functions is not EVERY_FUNCTION and m.group(1) not in functions):
            continue
        end = next(j for j in range(i + 1, len(lines)) if re.match(r"\s*(func\.)?return\b", lines[j]))
        sites += [(m.group(1), i + 1), (m.group(1), end)]
    if functions is EVERY_FUNCTION:
        middle = len(sites) // 4 * 2 + 1
        sites = [sites[0], sites[middle], sites[-1]]
    return sites


def not_directives(claim: Claim) -> set[int]:
    """Line numbers of the claim's prefix's NOT directives in the lit file."""
    lines = (LIT / claim.file).read_text().splitlines()
    return {n for n, line in enumerate(lines, 1) if re.match(rf"\s*//\s*{re.escape(claim.prefix)}-NOT:", line)}


@pytest.mark.parametrize("claim", CLAIMS, ids=Claim.id)
def test_a_planted_forbidden_line_fails_filecheck(claim, tmp_path):
    text = pool3d_opt(claim, tmp_path)
    as_is = filecheck(claim, text, tmp_path)
    assert as_is.returncode == 0, as_is.stderr
    lines = text.splitlines()
    sites = plant_sites(lines, claim.functions)
    covered = {name for name, _ in sites}
    assert covered == set(claim.functions) if claim.functions else len(covered) == min(3, len(sites)), covered
    nots = not_directives(claim)
    error = re.compile(rf"{re.escape(claim.file)}:(\d+): error: {re.escape(claim.prefix)}-NOT: excluded string found")
    for forbidden in claim.forbidden:
        for name, at in sites:
            planted = lines[:at] + [f"    {forbidden}"] + lines[at:]
            result = filecheck(claim, "\n".join(planted) + "\n", tmp_path)
            where = f"{forbidden!r} planted in @{name} at output line {at + 1}"
            assert result.returncode != 0, f"{where}: FileCheck passed"
            m = error.search(result.stderr)
            assert m and int(m.group(1)) in nots, f"{where}: not rejected by a {claim.prefix}-NOT:\n{result.stderr}"
