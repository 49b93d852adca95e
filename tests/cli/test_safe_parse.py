"""Input limits for untrusted MLIR text (pool3d_pass/safe_parse.py): what is rejected, where, and what is not."""

from __future__ import annotations

import re
import threading

import pytest

from cases import hostile_mlir as hostile
from pool3d_pass import rewrite_text, safe_parse
from pool3d_pass.safe_parse import InputLimitError, check_text

from corpus import ROOT

LIMIT = safe_parse.MAX_NESTING
REAL = sorted(ROOT.glob("tests/fixtures/*.mlir")) + sorted(ROOT.glob("lit_tests/**/*.mlir")) + sorted(
    ROOT.glob("examples/*.mlir"))


def rejected(text: str) -> InputLimitError:
    with pytest.raises(InputLimitError) as info:
        check_text(text)
    return info.value


def test_real_programs_pass_with_a_wide_margin(monkeypatch):
    """README ("Hostile input"): the lit tests, fixtures and examples nest at most 32 deep, use at
    most 13 digits and 64-bit integers, and aliases expand them less than 8x."""
    assert len(REAL) > 50
    monkeypatch.setattr(safe_parse, "MAX_NESTING", 32)
    monkeypatch.setattr(safe_parse, "ALIAS_EXPANSION_RATIO", 8)
    monkeypatch.setattr(safe_parse, "MAX_ALIAS_EXPANSION", 0)  # only the ratio applies
    for path in REAL:
        text = path.read_text()
        check_text(text)
        assert max(map(len, re.findall(r"[0-9]+", text)), default=0) <= 13, path.name
        assert max(map(int, re.findall(r"(?<![\w$.%#@])[su]?i([0-9]+)\b", text)), default=0) <= 64, path.name


