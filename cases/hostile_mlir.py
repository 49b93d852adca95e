"""pool3d-opt's hostile inputs: mutated and generated modules, each a `Case` (its text and arguments).

Seeds are the lit tests, tests/fixtures/*.mlir and generated max-pool
gradients (`gradient_seed`: both padding forms, f32/bf16/f16, NCDHW and
NDHWC, a `main` function so the result can be run); mutations are syntactic
(truncation, byte flips, inserted/deleted bytes and lines) and semantic (the
select region's direction, compare type and argument order, the scatter
region's op and argument order, window / stride / padding values including
0, negative, huge, and padding >= window, init and pad values, element
types); crash-class inputs are built (deep nesting of every kind, long
literals, wide integers, alias bombs). `draw_cases(seed, ...)` is one
reproducible draw: checks/fuzz_cli.py runs a long one, tests/cli/ a short
one and the parser's limits (tests/cli/test_safe_parse.py).
"""

from __future__ import annotations

import dataclasses
import random
import re
from pathlib import Path

from cases.fixtures import FIXTURES, ROOT
from pool3d_pass.contract import pooled_extent

LIT = ROOT / "lit_tests"
SAS = '"stablehlo.select_and_scatter"'

NEG_INF = {"f32": "0xFF800000", "bf16": "0xFF80", "f16": "0xFC00", "f64": "0xFFF0000000000000"}


@dataclasses.dataclass
class Case:
    name: str
    text: str
    args: tuple[str, ...] = ()
    numerics: bool = False  # a `main` with exact small-integer arithmetic: compare with the spec


# --------------------------------------------------------------------------
# Seeds
# --------------------------------------------------------------------------


def _tensor(shape, elem) -> str:
    return "tensor<" + "".join(f"{n}x" for n in shape) + elem + ">"


def gradient_seed(shape, window, strides, padding, elem="f32", form="attribute") -> str:
    """A `main(x, g) -> dx`: one max-pool gradient, JAX's explicit-pad form or attribute padding."""
    rank = len(shape)
    padded = [n + lo + hi for n, (lo, hi) in zip(shape, padding)]
    out = [pooled_extent(n, k, s, lo, hi) for n, k, s, (lo, hi) in zip(shape, window, strides, padding)]
    t, x, g, p = _tensor([], elem), _tensor(shape, elem), _tensor(out, elem), _tensor(padded, elem)
    ints = lambda values: ", ".join(map(str, values))
    regions = f"""({{
  ^bb0(%a: {t}, %b: {t}):
    %c = stablehlo.compare GE, %a, %b, FLOAT : ({t}, {t}) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }}, {{
  ^bb0(%a: {t}, %b: {t}):
    %c = stablehlo.add %a, %b : {t}
    stablehlo.return %c : {t}
  }})"""
    lines = [f"func.func @main(%x: {x}, %g: {g}) -> {x} {{",
             f"  %zero = stablehlo.constant dense<0.000000e+00> : {t}"]
    if form == "pad":
        lines += [
            f"  %ninf = stablehlo.constant dense<{NEG_INF[elem]}> : {t}",
            f"  %p = stablehlo.pad %x, %ninf, low = [{ints(lo for lo, _ in padding)}], "
            f"high = [{ints(hi for _, hi in padding)}], interior = [{ints([0] * rank)}] : ({x}, {t}) -> {p}",
            f"  %s = {SAS}(%p, %g, %zero) <{{padding = dense<0> : tensor<{rank}x2xi64>, "
            f"window_dimensions = array<i64: {ints(window)}>, window_strides = array<i64: {ints(strides)}>}}> "
            f"{regions} : ({p}, {g}, {t}) -> {p}",
            f"  %r = stablehlo.slice %s [{', '.join(f'{lo}:{lo + n}' for n, (lo, _) in zip(shape, padding))}] "
            f": ({p}) -> {x}",
            f"  return %r : {x}",
        ]
    else:
        pads = ", ".join(f"[{lo}, {hi}]" for lo, hi in padding)
        lines += [
            f"  %s = {SAS}(%x, %g, %zero) <{{padding = dense<[{pads}]> : tensor<{rank}x2xi64>, "
            f"window_dimensions = array<i64: {ints(window)}>, window_strides = array<i64: {ints(strides)}>}}> "
            f"{regions} : ({x}, {g}, {t}) -> {x}",
            f"  return %s : {x}",
        ]
    return "\n".join(lines + ["}", ""])


