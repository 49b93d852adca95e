"""Markdown tables and the target verdicts from a benchmark result (the dict run.py writes as JSON).

Everything printed is computed from the JSON record alone, so `python -m
bench.run --table-from PATH` reprints a stored run exactly.
"""

from __future__ import annotations

# Targets (benchmarks, not tests): name -> threshold. Judged on full runs only: a quick run's few
# shapes and repeats judge nothing (render() prints no verdicts for mode "quick").
USER_VS_XLA = 15.0                 # a layer's job under pool3d_pass.jit >= 15x jax.jit's, both jobs, every shape
USER_VS_TORCH = 2.0                # a layer's job under pool3d_pass.jit >= 2x PyTorch doing the same job
RECOMPUTE_VS_XLA_FIRST_SHAPE = 20.0  # the recompute kernel >= 20x XLA's gradient on the first shape
RECOMPUTE_VS_TORCH = 1.0           # the recompute kernel faster than PyTorch's indices backward, every shape
LAYER_KERNELS_VS_TORCH = 1.5       # forward and from_indices >= 1.5x PyTorch's same-job kernels
FLOOR_FRACTION = 0.5               # the recompute kernel at least half the copy floor's speed
INFERENCE_VS_JIT = 0.95            # an inference program never slower than jax.jit's (0.95: the noise)
PASS_VS_CANONICALIZE = 2.0         # pass no more than 2x canonicalize's time
LINEARITY = 1.25                   # time(10x) / (10 * time(1x)) at most this: "linear"


def _ms(stats: dict | None) -> str:
    if stats is None:
        return "n/a"
    return f"{stats['min_ms']:.3g} ({stats['median_ms']:.3g})" if stats["min_ms"] < 1000 else \
        f"{stats['min_ms']:.0f} ({stats['median_ms']:.0f})"


def _x(ratio: float | None) -> str:
    return "n/a" if ratio is None else f"{ratio:.3g}x"


def _plain(ms: float | None) -> str:
    """A single figure (a floor), not timing statistics."""
    return "n/a" if ms is None else f"{ms:.3g}"


def _fraction(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.2f}"


def _row(cells) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _table(header, rows) -> list[str]:
    return [_row(header), _row(["---"] * len(header)), *(_row(r) for r in rows)]


def _xx(rec: dict, key: str) -> str:
    """"min-ratio (median-ratio)" of a record with ratios_of_min / ratios_of_median."""
    lo, med = rec["ratios_of_min"].get(key), rec["ratios_of_median"].get(key)
    if lo is None:
        return "n/a"
    return f"{lo:.3g}x ({med:.3g}x)"


_SHORT_CALLS = {"backward": "backward", "forward": "forward", "forward_output": "forward_output",
                "backward_from_indices": "from_indices",
                "backward_from_input": "from_input"}


def _calls(census: dict) -> str:
    calls = ", ".join(f"{v} {census[k]}" for k, v in _SHORT_CALLS.items() if census.get(k))
    extra = ", ".join(f"{op} {census[op]}" for op in ("reduce-window", "scatter", "select-and-scatter")
                      if census.get(op))
    return (calls or "no call") + (f"; {extra}" if extra else "")


def _worst(checks: dict, prefix: str = "") -> str:
    vals = [v for k, v in checks.items() if k.startswith(prefix) and isinstance(v, float)]
    return "n/a" if not vals else f"{max(vals):.2g}"