@pytest.mark.parametrize("kind", hostile.NESTING_KINDS)
def test_nesting_at_the_limit_passes_and_one_more_is_rejected_where_it_is_crossed(kind):
    per_level = 2 if kind == "case" else 1  # "stablehlo.case"(%i) ({
    check_text(hostile.nested(kind, (LIMIT - 4) // per_level))
    error = rejected(hostile.nested(kind, LIMIT // per_level + 2))
    assert "nesting deeper than 1000 levels" in error.message
    if kind == "module":  # "module {" is 8 characters: the 1001st '{' is at column 8 * 1001
        assert (error.line, error.column) == (1, 8 * (LIMIT + 1))
    if kind == "alias_chain":
        assert "through alias #a" in error.message


def test_brackets_in_strings_and_comments_and_arrows_do_not_count():
    deep = "(" * (LIMIT - 1)
    check_text(deep + '"' + "(" * 5000 + '"' + ")" * (LIMIT - 1))
    check_text(deep + '"\\"' + "[" * 5000 + '"')  # an escaped quote does not end the string
    check_text(deep + "// " + "{" * 5000 + "\n")
    check_text(deep + "->" * 5000 + "<=" * 5000 + ">=" * 5000 + "> " * 5000)
    error = rejected(deep + '"\\\\"' + "[" * 5)  # after an escaped backslash the string ends
    assert (error.line, error.column) == (1, LIMIT + 5)  # 999 + 4 characters, then the second '['



def test_unclosed_angle_brackets_are_dropped_by_the_enclosing_closer():
    """`<` used as a comparison inside a dialect body does not accumulate depth."""
    check_text("(#d<a < b>)\n" * 5000)


def test_numbers_longer_than_the_limit_are_rejected_outside_strings():
    digits = safe_parse.MAX_DIGITS
    check_text(f"module attributes {{a.x = {'1' * digits} : i128}} {{}}")
    error = rejected(f"module attributes {{a.x = {'1' * (digits + 1)} : i128}} {{}}")
    assert (error.line, error.column) == (1, 26) and "more than 100 digits" in error.message
    assert rejected("%x = 1." + "5" * 200).column == 8  # floats too
    check_text('module attributes {a.x = dense<"0x' + "0" * 100_000 + '"> : tensor<50000xi8>} {}')
    check_text("// " + "9" * 10_000 + "\nmodule {}")


def test_integer_types_wider_than_the_limit_are_rejected():
    check_text("func.func private @f(%a: tensor<4x?xi128>, %b: ui128, %c: si64, %i999: i1)")
    for text, column in (("%a: tensor<4xi129>", 14), ("%a: si256", 5), ("%a: ui16777215", 5),
                         ("%a: tensor<2x3xi" + "9" * 40 + ">", 16)):
        error = rejected(text)
        assert (error.line, error.column) == (1, column), text
        assert "integer type wider than 128 bits" in error.message
    check_text('module attributes {a.x = "tensor<4xi4096>"} {}\n// i9999')


def test_alias_bombs_are_rejected_and_real_alias_use_is_not():
    for kind in ("attribute", "type", "location"):
        check_text(hostile.alias_bomb(10, kind))
        error = rejected(hostile.alias_bomb(40, kind))
        assert "aliases would expand the text to more than 16,777,216 bytes" in error.message


def test_forward_location_aliases_count_toward_depth():
    """Locations are printed at the end and used before: their depth counts where they are used."""
    chain = "\n".join(f'#l{i} = loc(callsite(#l{i - 1} at "f":1:1))' for i in range(1, 450))
    aliases = '#l0 = loc("a":1:2)\n' + chain + "\n"
    check_text("module {} loc(#l449)\n" + aliases)  # 2 levels per alias: 900 deep
    error = rejected("module {\n" * 150 + "module {} loc(#l449)\n" + "}\n" * 150 + aliases)
    assert (error.line, error.column) == (151, 15) and "through alias #l449" in error.message


def test_columns_count_utf8_bytes_as_mlir_does():
    error = rejected('"\u00e9" ' + "1" * 200)  # é is 2 bytes: the digits start at byte 6
    assert (error.line, error.column) == (1, 6)


def test_rewrite_text_rejects_over_the_limit_and_parses_on_a_large_stack():
    with pytest.raises(InputLimitError, match="nesting deeper"):
        rewrite_text(hostile.nested("module", 10_000))
    text, report = rewrite_text(hostile.gradient_seed((1, 2, 4, 4, 4), (1, 1, 2, 2, 2), (1, 1, 2, 2, 2), [(0, 0)] * 5))
    assert report.rewritten == 1 and "custom_call" in text
    text, _ = rewrite_text(hostile.nested("module", LIMIT - 2))  # at the limit: parsed, printed
    assert text.count("module {") == LIMIT - 2


def test_run_with_large_stack_returns_raises_and_restores_the_default_stack_size():
    before = threading.stack_size()
    seen = []
    assert safe_parse.run_with_large_stack(lambda: seen.append(threading.current_thread().name) or 7) == 7
    assert seen == ["pool3d-parse"]
    with pytest.raises(KeyError, match="boom"):
        safe_parse.run_with_large_stack(lambda: {}["boom"])
    assert threading.stack_size() == before


PADDED_POOL = """func.func @f(%x: tensor<4x4xf32>) -> tensor<2x2xf32> {
  %i = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %y = "stablehlo.reduce_window"(%x, %i) <{padding = dense<0> : tensor<SIZEx2xi64>, window_dimensions = array<i64: 2, 2>, window_strides = array<i64: 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %m = stablehlo.maximum %a, %b : tensor<f32>
    stablehlo.return %m : tensor<f32>
  }) : (tensor<4x4xf32>, tensor<f32>) -> tensor<2x2xf32>
  return %y : tensor<2x2xf32>
}
"""


def test_padding_literals_that_the_verifier_would_expand_are_rejected():
    # A splat padding of 2^40 x 2 elements: StableHLO's verifier expands it (found by the fuzz test).
    error = rejected(PADDED_POOL.replace("SIZE", str(2**40)))
    assert (error.line, error.column) == (3, 44)  # where `padding` starts
    assert "a padding attribute of 2199023255552 elements" in error.message
    check_text(PADDED_POOL.replace("SIZE", "2"))  # a real padding: fine (the verifier judges its shape)


def test_an_exception_inside_the_parser_becomes_a_parse_failure(monkeypatch):
    from pool3d_pass.ir.context import make_context

    monkeypatch.setattr(safe_parse, "check_text", lambda text: None)  # let MLIR meet it
    with make_context(), pytest.raises(safe_parse.ParseFailure, match="MLIR's parser failed: ValueError"):
        safe_parse.parse_module(PADDED_POOL.replace("SIZE", str(2**40)))


FUNCTION = "func.func @{name}(%a: tensor<f32>) -> tensor<f32> {{\n  return %a : tensor<f32>\n}}\n"


@pytest.mark.parametrize(
    "text",
    [f"module @m {{\n{FUNCTION.format(name='f')}}}\n", FUNCTION.format(name="f"),
     FUNCTION.format(name="f") + FUNCTION.format(name="g")],
    ids=["module", "one-function", "two-functions"],
)
def test_a_named_parse_names_every_location_and_prints_as_an_unnamed_one(text):
    from jaxlib.mlir import ir

    from pool3d_pass.ir.context import make_context

    with make_context():
        named = safe_parse.parse_module(text, source_name='dir/my "model".mlir')
        unnamed = safe_parse.parse_module(text)
        assert str(named.operation) == str(unnamed.operation)
        with_locations = named.operation.get_asm(enable_debug_info=True)
        assert 'loc("-"' not in with_locations
        line = text.splitlines().index("  return %a : tensor<f32>") + 1
        assert f'loc("dir/my \\22model\\22.mlir":{line}:3)' in with_locations  # the first return, escaped name
        assert unnamed.operation.get_asm(enable_debug_info=True).count('loc("-"') == with_locations.count(
            'loc("dir/my \\22model\\22.mlir"')
        assert isinstance(named, (ir.Module, ir.OpView)) and named.operation.name == "builtin.module"


def test_a_named_parse_names_its_errors():
    from jaxlib.mlir import ir

    from pool3d_pass.ir.context import make_context

    with make_context():
        for text in ("func.func @f() {\n  %x = \n}\n", FUNCTION.format(name="f") + "%x = \n"):
            with pytest.raises(ir.MLIRError, match='"model.mlir":[24]:'):
                safe_parse.parse_module(text, source_name="model.mlir")
        with pytest.raises(InputLimitError, match=f"^model.mlir:1:{LIMIT + 1}: nesting deeper"):
            safe_parse.parse_module("(" * (LIMIT + 1), source_name="model.mlir")