def gradient_seeds() -> dict[str, str]:
    """Small runnable gradients: both padding forms, three element types, both layouts."""
    seeds = {}
    configs = [
        ("k2s2", (1, 2, 4, 4, 4), (1, 1, 2, 2, 2), (1, 1, 2, 2, 2), [(0, 0)] * 5),
        ("k3s2p1", (1, 2, 5, 5, 5), (1, 1, 3, 3, 3), (1, 1, 2, 2, 2), [(0, 0), (0, 0), (1, 1), (1, 1), (1, 1)]),
        ("k3s1p1_ndhwc", (1, 4, 4, 4, 2), (1, 3, 3, 3, 1), (1, 1, 1, 1, 1), [(0, 0), (1, 1), (1, 1), (1, 1), (0, 0)]),
        ("k2s1_same", (2, 1, 3, 4, 5), (1, 1, 2, 2, 2), (1, 1, 1, 1, 1), [(0, 0), (0, 0), (0, 1), (0, 1), (0, 1)]),
        ("k232s121_2d", (1, 3, 6, 5), (1, 1, 3, 2), (1, 1, 2, 1), [(0, 0)] * 4),
    ]
    for name, shape, window, strides, padding in configs:
        for elem in ("f32", "bf16", "f16"):
            for form in ("attribute", "pad"):
                seeds[f"{name}_{elem}_{form}"] = gradient_seed(shape, window, strides, padding, elem, form)
    return seeds


def file_seeds() -> dict[str, str]:
    """The lit tests and the fixtures, by path relative to the repository."""
    # Not lit's Output/ folder: the draw must not depend on whether lit ran first.
    paths = sorted(p for p in LIT.rglob("*.mlir") if "Output" not in p.parts) + sorted(FIXTURES.glob("*.mlir"))
    return {str(p.relative_to(ROOT)): p.read_text() for p in paths}


# Fixtures whose `main` is one max-pool gradient with exact small-integer
# arithmetic around it (no convolutions): their results are compared exactly.
SIMPLE_FIXTURES = (
    "jax_ncdhw_k2s2_valid_f32", "jax_ncdhw_k3s2_p1_f32", "jax_ncdhw_k3s1_p1_f32", "jax_ndhwc_k3s2_valid_f32",
    "jax_ncdhw_k2s2_same_even_f32", "jax_vjp_unused_primal_f32", "jax_vjp_with_primal_f32",
    "jax_ncdhw_k3s2_p1_bf16", "jax_ndhwc_k2s2_valid_bf16",
)


# --------------------------------------------------------------------------
# Mutations
# --------------------------------------------------------------------------


def _sas_span(text: str, rng: random.Random) -> tuple[int, int] | None:
    """(start, end) of one select_and_scatter op's text: from its name to its result type."""
    starts = [m.start() for m in re.finditer(re.escape(SAS), text)]
    if not starts:
        return None
    start = rng.choice(starts)
    end = text.find("}) :", start)
    end = text.find("\n", end) if end >= 0 else -1
    return start, (end if end >= 0 else len(text))


def _in_sas(text, rng, pattern, replace):
    span = _sas_span(text, rng)
    if span is None:
        return None
    start, end = span
    matches = list(re.finditer(pattern, text[start:end]))
    if not matches:
        return None
    m = rng.choice(matches)
    new = replace(m)
    return text[: start + m.start()] + new + text[start + m.end():]


def m_direction(text, rng):
    direction = rng.choice(["GT", "LE", "LT", "EQ", "NE"])
    return _in_sas(text, rng, r"compare\s+GE", lambda m: f"compare {direction}")