def user_table(section: dict) -> list[str]:
    header = ["case", "job", "XLA ms", "pool3d_pass.jit ms", "torch ms", "XLA / pool3d_pass.jit",
              "torch / pool3d_pass.jit", "XLA -x ms", "XLA / XLA -x", "floor ms", "torch / floor", "strategy: calls (+ XLA ops) in pool3d_pass.jit's program",
              "recompute ms", "XLA / recompute", "JAX call ms", "XLA / (JAX call + floor)",
              "torch / (JAX call + floor)", "max abs diff vs XLA (pool3d, torch)"]
    rows = []
    for c in section["cases"]:
        for j in c["jobs"]:
            ms = j["ms"]
            census = j["census"]["pool3d"]
            rows.append([c["case"], j["job"], _ms(ms["xla"]), _ms(ms["pool3d"]), _ms(ms.get("torch")),
                         _xx(j, "xla_vs_pool3d"), _xx(j, "torch_vs_pool3d"), _ms(ms.get("negate")),
                         _x(j["ratios_of_min"].get("xla_vs_negate")),
                         "n/a" if j.get("floor_ms") is None else f"{j['floor_ms']:.3g}",
                         _x(j["ratios_of_min"].get("torch_vs_floor")), f"{j['strategy']}: {_calls(census)}", _ms(ms.get("recompute")),
                         _xx(j, "xla_vs_recompute"), _ms(ms.get("jax_call")),
                         _x(j["ratios_of_min"].get("xla_vs_jax_call_and_floor")),
                         _x(j["ratios_of_min"].get("torch_vs_jax_call_and_floor")),
                         f"{_worst(j['checks'], 'pool3d_')}, {_worst(j['checks'], 'torch_')}"])
    lines = _table(header, rows)
    if section.get("note"):
        lines.append(f"\nNote: {section['note']}")
    return lines


def forward_table(section: dict) -> list[str]:
    header = ["case", "pool3d forward (y, indices) ms", "pool3d forward_output (y) ms", "XLA reduce_window (y) ms",
              "torch max_pool (y) ms", "torch max_pool with indices (y, indices) ms", "XLA / pool3d",
              "XLA / pool3d forward_output", "jax.jit / pool3d_pass.jit (inference program)",
              "torch / pool3d", "torch with indices / pool3d", "floor ms", "floor fraction (pool3d)",
              "torch with indices / floor", "JAX call ms", "torch with indices / (JAX call + floor)", "checks"]
    rows = []
    for c in section["cases"]:
        ms, ch = c["ms"], c["checks"]
        parts = []
        if "pool3d_y_bit_identical_to_xla" in ch:
            parts.append(f"y bit-identical to XLA: {ch['pool3d_y_bit_identical_to_xla']}")
        if "pool3d_indices_match_torch" in ch:
            parts.append(f"indices = torch's: {ch['pool3d_indices_match_torch']}")
        if "torch_y_max_abs_diff_vs_xla" in ch:
            parts.append(f"torch y diff {ch['torch_y_max_abs_diff_vs_xla']:.2g}")
        if "pool3d_output_bit_identical_to_xla" in ch:
            parts.append(f"forward_output y bit-identical to XLA: {ch['pool3d_output_bit_identical_to_xla']}, "
                         f"to the forward's: {ch['pool3d_output_bit_identical_to_forward']}")
        if "inference_rewritten" in ch:
            parts.append(f"inference program rewritten: {ch['inference_rewritten']}, "
                         f"y bit-identical to XLA: {ch['inference_bit_identical_to_xla']}")
        rows.append([c["case"], _ms(ms.get("pool3d")), _ms(ms.get("pool3d_output")), _ms(ms["xla"]),
                     _ms(ms.get("torch")), _ms(ms.get("torch_indices")), _xx(c, "xla_vs_pool3d"),
                     _xx(c, "xla_vs_pool3d_output"), _xx(c, "xla_vs_inference"), _xx(c, "torch_vs_pool3d"),
                     _xx(c, "torch_indices_vs_pool3d"), _plain(c.get("floor_ms")),
                     _fraction(c["ratios_of_min"].get("floor_fraction")),
                     _x(c["ratios_of_min"].get("torch_indices_vs_floor")), _ms(ms.get("jax_call")),
                     _x(c["ratios_of_min"].get("torch_indices_vs_jax_call_and_floor")), "; ".join(parts)])
    lines = _table(header, rows)
    if section.get("note"):
        lines.append(f"\nNote: {section['note']}")
    return lines


