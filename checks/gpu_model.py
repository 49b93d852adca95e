"""The CUDA kernels' speed model (`make gpu-model`): predicted time per bench row from their SASS, warp by warp.

Why: the kernels' speed on the bench's rows can be bounded before a device
run, from what each warp issues and waits for and what the rows must move,
and set beside the byte floor and XLA:GPU's measured time (issue 55's
targets: at most 1.3x the floor on every 1 GiB training row, 1.15x on every
inference row, 2x on the Generic path's gradient rows, ReLU-like data within
10% of random data, at 700 ns of memory latency).

What it counts, per launch of a job (`job_roles`; `find_kernel`: the kernel
the launch plan picks, launch_plan.h's class and vector width mirrored by
`vector_width`):
- the path each unit takes, read from the SASS with its source lines
  (checks/sass.py `Function.path_cost`): code under a `// model: TAG` line
  runs only for units of that tag: `interior` / `border` (a window's bodies),
  `rescan` (a window whose maximum is +-0 or NaN, re-read element by element),
  `rescan-y` (the same, only where the launch writes y); untagged code runs
  for every unit, the heaviest way through it (guarded stores included);
- warps: units mapped to warps over the row's real shape (32 consecutive
  units a warp), each warp paying every body any of its lanes takes
  (`warp_classes`); the data decides the rescans (`DATA`);
- a warp's time: its global-load round trips times the latency plus its
  instructions at one SM partition's rates (`Machine.partition_rates`);
- occupancy from ptxas' registers (`occupancy`): resident threads per SM;
  bytes in flight per SM against what Little's law asks;
- a launch takes max(bytes / bandwidth, all warps' instructions at the SM's
  rates, units per resident thread x a warp's time) + LAUNCH_US, at each
  latency of LATENCIES_NS.

The rows (shape, job, byte floor, XLA:GPU's time) come from the newest stored
device run, checks/device_check/results/gpu-*.jsonl (the floor's bytes are
its floor_ms times its measured copy bandwidth), plus `MODEL_ROWS`: shapes the
Generic kernels serve (C3D's NCDHW pools, a 3-channel input, ...), with floors
from their shapes and no XLA time. These are predictions, not measurements.

    python -m checks.gpu_model [--gpu h200|h100] [--results FILE] [--cubin FILE ...] [--markdown]
                               [--record FILE] [--kernels FILE]
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
THREADS = 256  # threads per block: kernels.cu's default (POOL3D_CUDA_THREADS)
LATENCIES_NS = (250.0, 700.0, 800.0)  # global-load latency: L2-like, HBM under load, the issue's top
TARGET_NS = 700.0
RESULTS_GLOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "device_check", "results", "gpu-*.jsonl")
JOB_NAMES = ("gradient only", "forward + gradient", "inference")
# The data a row runs on: "random" (normal draws: no window's maximum is +-0) or "relu" (a ReLU's output with
# dead regions: about half the windows all zero, independent from lane to lane, so every warp holds one).
DATA = ("random", "relu")


@dataclasses.dataclass(frozen=True)
class Machine:
    """A Hopper GPU's figures. SMs and the 1.98 GHz boost clock: NVIDIA's H100 SXM datasheet (the H200 is the
    same GH100 chip); issue: one warp-instruction per clock in each of an SM's 4 partitions; pipe rates from the
    CUDA C++ Programming Guide's arithmetic-instruction table for compute capability 9.0 (64 lanes a clock for
    ALU and integer multiply-add, 16 for conversions and MUFU; float adds/fmas, 128 there, are counted at the
    integer rate); memory pipe 32 lanes a clock (the SM's 32 load/store units, H100 whitepaper); bandwidth:
    the device-to-device copy measured in checks/device_check/results (H200) or its usual figure (H100).
    Occupancy limits (the Programming Guide's table of technical specifications, compute capability 9.0):
    65,536 registers, 64 warps and 32 blocks an SM, registers allocated to a warp in units of 256, at most
    255 a thread."""

    name: str
    sms: int
    ghz: float
    bandwidth: float  # bytes read + written per second
    rates: tuple[tuple[str, float], ...] = (("total", 4.0), ("alu", 2.0), ("fma", 2.0), ("xu", 0.5),
                                            ("memory", 1.0))
    partitions: int = 4
    registers_per_sm: int = 65536
    max_warps: int = 64
    max_blocks: int = 32
    register_unit: int = 256
    max_registers: int = 255

    @property
    def partition_rates(self) -> tuple[tuple[str, float], ...]:
        """Warp-instructions a clock one warp can get from its partition, by pipe."""
        return tuple((p, r / self.partitions) for p, r in self.rates)

    def warp_registers(self, registers: int) -> int:
        return math.ceil(registers * WARP / self.register_unit) * self.register_unit

    def launchable(self, registers: int | None, threads: int) -> bool:
        """Whether a block of `threads` fits the SM's registers (cudaErrorLaunchOutOfResources otherwise)."""
        if registers is None:
            return True
        return registers <= self.max_registers and self.warp_registers(registers) * (threads // WARP) <= \
            self.registers_per_sm

    def occupancy(self, registers: int | None, threads: int = THREADS) -> int:
        """Resident threads per SM for blocks of `threads` (0: cannot launch; unknown registers: the most)."""
        warps = threads // WARP
        blocks = min(self.max_blocks, self.max_warps // warps)
        if registers is not None:
            if not self.launchable(registers, threads):
                return 0
            blocks = min(blocks, self.registers_per_sm // (self.warp_registers(registers) * warps))
        return blocks * threads


GPUS = {
    "h200": Machine("NVIDIA H200", sms=132, ghz=1.98, bandwidth=4.25e12),
    "h100": Machine("NVIDIA H100", sms=132, ghz=1.98, bandwidth=3.0e12),
}


# --- the rows -------------------------------------------------------------------------

_CASE = re.compile(r"^(NCDHW|NDHWC) (f32|bf16) \(([\d, ]+)\) k([\dx]+) s([\dx]+)(?: p([\dx]+))?")


@dataclasses.dataclass(frozen=True)
class Row:
    """One timed row: a pooling problem and a job."""

    case: str
    job: str
    layout: str
    dtype: str
    shape: tuple[int, ...]
    kernel: tuple[int, int, int]
    stride: tuple[int, int, int]
    padding: tuple[int, int, int]
    size_class: str  # "large" (the 1 GiB rows), "small" (32 MiB) or "generic" (MODEL_ROWS)
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
    def channels(self) -> int:
        return self.shape[-1] if self.layout == "NDHWC" else self.shape[1]

    @property
    def out_spatial(self) -> tuple[int, ...]:
        return tuple(pooled_extent(d, k, s, p, p)
                     for d, k, s, p in zip(self.spatial, self.kernel, self.stride, self.padding))

    @property
    def n(self) -> int:
        return math.prod(self.shape)

    @property
    def m(self) -> int:
        return self.n // math.prod(self.spatial) * math.prod(self.out_spatial)

    @property
    def overlap(self) -> bool:
        return any(s < k for k, s in zip(self.kernel, self.stride))


def _triple(text: str | None) -> tuple[int, int, int]:
    if text is None:
        return (0, 0, 0)
    parts = tuple(int(v) for v in text.split("x"))
    return parts * 3 if len(parts) == 1 else parts


def parse_case(name: str) -> dict:
    """Layout, dtype, shape and window of a bench case name (cases/pooling.py's Case.name: uniform padding)."""
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


def floor_bytes(job: str, n: int, m: int, itemsize: int) -> int:
    """The bench's byte floor of a job: gradient only reads x and g and writes dx; forward + gradient also
    writes y and reads g; inference reads x and writes y (cases/pooling.py's floors)."""
    return {"gradient only": 2 * n * itemsize + m * itemsize, "forward + gradient": 2 * n * itemsize + 2 * m * itemsize,
            "inference": n * itemsize + m * itemsize}[job]


# Shapes no stored run times, served by the one-lane units, the ragged-row classes and the Generic kernels:
# C3D's pools in PyTorch's layout (NCDHW bf16, pool3 at W = 28 and pool4 at W = 14: rows of 56 and 28 bytes, no
# 128-bit vector), the raw 3-channel input under C3D's first window, NDHWC bf16 with C % 8 != 0 (k2 s2: one-lane
# units; k3 s2 p1: half-vector units at C = 12, Generic at C = 6), k3 s2 without padding, k2 s1.
MODEL_CASES = (
    "NCDHW bf16 (64, 256, 8, 28, 28) k2 s2",
    "NCDHW bf16 (64, 512, 4, 14, 14) k2 s2",
    "NDHWC bf16 (64, 16, 112, 112, 3) k1x2x2 s1x2x2",
    "NDHWC bf16 (64, 16, 64, 64, 12) k2 s2",
    "NDHWC bf16 (64, 16, 64, 64, 12) k3 s2 p1",
    "NDHWC bf16 (64, 16, 64, 64, 6) k3 s2 p1",
    "NCDHW f32 (64, 64, 16, 64, 64) k3 s2",
    "NCDHW f32 (64, 64, 16, 64, 64) k2 s1",
)
MODEL_JOBS = ("gradient only", "inference")


def model_rows(device: str = "no device run") -> list[Row]:
    out = []
    for case in MODEL_CASES:
        fields = parse_case(case)
        probe = Row(case=case, job="inference", **fields, size_class="generic", floor_bytes=0, xla_ms=None,
                    measured_on=device)
        for job in MODEL_JOBS:
            out.append(dataclasses.replace(probe, job=job, floor_bytes=floor_bytes(job, probe.n, probe.m,
                                                                                   probe.itemsize)))
    return out


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

    def read_bytes(self, row: Row) -> int:
        """The operands' bytes: what the launch must bring from DRAM."""
        n, m, s = row.n, row.m, row.itemsize
        return {("window", 3): n * s + m * s, ("gather", None): m * s + 2 * m, ("fused", 0): n * s + m * s,
                ("fused", 1): n * s + 2 * m * s}.get((self.kind, self.mode), n * s)

    @property
    def writes_y(self) -> bool:
        return self.kind == "window" and self.mode in (0, 1)


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
_TEMPLATE_MODE = {("window", 0): 0, ("window", 1): 0, ("window", 2): 2, ("window", 3): 3, ("fused", 0): 0,
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


SCALAR_WIDTH = -1  # launch_plan.h's kScalarWidth: a Fixed class at one lane a unit


def scalar_width(role: Role, row: Row) -> int:
    """launch_plan.h's ScalarWidth: the one-lane Fixed units of non-overlapping windows where their accesses
    align (NCDHW: a window's columns one 4-, 8- or 16-byte access), else 1 (Generic)."""
    if row.overlap or role.kind == "window" and role.mode in (2, 3):
        return 1
    if row.layout == "NDHWC":
        return SCALAR_WIDTH
    W, Wo, kW = row.spatial[2], row.out_spatial[2], row.kernel[2]
    nbytes = kW * row.itemsize
    if nbytes not in (4, 8, 16) or W != Wo * kW or (W * row.itemsize) % nbytes:
        return 1
    return SCALAR_WIDTH


def ragged_rows(row: Row) -> bool:
    """Fixed's kRaggedRows (unit_common.h): NCDHW rows of whole vectors end in part of a unit (k3 s2 and k2 s1
    without padding), whose outputs the kernels read and write element by element."""
    kW, sW, pW = row.kernel[2], row.stride[2], row.padding[2]
    return (2 * pW - kW) // sW + 1 != 0


def vector_width(role: Role, row: Row) -> int:
    """The vector width launch_plan.h's VectorWidth gives a Fixed class on this row (1: the plan takes the
    Generic kernels instead; SCALAR_WIDTH: the one-lane Fixed unit); operands 16-byte aligned, as XLA's
    buffers are."""
    lanes = 16 // row.itemsize
    if row.layout == "NDHWC":
        if row.channels % lanes == 0:
            return lanes
        if row.itemsize == 2 and row.overlap and row.channels % (lanes // 2) == 0:  # HalfVectors: 64-bit units
            return lanes // 2
        return scalar_width(role, row)
    W, Wo, kW, sW = row.spatial[2], row.out_spatial[2], row.kernel[2], row.stride[2]
    if (W * row.itemsize) % 16:
        return scalar_width(role, row)
    if row.overlap and ragged_rows(row):  # launch_plan.h: two vectors of columns a window unit, the last inside
        if role.kind == "gather":
            return lanes if W % lanes == 0 and lanes % sW == 0 else 1
        if lanes % sW:
            return 1
        v2 = 2 * (lanes // sW)
        return v2 if math.ceil(Wo / v2) * v2 * sW <= W else 1
    if role.kind == "gather" and row.overlap:
        return lanes if W % lanes == 0 and lanes % sW == 0 and Wo % (lanes // sW) == 0 and W <= Wo * sW else 1
    if lanes % sW:
        return 1
    V = lanes // sW
    if Wo % V:
        return 1
    if not row.overlap and W != Wo * kW:
        return 1
    if Wo * sW > W:
        return 1
    if row.overlap and role.kind == "window" and Wo % (2 * V) == 0:  # WideWindows: two vectors a row
        return 2 * V
    return V


def vector_widths(role: Role, row: Row) -> list[int]:
    """The widths a Fixed kernel may have on this row ([]: Generic), the plan's first: a tree without the
    plan's width (one before two-vector windows) ran the next."""
    width = vector_width(role, row)
    if width == SCALAR_WIDTH:
        return [1]
    if width == 1:
        return []
    two = row.layout == "NCDHW" and row.overlap and role.kind == "window" and not ragged_rows(row)
    return [width, width // 2] if two else [width]


def _has_mode(functions, mode: int, generic: bool) -> bool:
    """Whether some window kernel of mode `mode` is built for Generic windows (`generic`) or Fixed ones."""
    return any((args := template_args(fn.name, "WindowKernel")) and len(args) >= 5 and _int(args[4]) == mode
               and (template_args(args[1], "Fixed") is None) == generic for fn in functions)


def find_kernel(functions, role: Role, row: Row) -> tuple[sass.Function, dict] | None:
    """The kernel a role runs on a row: the row's Fixed class at the plan's vector width where built, else
    Generic (int64 offsets where a batch item reaches 2^31 elements)."""
    window = (*row.kernel, *row.stride, *row.padding)
    layout = {"NCDHW": 0, "NDHWC": 1}[row.layout]
    wide = row.n // row.shape[0] >= NARROW_LIMIT
    mode = _TEMPLATE_MODE[(role.kind, role.mode)]
    widths = vector_widths(role, row)
    fixed_fns: dict[int, tuple] = {}
    generic_fn = None
    for fn in functions:
        args = template_args(fn.name, _TEMPLATES[role.kind])
        if not args or len(args) < 4 or args[0].split("::")[-1] != _ELEMENT_TYPE[row.dtype]:
            continue
        generic = template_args(args[1], "Fixed") is None
        # indices only: mode 2 (run_plan.h's UnitOf); a tree without it ran mode 0 (before issue 55 for both
        # kinds of window, before its second round for Generic ones)
        wanted = 0 if mode == 2 and not _has_mode(functions, 2, generic) else mode
        if wanted is not None and (len(args) < 5 or _int(args[4]) != wanted):
            continue
        fixed = template_args(args[1], "Fixed")
        if fixed is not None and _int(args[2]) == layout and tuple(_int(a) for a in fixed) == window:
            v = _int(args[3]) or 1
            if v in widths and not wide:
                fixed_fns[v] = (fn, {"V": v, "specialised": True})
        elif args[1].endswith(f"Generic<{'long' if wide else 'int'}>") and _int(args[2]) == GENERIC_LAYOUT:
            generic_fn = (fn, {"V": _int(args[3]) or 1, "specialised": False})
    return next((fixed_fns[v] for v in widths if v in fixed_fns), generic_fn)


def units(role: Role, row: Row, args: dict) -> float:
    """Loop iterations, as launch_plan.h's PlanStep counts them: specialised, V outputs (window) or V windows
    (fused; gather without overlap) a unit, and for an overlapping gather a block of input positions (2 along
    each axis whose k > 1 and s > 1: D, H, and W in NDHWC; V along W in NCDHW) by V channels (NDHWC); generic, one
    output, or one input element (gather)."""
    if not args["specialised"]:  # kGenericLanes channels a unit
        points = math.prod(row.spatial if role.kind == "gather" else row.out_spatial)
        return row.shape[0] * points * math.ceil(row.channels / args["V"])
    if role.kind != "gather" or not row.overlap:
        if row.layout == "NCDHW":  # V windows of a row (the last unit of a ragged row partial)
            Do, Ho, Wo = row.out_spatial
            return row.shape[0] * row.channels * Do * Ho * math.ceil(Wo / args["V"])
        return row.m / args["V"]
    blocks = [math.ceil(d / (2 if k > 1 and s > 1 else 1)) for d, k, s in zip(row.spatial, row.kernel, row.stride)]
    if row.layout == "NDHWC":
        return row.shape[0] * math.prod(blocks) * (row.shape[-1] / args["V"])
    return row.shape[0] * row.shape[1] * blocks[0] * blocks[1] * (row.spatial[2] / args["V"])


GENERIC_UNITS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "pool3d_pass", "bindings",
                             "gpu", "cuda", "generic_units.h")


def generic_batch() -> int:
    """generic_units.h's kGenericBatch: the loads a Generic unit keeps in flight (its loops' batch)."""
    with open(GENERIC_UNITS, encoding="utf-8") as f:
        m = re.search(r"constexpr int kGenericBatch = (\d+);", f.read())
    if m is None:
        raise LookupError(f"no kGenericBatch in {GENERIC_UNITS}")
    return int(m.group(1))


def trips(role: Role, row: Row, args: dict) -> dict[int, float]:
    """Inner-loop trips by depth (1 = D): a generic kernel walks a window's real taps (window, fused) or an
    input position's covering windows (gather) in one loop, kGenericBatch a trip, and a warp runs as many
    trips as its busiest lane (`generic_trips`); a specialised kernel's loops are its rare paths (a rescan:
    the taps by axis) and NDHWC gathers' batches of windows (one D offset's a trip)."""
    if not args["specialised"]:
        return {1: generic_trips(role, row, args["V"])}
    return {d + 1: float(k) for d, k in enumerate(row.kernel)}


def _axis_counts(role: Role, n: int, n_out: int, k: int, s: int, p: int):
    """Per position along one axis: a gather's covering windows (input positions), else a window's real taps
    (output positions)."""
    import numpy as np  # only here and in warp_classes

    if role.kind == "gather":
        q = np.arange(n) + p
        lo = np.where(q < k, 0, (q - k) // s + 1)
        hi = np.minimum(q // s, n_out - 1)
        return np.maximum(hi - lo + 1, 0)
    start = np.arange(n_out) * s - p
    return np.minimum(start + k, n) - np.maximum(start, 0)


def generic_trips(role: Role, row: Row, lanes: int) -> float:
    """A Generic unit's batches (generic_units.h), averaged over warps: 32 consecutive units (launch_plan.h's
    decoding: channel blocks innermost in NDHWC, W in NCDHW) run the trips of their busiest unit."""
    import numpy as np  # only in the model functions that need it

    batch = generic_batch()
    counts = [_axis_counts(role, n, n_out, k, s, p) for n, n_out, k, s, p in
              zip(row.spatial, row.out_spatial, row.kernel, row.stride, row.padding)]
    per_point = counts[0][:, None, None] * counts[1][None, :, None] * counts[2][None, None, :]  # (d, h, w)
    blocks = math.ceil(row.channels / lanes)
    if row.layout == "NDHWC":  # units (channel block, w, h, d)
        unit_counts = np.repeat(per_point.reshape(-1), blocks)
    else:  # units (w, h, d, channel block)
        unit_counts = np.tile(per_point.reshape(-1), blocks)
    whole = min(len(unit_counts), SIMULATED_UNITS) // WARP * WARP
    busiest = unit_counts[:whole].reshape(-1, WARP).max(axis=1) if whole else unit_counts.max(keepdims=True)
    return float(np.ceil(busiest / batch).mean())


def fusible(row: Row) -> bool:
    """launch_plan.h's Fusible: windows that tile the input (k = s, no padding)."""
    return row.kernel == row.stride and row.padding == (0, 0, 0)


# --- warps ------------------------------------------------------------------------------

BODY_TAGS = ("interior", "border")
SIMULATED_UNITS = 1 << 22  # the most units warp_classes maps (the pattern repeats per plane or batch item)


def warp_classes(role: Role, row: Row, args: dict, kernel) -> dict[frozenset, float]:
    """The fraction of warps by the bodies their lanes take ({}: a kernel of one body).

    A specialised window kernel runs its `interior` body on units whose
    windows touch no padding (and whose vectors stay inside the row: NCDHW's
    InteriorNcdhw, NDHWC's InteriorWindow3, units.h), else its `border` body;
    a warp is 32 consecutive units (launch_plan.h's decoding order, innermost
    first: W blocks, H, D, planes in NCDHW; channel blocks, W, H, D, batch in
    NDHWC), the pattern of one plane or batch item (or of as many as a warp
    straddles) mapped exactly.
    """
    if not set(BODY_TAGS) <= set(kernel.tag_set) or role.kind not in ("window", "fused"):
        return {frozenset(): 1.0}
    import numpy as np  # only here: the rest of the model needs no numpy

    V = args["V"]
    (kD, kH, kW), (sD, sH, sW), (pD, pH, pW) = row.kernel, row.stride, row.padding
    D, H, W = row.spatial
    Do, Ho, Wo = row.out_spatial
    per_outer = Do * Ho * (Wo // V) if row.layout == "NCDHW" else Do * Ho * Wo * (row.channels // V)
    outers = min(WARP // math.gcd(per_outer, WARP), max(1, SIMULATED_UNITS // per_outer))
    u = np.arange(per_outer * outers) % per_outer
    if row.layout == "NCDHW":
        row_units = Wo // V
        ow0, oh, od = (u % row_units) * V, (u // row_units) % Ho, u // row_units // Ho
        seg = (V - 1) * sW + kW
        end = max(seg, pW + V * sW)
        w0, w_end = ow0 * sW - pW, end
    else:
        blocks = row.channels // V
        ow, oh, od = (u // blocks) % Wo, (u // blocks // Wo) % Ho, u // blocks // Wo // Ho
        w0, w_end = ow * sW - pW, kW
    d0, h0 = od * sD - pD, oh * sH - pH
    interior = (d0 >= 0) & (d0 + kD <= D) & (h0 >= 0) & (h0 + kH <= H) & (w0 >= 0) & (w0 + w_end <= W)
    whole = len(interior) // WARP * WARP
    lanes = interior[:whole].reshape(-1, WARP)
    inside, outside = float(lanes.all(axis=1).mean()), float((~lanes).all(axis=1).mean())
    return {frozenset({"interior"}): inside, frozenset({"border"}): outside,
            frozenset(BODY_TAGS): max(0.0, 1.0 - inside - outside)}


def data_tags(role: Role, data: str) -> frozenset:
    """The data-driven tags a unit's path holds: on ReLU-like data every warp holds an all-zero window."""
    if data == "random":
        return frozenset()
    return frozenset({"rescan", "rescan-y"}) if role.writes_y else frozenset({"rescan"})


# --- the model -------------------------------------------------------------------------


@dataclasses.dataclass
class WarpClass:
    fraction: float
    bodies: frozenset
    per_unit: dict[str, float]  # instructions by pipe and "total", every body the warp runs
    rounds: float  # global-load round trips a unit


@dataclasses.dataclass
class Launch:
    role: Role
    function: object  # sass.Function, or a RecordedKernel
    args: dict
    units: float
    classes: list[WarpClass]
    bytes: int
    resident: int  # threads per SM
    machine: Machine
    data: str
    row: Row

    @property
    def per_unit(self) -> dict[str, float]:
        """Instructions a unit, averaged over the warps (a mixed warp counted with both bodies)."""
        keys = {k for c in self.classes for k in c.per_unit}
        return {k: sum(c.fraction * c.per_unit.get(k, 0.0) for c in self.classes) for k in keys}

    @property
    def rounds(self) -> float:
        return sum(c.fraction * c.rounds for c in self.classes)

    @property
    def memory_ms(self) -> float:
        return self.bytes / self.machine.bandwidth * 1e3

    @property
    def issue_ms(self) -> float:
        cycles = sum(c.fraction * max(c.per_unit.get(p, 0.0) / r for p, r in self.machine.rates)
                     for c in self.classes)
        return self.units / WARP * cycles / (self.machine.sms * self.machine.ghz * 1e9) * 1e3

    @property
    def iterations(self) -> float:
        """Units per resident thread: the grid-stride loop's trips (blocks capped at 2^16 as launch_plan.h)."""
        blocks = min(math.ceil(self.units / THREADS), 65536)
        slots = min(self.machine.sms * self.resident, blocks * THREADS)
        return self.units / slots if slots else math.inf

    def latency_ms(self, latency_ns: float) -> float:
        """Units per resident thread x a warp's time: its round trips x latency + its instructions alone."""
        per_warp = 0.0
        for c in self.classes:
            cycles = max(c.per_unit.get(p, 0.0) / r for p, r in self.machine.partition_rates)
            per_warp += c.fraction * (c.rounds * latency_ns * 1e-9 + cycles / (self.machine.ghz * 1e9))
        return self.iterations * per_warp * 1e3

    def ms_at(self, latency_ns: float) -> float:
        return max(self.memory_ms, self.issue_ms, self.latency_ms(latency_ns)) + LAUNCH_US / 1e3

    @property
    def ms(self) -> float:
        return self.ms_at(TARGET_NS)

    def bound_at(self, latency_ns: float) -> str:
        terms = {"bytes": self.memory_ms, "issue": self.issue_ms, "latency": self.latency_ms(latency_ns)}
        return max(terms, key=terms.get)

    @property
    def bound(self) -> str:
        return self.bound_at(TARGET_NS)

    def in_flight_kb(self) -> float:
        """New DRAM bytes in flight per SM: resident threads x a unit's share of the launch's bytes read, over
        its round trips (window inputs re-read by the next window come from L1/L2, not DRAM)."""
        read = self.role.read_bytes(self.row) / max(self.units, 1)
        return self.resident * read / max(self.rounds, 1.0) / 1e3

    def needed_kb(self, latency_ns: float) -> float:
        """Little's law: the bandwidth an SM must sustain times the latency."""
        return self.machine.bandwidth / self.machine.sms * latency_ns * 1e-9 / 1e3

    @property
    def tag(self) -> str:
        letter = {"window": "W", "gather": "G", "fused": "F"}[self.role.kind]
        mode = "" if self.role.mode is None else str(self.role.mode)
        kind = "s" if self.args["specialised"] else "g"
        return f"{letter}{mode}{kind}" + (f"x{self.args['V']}" if self.args["V"] > 1 else "")


def launch(functions, role: Role, row: Row, machine: Machine, data: str = "random") -> Launch:
    found = find_kernel(functions, role, row)
    if found is None:
        what = f"no {role.kind} kernel" + ("" if role.mode is None else f" of mode {role.mode}")
        raise LookupError(f"{what} for {row.case} in the SASS", what)
    fn, args = found
    loop_trips = trips(role, row, args)
    extra = data_tags(role, data)
    common = fn.path_cost(extra, loop_trips)
    classes = []
    for bodies, fraction in warp_classes(role, row, args, fn).items():
        if fraction <= 0:
            continue
        paths = [fn.path_cost(extra | {b}, loop_trips) for b in bodies] or [common]
        shared = len(paths) - 1  # the untagged code a mixed warp runs once
        per_unit = {p: (sum(c.pipes.get(p, 0.0) for c in paths) - shared * common.pipes.get(p, 0.0)) / fn.unroll
                    for p in (*sass.PIPE_NAMES, "total")}
        rounds = (sum(c.rounds for c in paths) - shared * common.rounds) / fn.unroll
        classes.append(WarpClass(fraction, bodies, per_unit, rounds))
    return Launch(role, fn, args, units(role, row, args), classes, role.bytes(row), machine.occupancy(fn.registers),
                  machine, data, row)


def predict(functions, row: Row, machine: Machine, data: str = "random") -> list[Launch]:
    roles = job_roles(row.job, row)
    if roles[0].kind == "fused":
        found = find_kernel(functions, roles[0], row)
        if found is None or (not found[1]["specialised"] and not fusible(row)):
            roles = [Role("window", 2), Role("gather")]  # PlanCall's window + gather
    return [launch(functions, role, row, machine, data) for role in roles]


def row_ms(launches: list[Launch], latency_ns: float = TARGET_NS) -> float:
    return sum(l.ms_at(latency_ns) for l in launches)


# --- a kernel's figures without its SASS (the fixture of a past tree) ----------------------


def _key(allowed, loop_trips) -> str:
    return "|".join(sorted(allowed)) + ";" + ",".join(f"{d}:{t:g}" for d, t in sorted((loop_trips or {}).items()))


@dataclasses.dataclass
class RecordedKernel:
    """A kernel as the model read it: its name, registers, unroll, tags and the path costs it was asked for
    (so a past tree's kernels can be modelled after their code changed: tests/checks/model_fixtures)."""

    name: str
    registers: int | None
    unroll: int
    tag_set: frozenset
    paths: dict[str, sass.PathCost]

    def path_cost(self, allowed=frozenset(), trips=None) -> sass.PathCost:
        key = _key(allowed, trips)
        if key not in self.paths:
            raise KeyError(f"{self.name}: no recorded path {key!r}")
        return self.paths[key]

    def as_json(self) -> dict:
        return {"name": self.name, "registers": self.registers, "unroll": self.unroll,
                "tags": sorted(self.tag_set),
                "paths": {k: dataclasses.asdict(v) for k, v in sorted(self.paths.items())}}

    @classmethod
    def from_json(cls, d: dict) -> RecordedKernel:
        return cls(d["name"], d["registers"], d["unroll"], frozenset(d["tags"]),
                   {k: sass.PathCost(**v) for k, v in d["paths"].items()})


class Recorder:
    """Wraps a kernel list: every path the model asks for is kept, for `RecordedKernel`s."""

    def __init__(self, functions):
        self.recorded: dict[str, RecordedKernel] = {}
        self.functions = [self._wrap(f) for f in functions]

    def _wrap(self, fn):
        recorder = self

        class Wrapped:
            name, registers, unroll, tag_set = fn.name, fn.registers, fn.unroll, fn.tag_set

            def path_cost(self, allowed=frozenset(), loop_trips=None):
                cost = fn.path_cost(allowed, loop_trips)
                entry = recorder.recorded.setdefault(fn.name, RecordedKernel(fn.name, fn.registers, fn.unroll,
                                                                             fn.tag_set, {}))
                entry.paths[_key(allowed, loop_trips)] = cost
                return cost

        return Wrapped()


def load_kernels(path: str) -> list[RecordedKernel]:
    with open(path, encoding="utf-8") as f:
        return [RecordedKernel.from_json(d) for d in json.load(f)["kernels"]]


# --- printing --------------------------------------------------------------------------

JOB_TAGS = {"gradient only": "grad", "forward + gradient": "fwd+grad", "inference": "infer"}


def short_case(row: Row) -> str:
    """The case name with its shape as AxBx... and its window as k3s2p1."""
    name = re.sub(r"\((.*?)\)", lambda m: m.group(1).replace(", ", "x"), row.case)
    return re.sub(r" (k\S+) (s\S+)(?: (p\S+))?$", lambda m: " " + "".join(g for g in m.groups() if g), name)


def kernel_name(fn) -> str:
    """The demangled name without its parameter list."""
    name, depth = fn.name, 0
    for i in range(len(name) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(name[i], 0)
        if depth == 0 and name[i] == "(":
            return name[:i].removeprefix("void ")
    return name


def _ms(v: float | None) -> str:
    return "    -" if v is None else (f"{v:5.3f}" if v < 10 else f"{v:5.2f}")


@dataclasses.dataclass
class Prediction:
    """One row: its launches on random and ReLU-like data, and its times at each latency."""

    row: Row
    launches: list[Launch]
    relu: list[Launch]
    machine: Machine

    @property
    def floor_ms(self) -> float:
        return self.row.floor_bytes / self.machine.bandwidth * 1e3

    def ms(self, latency_ns: float = TARGET_NS, data: str = "random") -> float:
        return row_ms(self.launches if data == "random" else self.relu, latency_ns)

    @property
    def xla_ms(self) -> float | None:
        return self.row.xla_ms if self.machine.name.split()[-1] in self.row.measured_on else None

    @property
    def warps(self) -> str:
        """Warps running the interior body only / the border body only / both, over the window launches."""
        for l in self.launches:
            fractions = {c.bodies: c.fraction for c in l.classes}
            if frozenset(BODY_TAGS) in fractions or frozenset({"border"}) in fractions:
                parts = [fractions.get(frozenset({b}), 0.0) for b in BODY_TAGS]
                parts.append(fractions.get(frozenset(BODY_TAGS), 0.0))
                return "/".join(f"{p * 100:.0f}" for p in parts)
        return "one body"


def predictions(functions, rows: list[Row], machine: Machine) -> list[Prediction]:
    out = []
    for row in rows:
        out.append(Prediction(row, predict(functions, row, machine), predict(functions, row, machine, "relu"),
                              machine))
    return out


def table(functions, rows: list[Row], machine: Machine) -> list[str]:
    lat = "/".join(f"{v:g}" for v in LATENCIES_NS)
    head = (f"{'case':<36} {'job':<8} {'kernels':<11} {'regs':>7} {'res':>4} {'warps i/b/m':>11} {'rnd':>5} "
            f"{'ms at ' + lat + ' ns':>19} {'relu':>5} {'floor':>5} {'XLA':>5} {'p/fl':>5} {'XLA/p':>5}")
    lines = [head, "-" * len(head)]
    for row in rows:
        try:
            p = predictions(functions, [row], machine)[0]
        except LookupError as error:
            lines.append(f"{short_case(row):<36} {JOB_TAGS[row.job]:<8} {error.args[-1]}")
            continue
        regs = "+".join(str(l.function.registers or "?") for l in p.launches)
        resident = "+".join(str(l.resident // 32) for l in p.launches)
        rounds = "+".join(f"{l.rounds:.0f}" for l in p.launches)
        times = "/".join(_ms(p.ms(v)).strip() for v in LATENCIES_NS)
        pred = p.ms()
        xla = p.xla_ms
        lines.append(
            f"{short_case(row):<36} {JOB_TAGS[row.job]:<8} {'+'.join(l.tag for l in p.launches):<11} {regs:>7} "
            f"{resident:>4} {p.warps:>11} {rounds:>5} {times:>19} {_ms(p.ms(data='relu'))} {_ms(p.floor_ms)} "
            f"{_ms(xla)} {pred / p.floor_ms:4.2f}x" + (f" {xla / pred:4.2f}x" if xla else "     -"))
    return lines


def markdown(functions, rows: list[Row], machine: Machine) -> list[str]:
    """The rows as a Markdown table (docs/gpu.md quotes it)."""
    lat = " / ".join(f"{v:g}" for v in LATENCIES_NS)
    lines = [f"| case | job | kernels | registers | warps interior/border/both % | round trips a unit | "
             f"predicted ms at {lat} ns | ReLU-like ms | floor ms | XLA ms | predicted / floor | XLA / predicted |",
             "|" + " --- |" * 12]
    for p in predictions(functions, rows, machine):
        pred, xla = p.ms(), p.xla_ms
        lines.append(
            f"| {short_case(p.row)} | {p.row.job} | {' + '.join(l.tag for l in p.launches)} | "
            f"{' + '.join(str(l.function.registers or '?') for l in p.launches)} | {p.warps} | "
            f"{' + '.join(f'{l.rounds:.0f}' for l in p.launches)} | "
            f"{' / '.join(f'{p.ms(v):.3f}' for v in LATENCIES_NS)} | {p.ms(data='relu'):.3f} | {p.floor_ms:.3f} | "
            f"{'-' if xla is None else f'{xla:.3f}'} | {pred / p.floor_ms:.2f}x | "
            f"{'-' if xla is None else f'{xla / pred:.2f}x'} |")
    return lines


def kernel_lines(functions, rows: list[Row], machine: Machine) -> list[str]:
    """Each kernel used, once per window, with its roles, registers, occupancy and its cost per unit."""
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
        window = f"k{'x'.join(map(str, row.kernel))} s{'x'.join(map(str, row.stride))}"
        lines.append(f"  {'/'.join(tags)} ({window}): {kernel_name(l.function)}")
        lines.append(f"      {l.function.registers or '?'} registers: {l.resident} threads an SM; "
                     f"{l.in_flight_kb():.0f} KB of new data in flight an SM (Little's law asks "
                     f"{l.needed_kb(TARGET_NS):.0f} KB at {TARGET_NS:g} ns)")
        for c in l.classes:
            counts = " ".join(f"{p} {c.per_unit[p]:.0f}" for p in (*sass.PIPE_NAMES, "total") if c.per_unit.get(p))
            what = "+".join(sorted(c.bodies)) or "one body"
            lines.append(f"      {what}: {c.fraction * 100:.0f}% of warps, {c.rounds:.0f} round trips, {counts}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", choices=sorted(GPUS), default="h200", help="the machine model (default h200)")
    parser.add_argument("--results", help="a stored device run (default: the newest checks/device_check/results/gpu-*.jsonl)")
    parser.add_argument("--cubin", action="append", help="read this cubin or library instead of building the kernels")
    parser.add_argument("--kernels", help="read the kernels' recorded figures (a --record file) instead of SASS")
    parser.add_argument("--record", help="write the figures of every kernel the rows use to this JSON file")
    parser.add_argument("--markdown", action="store_true", help="print the 1 GiB and Generic rows as Markdown only")
    args = parser.parse_args(argv)
    machine = GPUS[args.gpu]
    path = args.results or newest_results(args.gpu)
    if path is None:
        parser.error(f"--results: no stored device run matches {RESULTS_GLOB}")
    try:
        rows = load_rows(path)
    except ValueError as error:
        parser.error(str(error))
    rows += model_rows(rows[0].measured_on)
    for given in [*(args.cubin or []), *([args.kernels] if args.kernels else [])]:
        if not os.path.isfile(given):
            parser.error(f"no such file: {given}")
    source = None
    try:
        if args.kernels:
            functions, source = load_kernels(args.kernels), os.path.relpath(args.kernels)
        else:
            library = None if args.cubin else sass.fresh_library()
            functions = sass.kernels(cubins=args.cubin or ([library] if library else None))
            source = ", ".join(os.path.relpath(c) for c in args.cubin) if args.cubin else (
                os.path.relpath(library) if library else "sm_90a cubins built now")
    except (sass.Unavailable, RuntimeError) as error:
        print(f"gpu-model: {error}", file=sys.stderr)
        return 1
    recorder = Recorder(functions) if args.record else None
    if recorder:
        functions = recorder.functions
    large = [r for r in rows if r.size_class == "large"]
    small = [r for r in rows if r.size_class == "small"]
    generic = [r for r in rows if r.size_class == "generic"]
    if args.markdown:
        try:
            print("\n".join(markdown(functions, large + generic, machine)))
        except LookupError as error:
            print(f"gpu-model: {error.args[0]}", file=sys.stderr)
            return 1
    else:
        rates = ", ".join(f"{p} {r:g}" for p, r in machine.rates)
        header = (
            f"Predicted, not measured: {machine.name}, {machine.sms} SMs, {machine.ghz} GHz, "
            f"{machine.bandwidth / 1e12:.2f} TB/s; warp-instructions per clock per SM: {rates}; "
            f"{LAUNCH_US:g} us per launch; {THREADS} threads a block; global-load latency "
            f"{'/'.join(f'{v:g}' for v in LATENCIES_NS)} ns. Kernels from {source}. "
            f"Rows, byte floors and XLA:GPU times: {os.path.relpath(path)} (measured on {rows[0].measured_on}); "
            "Generic rows: checks/gpu_model.py's MODEL_CASES. Jobs (strategy indices): grad = gradient only, "
            "fwd+grad = forward + gradient, infer = inference. Columns: registers a thread and resident warps an "
            "SM per launch; warps whose lanes all take the interior body / all the border body / both (%); "
            "global-load round trips a unit; predicted ms at each latency (random data); relu: ReLU-like data "
            f"at {TARGET_NS:g} ns; XLA only where measured on this GPU; p/fl = predicted at {TARGET_NS:g} ns / "
            "floor; XLA/p = XLA:GPU / predicted.")
        print(textwrap.fill(header, width=118), end="\n\n")
        for title, part in (("1 GiB rows", large), ("32 MiB rows", small), ("Generic rows", generic)):
            if part:
                print(title)
                print("\n".join(table(functions, part, machine)))
                print()
        print("Kernels (W window, G gather, F fused; digit: mode; s specialised, g generic; xV vector width):")
        print("\n".join(kernel_lines(functions, rows, machine)))
    if recorder:
        with open(args.record, "w", encoding="utf-8") as f:
            json.dump({"source": source, "kernels": [k.as_json() for k in recorder.recorded.values()]}, f, indent=1)
            f.write("\n")
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