def m_compare_type(text, rng):
    kind = rng.choice(["TOTALORDER", "SIGNED", "UNSIGNED"])

    def replace(m):
        body = m.group()
        return re.sub(r",\s*FLOAT\s*:", f", {kind} :", body) if "FLOAT" in body else body.replace(" :", f", {kind} :", 1)

    return _in_sas(text, rng, r"compare\s+\w+,[^:\n]*:", replace)


def m_swap_compare(text, rng):
    return _in_sas(text, rng, r"(compare\s+\w+,\s*)(%[\w.#]+),\s*(%[\w.#]+)",
                   lambda m: f"{m.group(1)}{m.group(3)}, {m.group(2)}")


def m_scatter_op(text, rng):
    op = rng.choice(["maximum", "multiply", "subtract", "minimum"])
    return _in_sas(text, rng, r"stablehlo\.add\b", lambda m: f"stablehlo.{op}")


def m_swap_scatter(text, rng):
    return _in_sas(text, rng, r"(stablehlo\.add\s+)(%[\w.#]+),\s*(%[\w.#]+)",
                   lambda m: f"{m.group(1)}{m.group(3)}, {m.group(2)}")


HOSTILE_INTS = [0, -1, -2, 1, 2, 3, 5, 7, 4096, 4097, 2**30, 2**31, 2**40, 2**62, 2**63 - 1, -(2**63)]


def _replace_one_int(values: str, rng) -> str:
    items = [v.strip() for v in values.split(",")]
    items[rng.randrange(len(items))] = str(rng.choice(HOSTILE_INTS))
    return ", ".join(items)


def m_window(text, rng):
    return _in_sas(text, rng, r"(window_dimensions = array<i64: )([-\d, ]+)(>)",
                   lambda m: m.group(1) + _replace_one_int(m.group(2), rng) + m.group(3))


def m_stride(text, rng):
    return _in_sas(text, rng, r"(window_strides = array<i64: )([-\d, ]+)(>)",
                   lambda m: m.group(1) + _replace_one_int(m.group(2), rng) + m.group(3))