def pool_table(section: dict) -> list[str]:
    header = ["case", "XLA ms", "rewritten ms", "kernel ms", "from_indices ms", "from_input ms", "torch ms",
              "floor ms", "XLA -x ms", "kernel vs XLA", "rewritten vs XLA", "kernel vs torch",
              "from_indices vs torch", "from_input vs XLA", "floor fraction", "-x fraction",
              "from_indices floor ms", "from_indices floor fraction", "torch / from_indices floor",
              "JAX call ms", "torch call ms", "from_indices net vs torch net", "torch / (JAX call + from_indices floor)",
              "checks"]
    rows = []
    for c in section["cases"]:
        r = c["ratios_of_min"]
        diffs = c["checks"]
        worst = max(diffs.values())
        calls = _calls(c["rewritten_census"]) if "rewritten_census" in c else f"calls={c['rewritten_kernel_calls']}"
        check = f"{calls}; max abs diff={worst:.2g}"
        rows.append([c["case"], _ms(c["ms"]["xla"]), _ms(c["ms"]["rewritten"]), _ms(c["ms"]["kernel"]),
                     _ms(c["ms"].get("from_indices")), _ms(c["ms"].get("from_input")),
                     _ms(c["ms"].get("torch")), f"{c['floor_ms']:.3g}", _ms(c["ms"].get("negate")),
                     _x(r["kernel_vs_xla_speedup"]), _x(r["rewritten_vs_xla_speedup"]),
                     _x(r.get("kernel_vs_torch_speedup")), _x(r.get("from_indices_vs_torch_speedup")),
                     _x(r.get("from_input_vs_xla_speedup")), f"{r['floor_fraction']:.2f}",
                     f"{r['negate_fraction']:.2f}" if "negate_fraction" in r else "n/a",
                     _plain(c.get("from_indices_floor_ms")), _fraction(r.get("from_indices_floor_fraction")),
                     _x(r.get("torch_vs_from_indices_floor")), _ms(c["ms"].get("jax_call")),
                     _ms(c["ms"].get("torch_call")), _x(r.get("from_indices_net_vs_torch_net")),
                     _x(r.get("torch_vs_jax_call_and_from_indices_floor")), check])
    lines = _table(header, rows)
    if section.get("note"):
        lines.append(f"\nNote: {section['note']}")
    return lines


def train_table(section: dict) -> list[str]:
    header = ["program", "step ms", "speedup vs jax.jit", "loss", "kernel calls"]
    programs = section.get("programs", {})

    def label(name, default):
        p = programs.get(name)
        return default if p is None else f"{default} ({p['strategy']}: {_calls(p['census'])})"

    rows = [["jax.jit", _ms(section["ms"]["jax_jit"]), "1x", f"{section['loss_jax_jit']:.7g}", 0],
            [label("pool3d_pass_jit", "pool3d_pass.jit"), _ms(section["ms"]["pool3d_pass_jit"]),
             _x(section["speedup_of_min"]), f"{section['loss_pool3d_pass_jit']:.7g}",
             section["rewritten_kernel_calls"]]]
    if "recompute" in programs:
        p = programs["recompute"]
        rows.append([label("recompute", "pool3d_pass.jit, strategy=recompute"), _ms(section["ms"]["recompute"]),
                     _x(p["speedup_of_min"]), f"{p['loss']:.7g}",
                     sum(p["census"].get(k, 0) for k in _SHORT_CALLS)])
    lines = _table(header, rows)
    lines.append(f"\nSame loss: {section['same_loss']} (|diff| {section['loss_abs_diff']:.3g}); "
                 f"updated parameters max |diff| {section['updated_params_max_abs_diff']:.3g}. "
                 f"Input {tuple(section['input_shape'])}, channels {tuple(section['channels'])}.")
    return lines


