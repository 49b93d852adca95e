"""`make neuron-check`: the neuron binding on a Trn2/Trn3 host (Neuron SDK 2.33+); elsewhere one skip line.

Run from the repository root in the Neuron SDK's JAX environment (docs/neuron.md):

    make neuron-check                       # python3 -m checks.neuron_check
    python3 -m checks.neuron_check --dry-run   # the same steps on XLA:CPU, reference binding

Its cases and oracles are the tests' (cases/, oracles/): the fixtures and the
bench's quick cases, the kernel's numpy transcription, and the neuron
binding's deviation rule and input draw (oracles/neuron_deviations.py).

1. Layers. Every backward call the pass makes of the fixtures and of the bench's
   quick cases (their shape, dtype, kernel_size, stride, padding and layout, read
   from the neutral calls of a recompute rewrite) runs through the neuron binding
   on the device, i.e. the NKI kernel, twice: tie-heavy finite inputs, and inputs
   with NaN, +-inf and -0 in the input and the gradient. Each result is held
   against the numpy transcription of the kernel (`oracles/nki_max_pool_backward_numpy.py`:
   the same values and zero signs expected) and against the contract's float64
   reference (only the deviations docs/contract.md lists for the neuron binding:
   `classify` of oracles/neuron_deviations.py).
2. Programs. Every fixture and bench quick case (gradient only), original
   (neuronx-cc's select_and_scatter) and rewritten for neuron, runs on the device; both against the program rewritten
   with the reference binding on XLA:CPU (the contract, executed).
3. Timing. Each program, original against rewritten, and each layer's kernel
   call on the device: median of `--repeats` runs after one warm-up.

Prints a table and writes a JSON report (`--out`); exit status 1 if a numerics
check failed. Without the SDK or a Neuron device: one line "neuron-check
skipped: ...", exit status 0.
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import statistics
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CALL = re.compile(
    r"custom_call @pool3d\.max_pooling_3d_backward\((?P<operands>[^)]*)\)\s*\{(?P<attributes>.*?)\}\s*:\s*"
    r"\((?P<types>[^)]*)\)\s*->\s*tensor<(?P<result>[^>]*)>"
)
DENSE = re.compile(r"(kernel_size|stride|padding) = dense<(\[[^\]]*\]|-?\d+)>")
FORMAT = re.compile(r'(data_format|output_format) = "(\w+)"')
ELEMENT = {"f32": "float32", "bf16": "bfloat16", "f16": "float16"}


def skip_reason(dry_run: bool) -> str | None:
    """Why the check cannot run here (None: it can)."""
    if dry_run:
        return None
    try:
        from pool3d_pass.bindings.neuron import sdk
    except ImportError as error:  # a Python without JAX or pool3d_pass's dependencies
        return f"this Python cannot import pool3d_pass: {error}"
    problems = sdk.problems()
    if problems:
        return "; ".join(problems)
    import jax

    try:
        devices = jax.devices("neuron")
    except RuntimeError as error:
        return f"JAX sees no neuron device ({' '.join(str(error).split())[:120]})"
    return None if devices else "JAX sees no neuron device"


def backward_calls(text: str) -> list[dict]:
    """The backward calls of a recompute rewrite of `text`: shapes, dtype and attributes."""
    import pool3d_pass

    neutral, _ = pool3d_pass.rewrite_text(text, strategy="recompute")
    calls = []
    for match in CALL.finditer(" ".join(neutral.split())):
        attributes = match["attributes"]
        dense = {name: json.loads(value) for name, value in DENSE.findall(attributes)}
        triples = {name: tuple(v if isinstance(v, list) else [v] * 3) for name, v in dense.items()}
        formats = dict(FORMAT.findall(attributes))
        types = re.findall(r"tensor<([^>]*)>", match["types"])
        *grad_dims, element = types[0].split("x")
        *input_dims, _ = types[1].split("x")
        calls.append({
            "grad_shape": tuple(int(d) for d in grad_dims),
            "input_shape": tuple(int(d) for d in input_dims),
            "dtype": ELEMENT[element],
            "kernel_size": triples["kernel_size"],
            "stride": triples["stride"],
            "padding": triples["padding"],
            "data_format": formats["data_format"],
        })
    return calls


def layer_inputs(call: dict, specials: bool, seed: int):
    """(x, g, y, reference, geometry) in NCDHW, as the transcription test draws them (oracles/neuron_deviations.py)."""
    from oracles.neuron_deviations import inputs

    shape = call["input_shape"]
    ncdhw = shape if call["data_format"] == "NCDHW" else (shape[0], shape[4], *shape[1:4])
    dtype = {"float32": "f32", "bfloat16": "bf16", "float16": "f16"}[call["dtype"]]
    problem = ("NCDHW", dtype, call["kernel_size"], call["stride"], call["padding"], ncdhw, None,
               seed, "both" if specials else "none")
    return inputs(problem)


def check_layer(call: dict, device, binding_function, dry_run: bool, repeats: int) -> dict:
    import jax
    import numpy as np

    from oracles.neuron_deviations import classify
    from oracles.nki_max_pool_backward_numpy import max_pooling_3d_backward as transcription

    layout = call["data_format"]
    to_layout = (lambda a: np.moveaxis(a, 1, -1)) if layout == "NDHWC" else (lambda a: a)
    from_layout = (lambda a: np.moveaxis(a, -1, 1)) if layout == "NDHWC" else (lambda a: a)
    attributes = {k: call[k] for k in ("kernel_size", "stride", "padding", "data_format")}
    kernel = jax.jit(functools.partial(binding_function, **attributes))
    row = {"call": {k: list(v) if isinstance(v, tuple) else v for k, v in call.items()}, "checks": []}
    for specials in (False, True):
        with np.errstate(invalid="ignore"):  # inf + -inf in the reference's sums: NaN, as the contract says
            x, g, y, reference, geometry = layer_inputs(call, specials, seed=len(row["checks"]))
        operands = [jax.device_put(to_layout(a), device) for a in (g, x, y)]
        got = from_layout(np.asarray(kernel(*operands)))
        check = {"specials": specials}
        try:
            check["deviations"] = classify(x, g, y, reference, geometry, got)
            check["contract"] = "ok"
        except AssertionError as error:
            check["contract"] = f"FAILED: {error}"
        want = from_layout(np.asarray(through_binding(call, to_layout(g), to_layout(x), to_layout(y), transcription)))
        same = (got.view(np.uint16 if got.dtype.itemsize == 2 else np.uint32)
                == want.view(np.uint16 if want.dtype.itemsize == 2 else np.uint32)) | (np.isnan(got) & np.isnan(want))
        check["transcription"] = "ok" if same.all() else f"{int((~same).sum())} of {same.size} elements differ"
        if dry_run:
            check["transcription"] += " (dry run: the reference binding, not the kernel)"
        row["checks"].append(check)
    timing_inputs = [jax.device_put(to_layout(a), device) for a in layer_inputs(call, False, 0)[:3]]
    row["kernel_ms"] = median_ms(lambda: kernel(timing_inputs[1], timing_inputs[0], timing_inputs[2]), repeats)
    return row


def through_binding(call, g, x, y, transcription):
    """The transcription run as the binding runs the kernel (trimmed input, zero-padded result)."""
    import numpy as np

    from pool3d_pass.bindings import neuron

    axes = (2, 3, 4) if call["data_format"] == "NCDHW" else (1, 2, 3)
    limit = list(x.shape)
    for axis, k, s, p in zip(axes, call["kernel_size"], call["stride"], call["padding"]):
        limit[axis] = neuron.covered_extent(x.shape[axis], k, s, p)
    result = transcription(g, x[tuple(slice(0, n) for n in limit)], y, call["kernel_size"], call["stride"],
                           call["padding"], call["data_format"], call["data_format"])
    return np.pad(result, [(0, full - n) for full, n in zip(x.shape, limit)])


def median_ms(run, repeats: int) -> float:
    import jax

    jax.block_until_ready(run())
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(run())
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def run_program(text: str, arguments, client, device, repeats: int = 0):
    """Compile `text` for `device` and run its main; (results, median ms or None)."""
    import jax
    import numpy as np
    from jax._src.lib import xla_client
    from jax.extend import backend

    executable = client.compile_and_load(text, xla_client.DeviceList((device,)),
                                         backend.get_compile_options(num_replicas=1, num_partitions=1))
    buffers = [jax.device_put(a, device) for a in arguments]

    def once():
        return executable.execute_sharded(buffers).disassemble_into_single_device_arrays()

    results = [np.asarray(shards[0]) for shards in once()]
    return results, (median_ms(once, repeats) if repeats else None)


def check_program(name: str, text: str, arguments, client, device, dry_run: bool, repeats: int) -> dict:
    """One program, original and rewritten, on the device, against the contract executed on XLA:CPU."""
    import numpy as np

    import pool3d_pass
    from oracles.xla_runner import run_stablehlo

    rewritten, report = pool3d_pass.rewrite_text(text, target="reference" if dry_run else "neuron")
    contract, _ = pool3d_pass.rewrite_text(text, target="reference")
    want = run_stablehlo(contract, arguments)
    original, original_ms = run_program(text, arguments, client, device, repeats)
    got, rewritten_ms = run_program(rewritten, arguments, client, device, repeats)

    def worst(results):
        """Largest |difference| / max(1, |contract|) over the results."""
        errors = [np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))
                  / np.maximum(1.0, np.abs(np.asarray(b, np.float64))) for a, b in zip(results, want)]
        return max((float(np.max(e, initial=0.0)) for e in errors), default=0.0)

    return {"program": name, "rewritten": report.rewritten, "original_vs_contract": worst(original),
            "rewritten_vs_contract": worst(got), "original_ms": original_ms, "rewritten_ms": rewritten_ms}


def programs_to_run(entries, platform: str, bench_cases: int | None = None) -> list[tuple[str, str, list]]:
    """(name, text, arguments): the fixtures, and the bench's quick cases (gradient only) lowered for `platform`."""
    import jax

    from cases.fixtures import fixture_text, tie_heavy_inputs
    from cases.pooling import JOBS, QUICK_CASES, inputs, jax_job, np_dtype, pool_fn

    programs = [(entry["name"], fixture_text(entry["name"]), tie_heavy_inputs(entry)) for entry in entries]
    for case in QUICK_CASES[:bench_cases]:
        x = jax.ShapeDtypeStruct(case.shape, np_dtype(case.dtype))
        g = jax.ShapeDtypeStruct(case.out_shape(), np_dtype(case.dtype))
        text = jax.jit(jax_job(JOBS[0], pool_fn(case))).trace(x, g).lower(lowering_platforms=(platform,)).as_text()
        programs.append((f"bench {case.name}, {JOBS[0]}", text, list(inputs(case))))
    return programs


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m checks.neuron_check", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="XLA:CPU and the reference binding: checks the steps")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--out", default=str(ROOT / "build" / "neuron-check.json"))
    parser.add_argument("--fixtures", default="", help="comma-separated fixture names (default: all)")
    parser.add_argument("--bench-cases", type=int, default=None, help="the first N of the bench's quick cases (default: all)")
    args = parser.parse_args(argv)

    reason = skip_reason(args.dry_run)
    if reason is not None:
        print(f"neuron-check skipped: no Neuron device/SDK ({reason})")
        return 0

    from jax.extend import backend

    from cases.fixtures import ENTRIES
    from pool3d_pass.bindings import registry

    platform = "cpu" if args.dry_run else "neuron"
    client = backend.get_backend(platform)
    device = client.local_devices()[0]
    binding = registry.binding_for("reference" if args.dry_run else "neuron")
    binding_function = binding.function()
    wanted = {name for name in args.fixtures.split(",") if name}
    entries = [e for e in ENTRIES if not wanted or e["name"] in wanted]

    programs_in = programs_to_run(entries, platform, args.bench_cases)
    calls, programs = {}, []
    for _, text, _ in programs_in:
        for call in backward_calls(text):
            calls.setdefault(json.dumps(call, sort_keys=True, default=list), call)

    failed = False
    layers = []
    for call in calls.values():
        try:
            row = check_layer(call, device, binding_function, args.dry_run, args.repeats)
        except Exception as error:  # noqa: BLE001 - one layer's failure is reported, the rest still run
            row = {"call": call, "error": f"{type(error).__name__}: {error}", "trace": traceback.format_exc()}
        # A dry run's reference binding meets the contract exactly: there the deviations
        # (specials) and the transcription are reported, not judged.
        judged = [c for c in row.get("checks", ()) if not (args.dry_run and c["specials"])]
        bad = "error" in row or any(
            c["contract"] != "ok" or (not args.dry_run and c["transcription"] != "ok") for c in judged
        )
        failed |= bad
        layers.append(row)
        print(f"{'FAIL' if bad else 'ok  '} layer {call['data_format']} {call['dtype']} {call['input_shape']} "
              f"k{call['kernel_size']} s{call['stride']} p{call['padding']}: "
              + (row.get("error") or "; ".join(f"{c['contract']}, transcription {c['transcription']}"
                                                for c in row["checks"]) + f"; kernel {row['kernel_ms']:.3f} ms"))
    for name, text, arguments in programs_in:
        try:
            row = check_program(name, text, arguments, client, device, args.dry_run, args.repeats)
            bad = row["rewritten_vs_contract"] > 2e-2
        except Exception as error:  # noqa: BLE001 - one program's failure is reported, the rest still run
            row, bad = {"program": name, "error": f"{type(error).__name__}: {error}"}, True
        failed |= bad
        programs.append(row)
        print(f"{'FAIL' if bad else 'ok  '} program {name}: "
              + (row.get("error") or f"{row['rewritten']} rewritten; |rewritten - contract| "
                 f"{row['rewritten_vs_contract']:.3g}, |original - contract| {row['original_vs_contract']:.3g} "
                 f"(relative); {row['original_ms']:.3f} ms -> {row['rewritten_ms']:.3f} ms"))

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"platform": platform, "dry_run": args.dry_run, "layers": layers,
                               "programs": programs}, indent=1, default=str))
    print(f"neuron-check: {len(layers)} layers, {len(programs)} programs, "
          f"{'FAILED' if failed else 'passed'}; report in {out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