def m_padding(text, rng):
    """One padding entry: hostile, or just at / past the window (padding >= window)."""
    span = _sas_span(text, rng)
    if span is None:
        return None
    start, end = span
    op = text[start:end]
    window = re.search(r"window_dimensions = array<i64: ([-\d, ]+)>", op)
    pad = re.search(r"padding = dense<([^>]*)> : tensor<(\d+)x2xi64>", op)
    if not window or not pad:
        return None
    dims = [int(v) for v in window.group(1).split(",")]
    rank = int(pad.group(2))
    if rank < 1 or rank > 64:
        return None
    flat = [int(v) for v in re.findall(r"-?\d+", pad.group(1))]
    pairs = flat * (2 * rank) if len(flat) == 1 else flat
    pairs = (pairs + [0] * (2 * rank))[: 2 * rank]
    i = rng.randrange(2 * rank)
    k = dims[i // 2] if i // 2 < len(dims) else 1
    pairs[i] = rng.choice([k, k + 1, k - 1, 2 * k, -1, -k, 2**31, 2**40, 2**63 - 1])
    body = ", ".join(f"[{pairs[2 * d]}, {pairs[2 * d + 1]}]" for d in range(rank))
    new = op[: pad.start()] + f"padding = dense<[{body}]> : tensor<{rank}x2xi64>" + op[pad.end():]
    return text[:start] + new + text[end:]


def m_element_type(text, rng):
    source = rng.choice([t for t in ("f32", "bf16", "f16") if re.search(rf"\b{t}\b", text)] or ["f32"])
    target = rng.choice([t for t in ("f32", "bf16", "f16", "f64", "i32", "i8", "f8E4M3FN", "complex<f32>", "i1")
                         if t != source])
    return re.sub(rf"(?<=[x<]){source}\b", target, text)


def m_one_element_type(text, rng):
    """One operand or result type of a select_and_scatter changed: mixed element types."""
    target = rng.choice(["f16", "bf16", "f64", "i32"])
    return _in_sas(text, rng, r"(?<=x)(f32|bf16|f16)(?=>)", lambda m: target)


def m_init(text, rng):
    value = rng.choice(["-0.000000e+00", "1.000000e+00", "0x7FC00000", "0xFF800000", "-1.0"])
    return re.sub(r"(%zero = stablehlo\.constant dense<)[^>]*(>)", lambda m: m.group(1) + value + m.group(2),
                  text, count=1) if "%zero" in text else None


def m_pad_value(text, rng):
    value = rng.choice(["0.000000e+00", "0x7F800000", "1.0", "0x7FC00000"])
    return re.sub(r"(%ninf = stablehlo\.constant dense<)[^>]*(>)", lambda m: m.group(1) + value + m.group(2),
                  text, count=1) if "%ninf" in text else None


def m_shape(text, rng):
    """One dimension of one tensor type: 0, huge, or a different size (usually a verifier error)."""
    matches = list(re.finditer(r"(?<=tensor<)(\d+)(?=x)", text))
    if not matches:
        return None
    m = rng.choice(matches)
    return text[: m.start()] + str(rng.choice([0, 1, 3, 2**31, 2**40, 2**62])) + text[m.end():]


SEMANTIC = [m_direction, m_compare_type, m_swap_compare, m_scatter_op, m_swap_scatter, m_window, m_stride,
            m_padding, m_element_type, m_one_element_type, m_init, m_pad_value, m_shape]


def m_truncate(text, rng):
    return text[: rng.randrange(len(text))] if text else None


def m_flip(text, rng):
    data = bytearray(text.encode("utf-8", errors="surrogateescape"))
    for _ in range(rng.choice([1, 1, 2, 4, 16])):
        i = rng.randrange(len(data))
        data[i] = rng.choice([data[i] ^ (1 << rng.randrange(8)), rng.choice(b"(){}[]<>\"\\%#!-0123456789x\n ")])
    return data.decode("utf-8", errors="surrogateescape")


def m_insert(text, rng):
    i = rng.randrange(len(text) + 1)
    piece = rng.choice(["(", ")", "{", "}", "<", ">", "[", "]", '"', "\\", "//", "->", "%", "#", "!", "@",
                        "\n", "\x00", "\u00e9", "\U0001F600", "9" * rng.randrange(1, 200), " loc(unknown)",
                        "\n// -----\n", "^bb9:", "x" * 50])
    return text[:i] + piece + text[i:]


def m_delete(text, rng):
    i = rng.randrange(len(text))
    return text[:i] + text[i + rng.randrange(1, 40):]


def m_lines(text, rng):
    lines = text.split("\n")
    i = rng.randrange(len(lines))
    action = rng.choice(["delete", "duplicate", "swap"])
    if action == "delete":
        del lines[i]
    elif action == "duplicate":
        lines.insert(i, lines[i])
    else:
        j = rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    return "\n".join(lines)


SYNTACTIC = [m_truncate, m_flip, m_insert, m_delete, m_lines]


# --------------------------------------------------------------------------
# Crash-class inputs: nesting, literals, widths, aliases (built, not mutated)
# --------------------------------------------------------------------------


def nested(kind: str, n: int) -> str:
    if kind == "module":
        return "module {" * n + "}" * n + "\n"
    if kind == "tuple":
        return "func.func private @f(%a: " + "tuple<" * n + "f32" + ">" * n + ")\n"
    if kind == "array":
        return "module attributes {a.x = " + "[" * n + "]" * n + "} {}\n"
    if kind == "dict":
        return "module attributes {a.x = " + "{a = " * n + "1" + "}" * n + "} {}\n"
    if kind == "callsite":
        return "module {} loc(" + "callsite(" * n + '"a"' + ' at "b")' * n + ")\n"
    if kind == "fused":
        return "module {} loc(" + "fused[" * n + '"a"' + "]" * n + ")\n"
    if kind == "function_type":
        return "func.func private @f(%a: " + "() -> (" * n + "f32" + ")" * n + ")\n"
    if kind == "dense":
        return "module attributes {a.x = dense<" + "[" * n + "1" + "]" * n + "> : tensor<" + "1x" * n + "i32>} {}\n"
    if kind == "case":
        lines = ["func.func @f(%i: tensor<i32>) -> tensor<i32> {"]
        lines += [f'%r{k} = "stablehlo.case"(%i) ({{' for k in range(n)]
        lines.append("stablehlo.return %i : tensor<i32>")
        for k in reversed(range(n)):
            lines.append("}) : (tensor<i32>) -> tensor<i32>")
            lines.append(f"stablehlo.return %r{k} : tensor<i32>" if k else "return %r0 : tensor<i32>")
        return "\n".join(lines + ["}", ""])
    if kind == "alias_chain":
        lines = ["#a0 = [1]"] + [f"#a{i} = [#a{i - 1}]" for i in range(1, n)]
        return "\n".join(lines) + f"\nmodule attributes {{a.x = #a{n - 1}}} {{}}\n"
    raise ValueError(kind)


NESTING_KINDS = ("module", "tuple", "array", "dict", "callsite", "fused", "function_type", "dense", "case",
                 "alias_chain")


def alias_bomb(n: int, kind: str = "attribute") -> str:
    if kind == "type":
        lines = ["!t0 = tuple<f32>"] + [f"!t{i} = tuple<!t{i - 1}, !t{i - 1}>" for i in range(1, n)]
        return "\n".join(lines) + f"\nfunc.func private @f(%a: !t{n - 1})\n"
    if kind == "location":
        seed = gradient_seed((1, 2, 4, 4, 4), (1, 1, 2, 2, 2), (1, 1, 2, 2, 2), [(0, 0)] * 5)
        seed = seed.replace("-> tensor<1x2x4x4x4xf32>\n  return", f"-> tensor<1x2x4x4x4xf32> loc(#l{n - 1})\n  return")
        lines = ['#l0 = loc("a.py":1:2)'] + [f"#l{i} = loc(callsite(#l{i - 1} at #l{i - 1}))" for i in range(1, n)]
        return seed + "\n".join(lines) + "\n"
    lines = ["#a0 = [1]"] + [f"#a{i} = [#a{i - 1}, #a{i - 1}]" for i in range(1, n)]
    return "\n".join(lines) + f"\nmodule attributes {{a.x = #a{n - 1}}} {{}}\n"


def name_location_gradient(levels: int) -> str:
    """A runnable gradient whose select_and_scatter has a name location nested `levels` deep."""
    seed = gradient_seed((1, 2, 4, 4, 4), (1, 1, 2, 2, 2), (1, 1, 2, 2, 2), [(0, 0)] * 5)
    location = "loc(" + '"n"(' * levels + '"f.py":1:2' + ")" * levels + ")"
    return seed.replace("-> tensor<1x2x4x4x4xf32>\n  return", f"-> tensor<1x2x4x4x4xf32> {location}\n  return")


def crash_class_cases(rng: random.Random, count: int) -> list[Case]:
    """Deep nesting at and past the limit, long literals, wide integers, alias bombs, huge shapes."""
    from pool3d_pass import safe_parse

    limit = safe_parse.MAX_NESTING
    builders = []
    for kind in NESTING_KINDS:
        per_level = 2 if kind == "case" else 1  # levels of brackets per level of the construct
        builders.append((f"nest_{kind}_over", lambda k=kind, p=per_level: nested(k, rng.choice([
            limit // p + 1, 3_000, 10_000, 100_000]))))
        builders.append((f"nest_{kind}_at_limit", lambda k=kind, p=per_level: nested(k, (limit - 4) // p)))
    digits = safe_parse.MAX_DIGITS
    builders += [
        ("int_literal", lambda: f"module attributes {{a.x = {'1' * rng.choice([digits + 1, 20_000, 100_000])} : i64}} {{}}\n"),
        ("int_literal_at_limit", lambda: f"module attributes {{a.x = {'1' * 38} : i128, a.y = {'1' * digits}.5 : f64}} {{}}\n"),
        ("float_literal", lambda: f"module attributes {{a.x = 1.{'1' * rng.choice([200, 100_000])} : f32}} {{}}\n"),
        ("dense_literals", lambda: "module attributes {a.x = dense<[" + ", ".join(["9" * digits + ".5"] * 20000)
         + "]> : tensor<20000xf64>} {}\n"),
        ("wide_int", lambda: "module attributes {a.x = dense<[" + ", ".join(["1"] * 300)
         + f"]> : tensor<300xi{rng.choice([1025, 16777215, 99999999])}>}} {{}}\n"),
        ("alias_bomb", lambda: alias_bomb(rng.choice([24, 40, 64]), rng.choice(["attribute", "type", "location"]))),
        ("alias_bomb_small", lambda: alias_bomb(10, rng.choice(["attribute", "type", "location"]))),
        ("huge_splat", lambda: "func.func @main() -> tensor<4611686018427387904xf32> {\n"
         "  %0 = stablehlo.constant dense<1.0> : tensor<4611686018427387904xf32>\n"
         "  return %0 : tensor<4611686018427387904xf32>\n}\n"),
        ("long_line", lambda: "module {}" + " " * 1_000_000 + "\n"),
        ("many_ops", lambda: "func.func @f(%x: tensor<f32>) -> tensor<f32> {\n"
         + "".join(f"  %v{i} = stablehlo.add %x, %x : tensor<f32>\n" for i in range(20_000))
         + "  return %x : tensor<f32>\n}\n"),
        ("long_string", lambda: 'module attributes {a.x = "' + "\\\\" * 500_000 + '"} {}\n'),
        ("unterminated_string", lambda: 'module attributes {a.x = "' + "(" * 5_000 + "\n} {}\n"),
        ("nul_bytes", lambda: "module {\x00" + "\x00" * 1000 + "}\n"),
        ("name_location_at_limit", lambda: name_location_gradient(limit - 10)),
    ]
    cases = []
    for i in range(count):
        name, build = builders[i % len(builders)] if i < len(builders) else rng.choice(builders)
        cases.append(Case(f"crash/{i:03d}_{name}", build()))
    return cases


# --------------------------------------------------------------------------
# Drawing the cases
# --------------------------------------------------------------------------


def draw_cases(seed: int, syntactic: int, semantic: int, crash: int) -> list[Case]:
    rng = random.Random(seed)
    files = file_seeds()
    generated = gradient_seeds()
    simple = {name: text for name, text in files.items() if Path(name).stem in SIMPLE_FIXTURES}
    runnable = {**{f"gen/{k}": v for k, v in generated.items()}, **simple}
    all_seeds = {**files, **{f"gen/{k}": v for k, v in generated.items()}}
    names = sorted(all_seeds)
    runnable_names = sorted(runnable)
    cases: list[Case] = []
    # Unmutated generated seeds: the rewrite must match the spec on them too.
    for name in sorted(generated):
        cases.append(Case(f"seed/{name}", generated[name], ("--stats",), numerics=True))
    for i in range(syntactic):
        name = rng.choice(names)
        mutate = SYNTACTIC[i % len(SYNTACTIC)]
        text = all_seeds[name]
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            text = mutate(text, rng) or text
        extra = rng.choice([(), (), ("--stats",), ("--split-input-file",), ("--target=cpu",),
                            ("--pass-pipeline=canonicalize,pool3d-max-pool-backward,cse",)])
        cases.append(Case(f"syntax/{i:03d}_{mutate.__name__}_{Path(name).stem}", text, extra))
    for i in range(semantic):
        # Mostly runnable seeds (their rewrites are checked against the spec), some fixtures.
        pool = runnable_names if i % 4 else names
        name = rng.choice(pool)
        mutate = SEMANTIC[i % len(SEMANTIC)]
        text = mutate(all_seeds[name], rng)
        if text is None:
            mutate = m_direction
            text = m_direction(all_seeds[name], rng) or all_seeds[name]
        if rng.random() < 0.3:  # a second mutation
            text = rng.choice(SEMANTIC)(text, rng) or text
        cases.append(Case(f"semantic/{i:03d}_{mutate.__name__}_{Path(name).stem}", text, ("--stats",),
                          numerics=name in runnable))
    cases += crash_class_cases(rng, crash)
    return cases