def flax_table(section: dict) -> list[str]:
    header = ["precision", "program", "jax.jit ms", "pool3d_pass.jit ms", "jax.jit / pool3d_pass.jit",
              "calls (+ XLA ops) in pool3d_pass.jit's program", "same result"]
    rows = []
    for p in section["precisions"]:
        train, inference = p["train"], p["inference"]
        rows.append([p["precision"], "train step (Adam)", _ms(train["ms"]["jax_jit"]),
                     _ms(train["ms"]["pool3d_pass_jit"]), _xx_of(train), _calls(train["census"]),
                     f"loss equal: {train['same_loss']}; updated parameters max |diff| "
                     f"{train['updated_params_max_abs_diff']:.2g}"])
        rows.append([p["precision"], "inference step", _ms(inference["ms"]["jax_jit"]),
                     _ms(inference["ms"]["pool3d_pass_jit"]), _xx_of(inference), _calls(inference["census"]),
                     f"logits bit-identical: {inference['logits_bit_identical']}"])
    lines = _table(header, rows)
    lines.append(f"\nInput {tuple(section['input_shape'])} (NDHWC), channels {tuple(section['channels'])}; "
                 f"{section['model']}.")
    return lines


def _xx_of(rec: dict) -> str:
    return f"{rec['speedup_of_min']:.3g}x ({rec['speedup_of_median']:.3g}x)"


def pass_table(section: dict) -> list[str]:
    header = ["module", "ops", "pool grads (rewritten)", "pass ms", "canonicalize ms", "pass / canonicalize",
              "pass us/op", "JAX lowering ms", "XLA compile ms", "pass / (lowering + compile)"]

    def row(name, r):
        ms = r["ms"]
        return [name, r["ops"], f"{r['select_and_scatter']} ({r['rewritten']})", _ms(ms["pool3d_pass"]),
                _ms(ms["canonicalize"]), _x(r["pass_vs_canonicalize_of_min"]), f"{r['pass_us_per_op']:.3g}",
                _ms(ms.get("jax_lowering")), _ms(ms.get("xla_compile")),
                f"{r['pass_vs_lowering_plus_compile_of_min']:.2%}" if "xla_compile" in ms else "n/a"]

    syn = section["synthetic"]
    rows = [row("3-D U-Net train step", section["unet"])]
    rows += [row(f"synthetic x{r['scale']}", r) for r in syn["scales"]]
    lines = _table(header, rows)
    lines.append(f"\nGrowth {syn['growth']}: linearity (time(Nx) / (N * time(1x))) pool3d pass "
                 f"{syn['linearity_pool3d_pass']:.2f}, canonicalize {syn['linearity_canonicalize']:.2f}.")
    return lines


def _with_ceiling(target: str, v: float, bar: float, ceiling: float | None, bound: str) -> dict:
    """A ratio target; where `ceiling` (the baseline over the least the job can take) is below the bar, it says
    so, naming the bound."""
    measured = f"{v:.3g}x"
    if ceiling is not None and ceiling < bar:
        measured += f" (out of reach here: {bound} = {ceiling:.3g}x)"
    return {"target": target, "measured": measured, "met": v >= bar}


def _torch_bound(r: dict, floor_key: str, call_key: str) -> tuple[float | None, str]:
    """torch over JAX's call plus the floor where the run measured that call (older runs did not),
    else torch over the floor."""
    if r.get(call_key) is not None:
        return r[call_key], "torch / (JAX's call + floor)"
    return r.get(floor_key), "torch / floor"


def _same_program(target: str, v: float) -> dict:
    """An inference program the pass left alone: jax.jit's own program, so not slower; the ratio is noise."""
    return {"target": target, "measured": f"{v:.3g}x: jax.jit's own program (nothing rewritten), the ratio is noise",
            "met": True}


