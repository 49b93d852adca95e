"""Seeded fuzzing of `pool3d-opt`: every input gives output or one error line, never a crash.

A fixed draw (cases/hostile_mlir.py, seed `SEED`) of ~300 inputs built from the lit
tests, the fixtures and generated max-pool gradients: syntactic mutations,
semantic mutations of the select and scatter regions and of the attributes
and element types, and crash-class inputs (nesting at and past the limit,
long literals, wide integers, alias bombs).

For each input, `pool3d-opt INPUT -o OUTPUT` (OUTPUT already holding a file):
exit 0 with an output file that parses again, or exit 1 with exactly one
`error:` line and OUTPUT unchanged; no traceback, nothing on stdout, no
temporary file left. The syntactic and semantic inputs run in this process
through `main(argv)` (same code path as the script; parse and pass run on
the CLI's worker thread); the crash-class inputs run in subprocesses, the
only place a signal can be seen.

For every input the pass rewrote (its output holds a pool3d call; `--stats`
must say so too) whose program is runnable exactly (generated gradients and the
simple fixtures), the rewritten program's results on tie-heavy inputs equal the
spec's results for the input program (tests/support/spec_oracle.py), bit for
bit (integer-valued data: every sum is exact in every element type). Those
checks run in one test, `test_rewritten_inputs_match_the_spec`, which counts
them where they run and asserts a floor of `MIN_NUMERICS_CHECKS` inputs.

The runs and the judgement are checks/fuzz_cli.py's, whose >= 500-input
subprocess run is `python -m checks.fuzz_cli`.
"""

from __future__ import annotations

import random

import ml_dtypes
import numpy as np
import pytest

from cases import hostile_mlir as hostile
from checks import fuzz_cli as cf
from oracles.xla_runner import main_signature, run_stablehlo

from spec_oracle import spec_outputs

SEED = 20261130
CASES = hostile.draw_cases(SEED, syntactic=140, semantic=150, crash=0)
CRASH_CASES = [
    case for case in hostile.crash_class_cases(random.Random(SEED), 40)
    if any(key in case.name for key in (
        "nest_module_over", "nest_module_at_limit", "nest_case_over", "nest_case_at_limit", "nest_tuple_over",
        "nest_callsite_over", "nest_array_at_limit", "nest_alias_chain_over", "int_literal", "wide_int",
        "alias_bomb"))
]
# A binding spliced in (--target=cpu) lowers through JAX, which makes a PJRT
# client: its C++ INFO lines must not reach stderr (only a subprocess sees fd 2).
CRASH_CASES.append(hostile.Case("subprocess/target_cpu_stderr", hostile.gradient_seeds()["k3s2p1_f32_pad"],
                           ("--target=cpu", "--stats")))
# Valid input at the nesting limit that the pass walks (a location's frames): rewritten, not an error.
CRASH_CASES.append(hostile.Case("subprocess/name_location_at_limit", hostile.name_location_gradient(990), ("--stats",)))
FAMILIES = ("smallint", "signed_zeros", "constant")
# Inputs of the draw whose rewrite check_numerics compares with the spec (42 with this seed).
MIN_NUMERICS_CHECKS = 40


pytestmark = [pytest.mark.usefixtures("cpu_kernels"), pytest.mark.slow]


def tie_heavy_args(text: str, family: str, seed: int) -> list[np.ndarray]:
    """Integer-valued inputs full of ties (and signed zeros) for `main`'s parameters."""
    rng = np.random.default_rng(seed)
    args = []
    for shape, dtype in main_signature(text):
        if family == "smallint":
            values = rng.integers(-2, 3, size=shape).astype(np.float64)
        elif family == "signed_zeros":
            values = rng.choice([-0.0, 0.0, -1.0, 1.0], size=shape)
        else:
            values = np.full(shape, 1.0)
        args.append(values.astype(dtype))
    return args


