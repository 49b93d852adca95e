"""The CUDA kernels' static speed budget (`make gpu-model`): predicted time per bench row from their SASS.

Why: the kernels' speed on the bench's rows can be bounded before a device
run, from what they issue per element and what they must move, and set
beside the byte floor and XLA:GPU's measured time (issue 46's targets: at
most 1.3x the floor on every 1 GiB training row).

What it counts: the kernels a job launches (`job_roles`, `find_kernel`: the
kernel table), each kernel's main-loop iteration by issue pipe (checks/sass.py;
`path`: a specialised kernel's cheapest path, a generic kernel's heaviest with
its tap loops at their `trips`), how many iterations (`units`) and bytes each
launch has on the row. A launch's predicted time is

    max(bytes / bandwidth, warps x max(total / 4, alu / 2, fma / 2, xu / 0.5, memory / 1) / (SMs x clock))
    + LAUNCH_US,

warps = units / 32, counts per iteration, rates in warp-instructions per clock
per SM (`Machine`). The rows (shape, job, byte floor, XLA:GPU's time) come from
the newest stored device run, checks/device_check/results/gpu-*.jsonl: the floor's bytes are
its floor_ms times its measured copy bandwidth. These are predictions, not
measurements.

    python -m checks.gpu_model [--gpu h200|h100] [--results FILE] [--cubin FILE ...] [--markdown]
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import json
import math
import os
import re
import sys
import textwrap

from checks import sass
from pool3d_pass.contract import pooled_extent

LAUNCH_US = 3.0  # per kernel: launch, ramp-up and tail of a grid that fills the GPU (an assumption)
WARP = 32
RESULTS_GLOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "device_check", "results", "gpu-*.jsonl")
JOB_NAMES = ("gradient only", "forward + gradient", "inference")


@dataclasses.dataclass(frozen=True)
class Machine:
    """A Hopper GPU's figures. SMs and the 1.98 GHz boost clock: NVIDIA's H100 SXM datasheet (the H200 is the
    same GH100 chip); issue: one warp-instruction per clock in each of an SM's 4 partitions; pipe rates from the
    CUDA C++ Programming Guide's arithmetic-instruction table for compute capability 9.0 (64 lanes a clock for
    ALU and integer multiply-add, 16 for conversions and MUFU; float adds/fmas, 128 there, are counted at the
    integer rate); memory pipe 32 lanes a clock (the SM's 32 load/store units, H100 whitepaper); bandwidth:
    the device-to-device copy measured in checks/device_check/results (H200) or its usual figure (H100)."""

    name: str
    sms: int
    ghz: float
    bandwidth: float  # bytes read + written per second
    rates: tuple[tuple[str, float], ...] = (("total", 4.0), ("alu", 2.0), ("fma", 2.0), ("xu", 0.5),
                                            ("memory", 1.0))


GPUS = {
    "h200": Machine("NVIDIA H200", sms=132, ghz=1.98, bandwidth=4.25e12),
    "h100": Machine("NVIDIA H100", sms=132, ghz=1.98, bandwidth=3.0e12),
}


# --- the bench's rows -----------------------------------------------------------------

_CASE = re.compile(r"^(NCDHW|NDHWC) (f32|bf16) \(([\d, ]+)\) k([\dx]+) s([\dx]+)(?: p([\dx]+))?$")


@dataclasses.dataclass(frozen=True)
class Row:
    """One timed bench row: a pooling problem and a job."""

    case: str
    job: str
    layout: str
    dtype: str
    shape: tuple[int, ...]
    kernel: tuple[int, int, int]
    stride: tuple[int, int, int]
    padding: tuple[int, int, int]
    size_class: str  # "large" (the 1 GiB rows) or "small" (32 MiB)
    floor_bytes: float
    xla_ms: float | None
    measured_on: str

    @property
    def itemsize(self) -> int:
        return 4 if self.dtype == "f32" else 2

    @property
    def spatial(self) -> tuple[int, ...]:
        return self.shape[1:4] if self.layout == "NDHWC" else self.shape[2:5]

    @property
    def n(self) -> int:
        return math.prod(self.shape)

    @property
    def m(self) -> int:
        out = [pooled_extent(d, k, s, p, p) for d, k, s, p in zip(self.spatial, self.kernel, self.stride, self.padding)]
        return self.n // math.prod(self.spatial) * math.prod(out)

    @property
    def overlap(self) -> bool:
        return any(s < k for k, s in zip(self.kernel, self.stride))


def _triple(text: str | None) -> tuple[int, int, int]:
    if text is None:
        return (0, 0, 0)
    parts = tuple(int(v) for v in text.split("x"))
    return parts * 3 if len(parts) == 1 else parts


def parse_case(name: str) -> dict:
    """Layout, dtype, shape and window of a bench case name (bench/cases.py's Case.name: uniform padding)."""
    m = _CASE.match(name)
    if m is None:
        raise ValueError(f"not a rank-5 bench case name: {name!r}")
    layout, dtype, shape, k, s, p = m.groups()
    return dict(layout=layout, dtype=dtype, shape=tuple(int(v) for v in shape.split(",")), kernel=_triple(k),
                stride=_triple(s), padding=_triple(p))


def newest_results(gpu: str = "h200") -> str | None:
    """The newest stored device run (by the date in its name), preferring one measured on `gpu`."""
    found = glob.glob(RESULTS_GLOB)
    mine = [f for f in found if gpu in os.path.basename(f)] or found

    def stamp(path: str) -> str:
        m = re.search(r"(\d{4}-\d{2}-\d{2}-\d{4})", os.path.basename(path))
        return m.group(1) if m else ""

    return max(mine, key=stamp) if mine else None


def load_rows(path: str) -> list[Row]:
    """The timing rows of a stored device run, for JOB_NAMES."""
    try:
        with open(path, encoding="utf-8") as f:
            records = [json.loads(line) for line in f if line.strip()]
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"--results {path}: {error}") from None
    bandwidth = next((r.get("bytes_per_s") for r in records if r.get("kind") == "bandwidth"), None)
    device = next((r.get("device_kind") for r in records if r.get("kind") == "machine"), "unknown GPU")
    if not bandwidth:
        raise ValueError(f"--results {path}: no measured copy bandwidth (a 'bandwidth' record)")
    rows = []
    for r in records:
        if r.get("kind") != "timing" or r.get("job") not in JOB_NAMES or r.get("floor_ms") is None:
            continue
        xla = r.get("ms", {}).get("xla", {}).get("min_ms")
        rows.append(Row(case=r["case"], job=r["job"], **parse_case(r["case"]), size_class=r.get("size_class", "small"),
                        floor_bytes=r["floor_ms"] / 1e3 * bandwidth, xla_ms=xla, measured_on=device))
    if not rows:
        raise ValueError(f"--results {path}: no timing rows for {', '.join(JOB_NAMES)}")
    return rows


# --- which kernels a job launches -------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Role:
    """A launch's part in a job: "window" (mode 0 forward y + indices, 1 forward_output y, 2 indices only,
    3 select), "gather" (the gradient from indices) or "fused" (mode 0 backward_from_input, 1 backward)."""

    kind: str
    mode: int | None = None

    def bytes(self, row: Row) -> int:
        """Each operand read once, each result written once (int16 indices)."""
        n, m, s = row.n, row.m, row.itemsize
        return {("window", 0): n * s + m * s + 2 * m, ("window", 1): n * s + m * s, ("window", 2): n * s + 2 * m,
                ("window", 3): n * s + m * s + 2 * m, ("gather", None): m * s + 2 * m + n * s,
                ("fused", 0): 2 * n * s + m * s, ("fused", 1): 2 * n * s + 2 * m * s}[(self.kind, self.mode)]


def job_roles(job: str, row: Row) -> list[Role]:
    """The launches of a job with strategy `indices` (what `auto` picks), as launch_plan.h's PlanCall plans them."""
    if job == "inference":
        return [Role("window", 1)]
    if job == "forward + gradient":
        return [Role("window", 0), Role("gather")]
    if not row.overlap:
        return [Role("fused", 0)]  # falls back to the pair where no specialised class serves (find_kernel)
    return [Role("window", 2), Role("gather")]


# The kernel table. Templates (namespace pool3d::gpu, kernels.cu): WindowKernel<T, Win, L, V, Mode>,
# GatherKernel<T, Win, L, V>, FusedKernel<T, Win, L, V, Mode>; T pool3d::F32T / BF16T; Win a specialised
# Fixed<KD,KH,KW,SD,SH,SW,PD,PH,PW> with L 0 (NCDHW) or 1 (NDHWC) and one vector width V, or Generic<int> /
# Generic<long> (int64 offsets) with L 2 and V 1 (units.h). Window Mode: 0 the first maximum (forward,
# forward_output, indices only: the roles' modes 0-2), 3 the selection; fused Mode: 0 from the input, 1 from
# the output.
_TEMPLATES = {"window": "WindowKernel", "gather": "GatherKernel", "fused": "FusedKernel"}
_TEMPLATE_MODE = {("window", 0): 0, ("window", 1): 0, ("window", 2): 0, ("window", 3): 3, ("fused", 0): 0,
                  ("fused", 1): 1, ("gather", None): None}
_ELEMENT_TYPE = {"f32": "F32T", "bf16": "BF16T"}
GENERIC_LAYOUT = 2
NARROW_LIMIT = 2**31  # launch_plan.h: offsets inside one launch (a batch item for Generic) stay below it


def template_args(name: str, template: str) -> list[str] | None:
    """The template arguments of `template<...>` in a demangled name, split at top-level commas."""
    m = re.search(rf"\b{template}<", name)
    if m is None:
        return None
    depth, start, args = 1, m.end(), []
    for i in range(m.end(), len(name)):
        c = name[i]
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
            if depth == 0:
                args.append(name[start:i].strip())
                return args
        elif c == "," and depth == 1:
            args.append(name[start:i].strip())
            start = i + 1
    return None


def _int(text: str) -> int | None:
    m = re.fullmatch(r"(?:\([\w:]+\))?(-?\d+)[ulUL]*", text.strip())
    return int(m.group(1)) if m else None


def find_kernel(functions, role: Role, row: Row) -> tuple[sass.Function, dict] | None:
    """The kernel a role runs on a row: the row's Fixed class (its one vector width) where built, else Generic."""
    window = (*row.kernel, *row.stride, *row.padding)
    layout = {"NCDHW": 0, "NDHWC": 1}[row.layout]
    wide = row.n // row.shape[0] >= NARROW_LIMIT
    mode = _TEMPLATE_MODE[(role.kind, role.mode)]
    fixed_fn = generic_fn = None
    for fn in functions:
        args = template_args(fn.name, _TEMPLATES[role.kind])
        if not args or len(args) < 4 or args[0].split("::")[-1] != _ELEMENT_TYPE[row.dtype]:
            continue
        if mode is not None and (len(args) < 5 or _int(args[4]) != mode):
            continue
        fixed = template_args(args[1], "Fixed")
        if fixed is not None and _int(args[2]) == layout and tuple(_int(a) for a in fixed) == window:
            fixed_fn = (fn, {"V": _int(args[3]) or 1, "specialised": True})
        elif args[1].endswith(f"Generic<{'long' if wide else 'int'}>") and _int(args[2]) == GENERIC_LAYOUT:
            generic_fn = (fn, {"V": 1, "specialised": False})
    return fixed_fn or generic_fn


def units(role: Role, row: Row, args: dict) -> float:
    """Loop iterations, as launch_plan.h's PlanStep counts them: specialised, V outputs (window) or V windows
    (fused; gather without overlap) a unit, and for an overlapping gather a block of input positions (2 along
    each axis whose k > 1: D, H, and W in NDHWC; V along W in NCDHW) by V channels (NDHWC); generic, one
    output, or one input element (gather)."""
    if not args["specialised"]:
        return row.n if role.kind == "gather" else row.m
    if role.kind != "gather" or not row.overlap:
        return row.m / args["V"]
    blocks = [math.ceil(d / (2 if k > 1 else 1)) for d, k in zip(row.spatial, row.kernel)]
    if row.layout == "NDHWC":
        return row.shape[0] * math.prod(blocks) * (row.shape[-1] / args["V"])
    return row.shape[0] * row.shape[1] * blocks[0] * blocks[1] * (row.spatial[2] / args["V"])


def trips(role: Role, row: Row, args: dict) -> dict[int, float]:
    """Inner-loop trips by depth (1 = D): the generic kernels loop over taps (window) or covering windows
    (gather, k / s an axis on average); a specialised kernel's loops are its rare paths (NaN)."""
    if args["specialised"]:
        return {}
    if role.kind == "gather":
        return {d + 1: k / s for d, (k, s) in enumerate(zip(row.kernel, row.stride))}
    return {d + 1: float(k) for d, k in enumerate(row.kernel)}


def path(args: dict) -> str:
    """The path a unit costs: a specialised kernel's cheapest one (an interior window, no NaN: its border and
    NaN branches skipped); a generic kernel's heaviest (its tap loops are on it)."""
    return "lightest" if args["specialised"] else "heaviest"


# --- the model -------------------------------------------------------------------------


@dataclasses.dataclass
class Launch:
    role: Role
    function: sass.Function
    args: dict
    units: float
    per_unit: dict[str, float]
    bytes: int
    memory_ms: float
    issue_ms: float
    bound: str
    worst_ms: float  # every branch on its heavier side

    @property
    def ms(self) -> float:
        return max(self.memory_ms, self.issue_ms) + LAUNCH_US / 1e3

    @property
    def tag(self) -> str:
        letter = {"window": "W", "gather": "G", "fused": "F"}[self.role.kind]
        mode = "" if self.role.mode is None else str(self.role.mode)
        kind = "s" if self.args["specialised"] else "g"
        return f"{letter}{mode}{kind}" + (f"x{self.args['V']}" if self.args["V"] > 1 else "")


def launch(functions, role: Role, row: Row, machine: Machine) -> Launch:
    found = find_kernel(functions, role, row)
    if found is None:
        what = f"no {role.kind} kernel" + ("" if role.mode is None else f" of mode {role.mode}")
        raise LookupError(f"{what} for {row.case} in the SASS", what)
    fn, args = found
    loop_trips = trips(role, row, args)
    per_unit = {p: v / fn.unroll for p, v in fn.iteration_cost(loop_trips, path(args)).items()}
    worst = {p: v / fn.unroll for p, v in fn.iteration_cost(loop_trips, "heaviest").items()}
    n_units = units(role, row, args)
    nbytes = role.bytes(row)
    memory_ms = nbytes / machine.bandwidth * 1e3
    issue_ms, bound_pipe = _issue_ms(per_unit, n_units, machine)
    worst_ms = max(memory_ms, _issue_ms(worst, n_units, machine)[0]) + LAUNCH_US / 1e3
    bound = "bytes" if memory_ms >= issue_ms else ("issue" if bound_pipe == "total" else bound_pipe)
    return Launch(role, fn, args, n_units, per_unit, nbytes, memory_ms, issue_ms, bound, worst_ms)


def _issue_ms(per_unit: dict[str, float], n_units: float, machine: Machine) -> tuple[float, str]:
    clocks = {pipe: per_unit.get(pipe, 0.0) / rate for pipe, rate in machine.rates}
    pipe = max(clocks, key=clocks.get)
    return n_units / WARP * clocks[pipe] / (machine.sms * machine.ghz * 1e9) * 1e3, pipe


def predict(functions, row: Row, machine: Machine) -> list[Launch]:
    roles = job_roles(row.job, row)
    if roles[0].kind == "fused" and find_kernel(functions, roles[0], row) is None:
        roles = [Role("window", 2), Role("gather")]  # no specialised class: PlanCall's window + gather
    return [launch(functions, role, row, machine) for role in roles]


# --- printing --------------------------------------------------------------------------

SHOWN_PIPES = ("alu", "fma", "xu", "memory", "total")
JOB_TAGS = {"gradient only": "grad", "forward + gradient": "fwd+grad", "inference": "infer"}


def short_case(row: Row) -> str:
    """The case name with its shape as AxBx... and its window as k3s2p1."""
    name = re.sub(r"\((.*?)\)", lambda m: m.group(1).replace(", ", "x"), row.case)
    return re.sub(r" (k\S+) (s\S+)(?: (p\S+))?$", lambda m: " " + "".join(g for g in m.groups() if g), name)


def kernel_name(fn: sass.Function) -> str:
    """The demangled name without its parameter list."""
    name, depth = fn.name, 0
    for i in range(len(name) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(name[i], 0)
        if depth == 0 and name[i] == "(":
            return name[:i].removeprefix("void ")
    return name


def _ratio(v: float) -> str:
    return f"{v:4.2f}x" if v < 10 else f"{v:4.1f}x"


def _count(v: float) -> str:
    return f"{v:4.1f}" if v < 100 else f"{v:4.0f}"


def _ms(v: float | None) -> str:
    return "    -" if v is None else (f"{v:5.3f}" if v < 10 else f"{v:5.2f}")


def markdown(functions, rows: list[Row], machine: Machine) -> list[str]:
    """The rows as a Markdown table (docs/gpu.md quotes it)."""
    lines = ["| case | job | kernels | instructions / element | bound | predicted ms | worst ms | floor ms | "
             "XLA ms | predicted / floor | XLA / predicted |", "|" + " --- |" * 11]
    for row in rows:
        launches = predict(functions, row, machine)
        per_elem = sum(l.units * l.per_unit["total"] for l in launches) / row.n
        pred, worst = sum(l.ms for l in launches), sum(l.worst_ms for l in launches)
        floor = row.floor_bytes / machine.bandwidth * 1e3
        xla = row.xla_ms if machine.name.split()[-1] in row.measured_on else None
        lines.append(f"| {short_case(row)} | {row.job} | {' + '.join(l.tag for l in launches)} | {per_elem:.1f} | "
                     f"{max(launches, key=lambda l: l.ms).bound} | {pred:.3f} | {worst:.3f} | {floor:.3f} | "
                     f"{'-' if xla is None else f'{xla:.3f}'} | {pred / floor:.2f}x | "
                     f"{'-' if xla is None else f'{xla / pred:.2f}x'} |")
    return lines


def table(functions, rows: list[Row], machine: Machine) -> list[str]:
    head = (f"{'case':<33} {'job':<8} {'kernels':<10} {'alu':>4} {'fma':>4} {'xu':>4} {'mem':>4} {'all':>4} "
            f"{'bound':<5} {'pred':>5} {'worst':>5} {'floor':>5} {'XLA':>5} {'p/fl':>5} {'XLA/p':>5}")
    lines = [head, "-" * len(head)]
    for row in rows:
        try:
            launches = predict(functions, row, machine)
        except LookupError as error:
            lines.append(f"{short_case(row):<33} {JOB_TAGS[row.job]:<8} {error.args[-1]}")
            continue
        per_elem = {p: sum(l.units * l.per_unit.get(p, 0.0) for l in launches) / row.n for p in SHOWN_PIPES}
        pred = sum(l.ms for l in launches)
        worst = sum(l.worst_ms for l in launches)
        floor = row.floor_bytes / machine.bandwidth * 1e3
        xla = row.xla_ms if machine.name.split()[-1] in row.measured_on else None  # "H200" in "NVIDIA H200"
        bound = max(launches, key=lambda l: l.ms).bound
        lines.append(
            f"{short_case(row):<33} {JOB_TAGS[row.job]:<8} {'+'.join(l.tag for l in launches):<10} "
            + " ".join(_count(per_elem[p]) for p in SHOWN_PIPES)
            + f" {bound:<5} {_ms(pred)} {_ms(worst)} {_ms(floor)} {_ms(xla)} {_ratio(pred / floor)}"
            + (f" {_ratio(xla / pred)}" if xla else "     -"))
    return lines


def kernel_lines(functions, rows: list[Row], machine: Machine) -> list[str]:
    """Each kernel used, once per window (its inner loops' trips), with its roles and its cost per unit."""
    groups: dict[tuple, list] = {}
    for row in rows:
        try:
            launches = predict(functions, row, machine)
        except LookupError:
            continue
        for l in launches:
            entry = groups.setdefault((l.function.name, row.kernel, row.stride), [l, row, []])
            if l.tag not in entry[2]:
                entry[2].append(l.tag)
    lines = []
    for l, row, tags in groups.values():
        counts = " ".join(f"{p} {l.per_unit[p]:.0f}" for p in (*sass.PIPE_NAMES, "total") if l.per_unit.get(p))
        window = f"k{'x'.join(map(str, row.kernel))} s{'x'.join(map(str, row.stride))}"
        how = f"{path(l.args)} path" + (f", inner loops at {window}'s trips" if trips(l.role, row, l.args) else "")
        lines.append(f"  {'/'.join(tags)}: {kernel_name(l.function)}")
        lines.append(f"      per unit ({how}): {counts}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", choices=sorted(GPUS), default="h200", help="the machine model (default h200)")
    parser.add_argument("--results", help="a stored device run (default: the newest checks/device_check/results/gpu-*.jsonl)")
    parser.add_argument("--cubin", action="append", help="read this cubin instead of building the kernels")
    parser.add_argument("--markdown", action="store_true", help="print the 1 GiB rows as a Markdown table only")
    args = parser.parse_args(argv)
    machine = GPUS[args.gpu]
    path = args.results or newest_results(args.gpu)
    if path is None:
        parser.error(f"--results: no stored device run matches {RESULTS_GLOB}")
    try:
        rows = load_rows(path)
    except ValueError as error:
        parser.error(str(error))
    if args.cubin:
        missing = [c for c in args.cubin if not os.path.isfile(c)]
        if missing:
            parser.error(f"--cubin: no such file: {', '.join(missing)}")
    try:
        library = None if args.cubin else sass.fresh_library()
        functions = sass.kernels(cubins=args.cubin or ([library] if library else None))
    except (sass.Unavailable, RuntimeError) as error:
        print(f"gpu-model: {error}", file=sys.stderr)
        return 1
    large = [r for r in rows if r.size_class == "large"]
    small = [r for r in rows if r.size_class != "large"]
    if args.markdown:
        try:
            print("\n".join(markdown(functions, large, machine)))
        except LookupError as error:
            print(f"gpu-model: {error.args[0]}", file=sys.stderr)
            return 1
        return 0
    rates = ", ".join(f"{p} {r:g}" for p, r in machine.rates)
    source = ", ".join(os.path.relpath(c) for c in args.cubin) if args.cubin else (
        os.path.relpath(library) if library else "sm_90a cubins built now")
    header = (
        f"Predicted, not measured: {machine.name}, {machine.sms} SMs, {machine.ghz} GHz, "
        f"{machine.bandwidth / 1e12:.2f} TB/s; warp-instructions per clock per SM: {rates}; "
        f"{LAUNCH_US:g} us per launch. Kernels from {source}. "
        f"Rows, byte floors and XLA:GPU times: {os.path.relpath(path)} (measured on {rows[0].measured_on}). "
        "Jobs (strategy indices): grad = gradient only, fwd+grad = forward + gradient, infer = inference. "
        "Columns: instructions per input element by pipe, all launches; bound: what limits the longest launch "
        "(bytes, issue, or a pipe); pred: specialised kernels on their cheapest path (interior windows, no NaN), "
        "generic ones on their heaviest; worst: every kernel on its heaviest path; ms; XLA only where measured "
        "on this GPU; p/fl = predicted / floor; XLA/p = XLA:GPU / predicted.")
    print(textwrap.fill(header, width=118), end="\n\n")
    for title, part in (("1 GiB rows", large), ("32 MiB rows", small)):
        if part:
            print(title)
            print("\n".join(table(functions, part, machine)))
            print()
    print("Kernels (W window, G gather, F fused; digit: mode; s specialised, g generic; xV vector width):")
    print("\n".join(kernel_lines(functions, rows, machine)))
    missing = []
    for row in rows:
        try:
            predict(functions, row, machine)
        except LookupError as error:
            missing.append(error.args[0])
    if missing:
        print(f"gpu-model: {len(missing)} row(s) without a kernel in checks/gpu_model.py's table, e.g. {missing[0]}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