def targets(result: dict) -> list[dict]:
    """Each target: what, measured value, threshold, met."""
    out = []
    user = result.get("user_view")
    if user:
        for c in user["cases"]:
            for j in c["jobs"]:
                r = j["ratios_of_min"]
                out.append(_with_ceiling(f"pool3d_pass.jit >= {USER_VS_XLA:g}x XLA, {j['job']}, {c['case']}",
                                         r["xla_vs_pool3d"], USER_VS_XLA, r.get("xla_vs_jax_call_and_floor"),
                                         "XLA / (JAX's call + floor)"))
                if r.get("torch_vs_pool3d") is not None:
                    out.append(_with_ceiling(f"pool3d_pass.jit >= {USER_VS_TORCH:g}x torch, {j['job']}, {c['case']}",
                                             r["torch_vs_pool3d"], USER_VS_TORCH, *_torch_bound(r, "torch_vs_floor",
                                             "torch_vs_jax_call_and_floor")))
    fwd = result.get("forward")
    if fwd:  # the forward never behind XLA; the layer kernels against PyTorch's same job
        for c in fwd["cases"]:
            r = c["ratios_of_min"]
            for key, what, bar in (("xla_vs_pool3d", "forward (y, indices) >= 1x XLA reduce_window", 1.0),
                                   ("xla_vs_pool3d_output", "forward_output >= 1x XLA reduce_window", 1.0),
                                   # "never slower": the rewritten inference program against jax.jit's
                                   ("xla_vs_inference", f"inference program not slower than jax.jit (>= {INFERENCE_VS_JIT:g}x, noise)",
                                    INFERENCE_VS_JIT),
                                   ("torch_indices_vs_pool3d", f"forward >= {LAYER_KERNELS_VS_TORCH:g}x torch with indices",
                                    LAYER_KERNELS_VS_TORCH)):
                if r.get(key) is None:
                    continue
                if key == "xla_vs_inference" and c["checks"].get("inference_rewritten") is False:
                    out.append(_same_program(f"{what}, {c['case']}", r[key]))
                elif key == "torch_indices_vs_pool3d":
                    out.append(_with_ceiling(f"{what}, {c['case']}", r[key], bar,
                                             *_torch_bound(r, "torch_indices_vs_floor",
                                                           "torch_indices_vs_jax_call_and_floor")))
                else:
                    out.append({"target": f"{what}, {c['case']}", "measured": f"{r[key]:.3g}x", "met": r[key] >= bar})
    pool = result.get("pool_backward")
    if pool and pool["cases"]:
        for c in pool["cases"]:
            r = c["ratios_of_min"]
            v = r.get("from_indices_vs_torch_speedup")
            if v is not None:
                out.append(_with_ceiling(f"from_indices >= {LAYER_KERNELS_VS_TORCH:g}x torch's indices backward, {c['case']}",
                                         v, LAYER_KERNELS_VS_TORCH, *_torch_bound(r, "torch_vs_from_indices_floor",
                                                                            "torch_vs_jax_call_and_from_indices_floor")))
    if pool and pool["cases"]:
        first = pool["cases"][0]
        v = first["ratios_of_min"]["kernel_vs_xla_speedup"]
        out.append({"target": f"recompute kernel >= {RECOMPUTE_VS_XLA_FIRST_SHAPE:g}x XLA on {first['case']}",
                    "measured": f"{v:.3g}x", "met": v >= RECOMPUTE_VS_XLA_FIRST_SHAPE})
        if pool["cases"][0]["ratios_of_min"].get("kernel_vs_torch_speedup") is not None:
            for c in pool["cases"]:
                v = c["ratios_of_min"]["kernel_vs_torch_speedup"]
                out.append({"target": f"recompute kernel faster than torch on {c['case']}",
                            "measured": f"{v:.3g}x", "met": v > RECOMPUTE_VS_TORCH})
        for c in pool["cases"]:
            v = c["ratios_of_min"]["floor_fraction"]
            out.append({"target": f"recompute kernel >= {FLOOR_FRACTION:g} of floor speed on {c['case']}",
                        "measured": f"{v:.2f}", "met": v >= FLOOR_FRACTION})
    ps = result.get("pass_speed")
    if ps:
        mods = [("U-Net", ps["unet"])] + [(f"synthetic x{r['scale']}", r) for r in ps["synthetic"]["scales"]]
        for name, r in mods:
            v = r["pass_vs_canonicalize_of_min"]
            out.append({"target": f"pass <= {PASS_VS_CANONICALIZE:g}x canonicalize on {name}",
                        "measured": f"{v:.3g}x", "met": v <= PASS_VS_CANONICALIZE})
        v = ps["synthetic"]["linearity_pool3d_pass"]
        out.append({"target": f"pass grows linearly ({ps['synthetic']['growth']}: linearity <= {LINEARITY:g})",
                    "measured": f"{v:.2f}", "met": v <= LINEARITY})
    flax = result.get("flax_c3d")
    if flax:  # inference programs never slower; the train step is reported, not a target
        for p in flax["precisions"]:
            v = p["inference"]["speedup_of_min"]
            what = f"inference program not slower than jax.jit (>= {INFERENCE_VS_JIT:g}x, noise), flax C3D {p['precision']}"
            if p["inference"]["forward_output_calls"] == 0:
                out.append(_same_program(what, v))
            else:
                out.append({"target": what, "measured": f"{v:.3g}x", "met": v >= INFERENCE_VS_JIT})
    return out