def _as_float64(array: np.ndarray) -> np.ndarray:
    if array.dtype == np.dtype(ml_dtypes.bfloat16):
        return array.astype(np.float32).astype(np.float64)
    return array.astype(np.float64)


class NumericsChecks:
    """Counts the inputs check_numerics compared with the spec, and the results it compared."""

    def __init__(self):
        self.inputs = self.results = 0


def check_numerics(case: hostile.Case, rewritten: str, checks: NumericsChecks) -> None:
    for family in FAMILIES:
        args = tie_heavy_args(case.text, family, seed=sum(map(ord, case.name + family)))
        expected = spec_outputs(case.text, args)
        got = run_stablehlo(rewritten, args)
        assert len(got) == len(expected), case.name
        for i, (a, b) in enumerate(zip(expected, got)):
            assert a.shape == b.shape and a.dtype == b.dtype, (case.name, i, a.shape, b.shape, a.dtype, b.dtype)
            mismatch = ~np.isclose(_as_float64(a), _as_float64(b), rtol=0, atol=0, equal_nan=True)
            assert not mismatch.any(), (
                f"{case.name} ({family}) result {i}: {int(mismatch.sum())} of {a.size} elements differ "
                f"from the spec, first at {np.argwhere(mismatch)[0].tolist()}")
            checks.results += 1
    checks.inputs += 1


def rewritten(case: hostile.Case, outcome: cf.Outcome) -> bool:
    """Whether the pass rewrote an input that holds no pool3d call: its output holds one."""
    assert "pool3d." not in case.text
    calls = cf.pool3d_calls(outcome.output)
    if "--stats" in case.args:  # the summary line agrees (a format change fails here, loudly)
        assert (cf.rewritten_count(outcome.stderr) > 0) == (calls > 0), (calls, outcome.stderr)
    return calls > 0


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_cli_in_process(case, tmp_path):
    outcome = cf.run_in_process(case, tmp_path)
    assert cf.problems(case, outcome, str(tmp_path / "input.mlir")) == []
    if outcome.status != 0:
        return
    assert cf.reparses(outcome.output) is None
    if "pool3d." not in case.text and "--target=cpu" not in case.args:
        rewritten(case, outcome)


def test_rewritten_inputs_match_the_spec(tmp_path):
    """Every runnable input the CLI rewrote, against the spec: at least MIN_NUMERICS_CHECKS of them."""
    checks = NumericsChecks()
    runnable = [case for case in CASES if case.numerics]
    for n, case in enumerate(runnable):
        outcome = cf.run_in_process(case, tmp_path / str(n))
        if outcome.status == 0 and rewritten(case, outcome):
            check_numerics(case, outcome.output, checks)
    assert checks.inputs >= MIN_NUMERICS_CHECKS, f"{checks.inputs} of {len(runnable)} runnable inputs checked"
    assert checks.results >= len(FAMILIES) * checks.inputs


@pytest.mark.parametrize("case", CRASH_CASES, ids=[c.name for c in CRASH_CASES])
def test_cli_subprocess_crash_class(case, tmp_path):
    outcome = cf.run_subprocess(case, tmp_path, timeout=60)
    assert cf.problems(case, outcome, str(tmp_path / "input.mlir")) == []
    if case.name.endswith(("_over", "_int_literal", "_float_literal", "_wide_int", "_alias_bomb")):
        assert outcome.status == 1, outcome.stderr  # past a limit: the limit's error, not a crash
    if case.name.endswith(("_at_limit", "target_cpu_stderr")):
        assert outcome.status == 0, outcome.stderr  # within the limits: output


def test_the_draw_covers_every_kind_of_mutation():
    """Guard: the seeded draw exercises every mutation, rewrites some inputs and checks their numerics."""
    names = " ".join(c.name for c in CASES)
    for mutate in hostile.SYNTACTIC + hostile.SEMANTIC:
        assert mutate.__name__ in names, mutate.__name__
    assert sum(c.numerics for c in CASES) >= 100
    assert len(CASES) + len(CRASH_CASES) >= 300