def targets_table(items: list[dict]) -> list[str]:
    return _table(["target", "measured", "met"], [[t["target"], t["measured"], "yes" if t["met"] else "**no**"]
                                                  for t in items])


QUICK_NOTE = ("Ratios of medians; above 1: pool3d_pass.jit is faster. \"gradient only\" is what jax.grad of a "
              "loss runs, \"forward + gradient\" what a training step runs for each pooling layer. Whole steps gain "
              "less than their pools: the convolutions take most of a step. Every shape, section and target: "
              "make bench.")
QUICK_WIDTH = 110  # the note's lines


def _diffs(checks: dict, *prefixes: str) -> list[float]:
    return [v for k, v in checks.items() if k.startswith(prefixes) and isinstance(v, float)]


def _agreement(diffs: list[float], flags: list[bool], bf16_diffs: list[float] = ()) -> str:
    """"equal" (every difference 0, every bit-identical flag true), else what differs."""
    if any(flag is False for flag in flags):
        return "**differ**"
    if not any(diffs) and not any(bf16_diffs):
        return "equal"
    if any(diffs):
        return f"**differ** (max abs diff {max(diffs):.2g})"
    return f"bf16 within {max(bf16_diffs):.2g} (summed in f32)"


def _median_ms(stats: dict | None) -> str:
    if stats is None:
        return "n/a"
    return f"{stats['median_ms']:.0f}" if stats["median_ms"] >= 100 else f"{stats['median_ms']:.3g}"


def quick_rows(result: dict) -> list[list[str]]:
    """The speed table of a quick run: a row per layer and job (user view), then the training step.

    Columns: each variant's median ms, the ratios of medians, and whether
    pool3d_pass's results equal XLA's (exactly; bf16 gradients of overlapping
    windows differ by rounding, the kernels summing in f32: docs/contract.md).
    """
    rows = []
    for case in (result.get("user_view") or {}).get("cases", []):
        for job in case["jobs"]:
            ms, ratios = job["ms"], job["ratios_of_median"]
            diffs = _diffs(job["checks"], "pool3d_")
            bf16 = "bf16" in case["case"]
            rows.append([case["case"], job["job"], _median_ms(ms["xla"]), _median_ms(ms["pool3d"]),
                         _median_ms(ms.get("torch")), _x(ratios.get("xla_vs_pool3d")), _x(ratios.get("torch_vs_pool3d")),
                         _agreement([] if bf16 else diffs, [], diffs if bf16 else [])])
    step = result.get("train_step")
    if step:
        ms = step["ms"]
        shape = ",".join(map(str, step["input_shape"]))
        rows.append([f"training step, 3-D CNN ({shape})", "conv + pool, gradients, SGD", _median_ms(ms["jax_jit"]),
                     _median_ms(ms["pool3d_pass_jit"]), "n/a", _x(step["speedup_of_median"]), "n/a",
                     _agreement([step["loss_abs_diff"], step["updated_params_max_abs_diff"]], [step["same_loss"]])])
    return rows


def quick_lines(result: dict) -> list[str]:
    """A quick run's output: the machine, the speed table, the note; other sections asked for, as in a full run."""
    import textwrap

    m = result["machine"]
    torch = m.get("torch")
    lines = [f"Quick run on {m['cpu_model']}, {m['cpus_usable']} cpus; python {m['python']}, jax {m['jax']}, "
             f"torch {torch or 'not installed (make bench-quick TORCH=1)'}; {m['date']}, {result['wall_s']:.0f} s", "",
             "Median ms of interleaved runs:", ""]
    lines += _table(["layer", "job", "XLA", "pool3d_pass.jit", "PyTorch", "XLA / pool3d_pass.jit",
                     "PyTorch / pool3d_pass.jit", "results vs XLA"], quick_rows(result))
    lines += ["", *textwrap.wrap(QUICK_NOTE, QUICK_WIDTH)]
    return lines


def render(result: dict) -> str:
    """A full run's tables and target verdicts; a quick run's speed table (quick_lines), then the tables of any
    other section it ran, without verdicts."""
    quick = result.get("mode") == "quick"
    m = result["machine"]
    bw = result.get("copy_bandwidth")
    if quick:
        lines = quick_lines(result) if result.get("user_view") or result.get("train_step") else []
    else:
        lines = [f"Machine: {m['cpu_model']}, {m['cpus_usable']} cpus usable, {m['memory_gib']} GiB; "
                 f"python {m['python']}, jax {m['jax']}, jaxlib {m['jaxlib']}, torch {m['torch']}; "
                 f"{m['date']}; mode {result['mode']}, {result['wall_s']:.0f} s"]
        if bw:
            lines.append(f"Copy bandwidth (floor): {bw['gb_per_s']:.3g} GB/s read+write ({bw['method']})")
        if result.get("load_average") is not None:
            la = result["load_average"]
            lines.append(f"Load average (1, 5, 15 min) at start {la['start']}, at end {la.get('end')}")
    # Runs stored before the user-view sections existed number their sections from 1 with the kernels.
    number = iter(range(1, 10))
    if result.get("user_view") and not quick:
        lines += ["", f"### {next(number)}. The user's view: one pooling layer's jobs (ms: min (median); "
                  "ratios: of mins (of medians))", ""]
        lines += user_table(result["user_view"])
    if result.get("forward"):
        lines += ["", f"### {next(number)}. The forward alone (ms: min (median); ratios: of mins (of medians))", ""]
        lines += forward_table(result["forward"])
    if result.get("pool_backward"):
        lines += ["", f"### {next(number)}. Max-pool backward kernels alone (ms: min (median); ratios of min times)",
                  ""]
        lines += pool_table(result["pool_backward"])
    if result.get("train_step") and not quick:
        lines += ["", f"### {next(number)}. 3-D CNN training step (ms: min (median))", ""]
        lines += train_table(result["train_step"])
    if result.get("pass_speed"):
        lines += ["", f"### {next(number)}. Pass time (ms: min (median))", ""]
        lines += pass_table(result["pass_speed"])
    if result.get("flax_c3d"):
        lines += ["", f"### {next(number)}. Flax C3D-style model, NDHWC: train and inference steps "
                  "(ms: min (median); ratios: of mins (of medians))", ""]
        lines += flax_table(result["flax_c3d"])
    items = [] if quick else targets(result)
    if items:
        lines += ["", "### Targets", ""] + targets_table(items)
    return "\n".join(lines)
