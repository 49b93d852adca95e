"""The spatially sharded cases' factors, their pairwise covering selection, and what each must show.

Data and arithmetic, no JAX at import: `RUNNER` (spatial_run.py) runs
the cases in a child process per device count (cases/children.py); tests/integration/test_spatial_sharding.py
(the pairwise `CASES`) and checks/spatial_sweep.py (every combination) judge
the records with `problems`. The pools and the depth-sharded training step
(`max_pool`, `conv_pool_step`) are shared with the deviceless GPU compile
(checks/gpu_compile_check.py, tests/bindings/gpu/test_*deviceless*.py).
"""

from __future__ import annotations

import itertools
from pathlib import Path

RUNNER = Path(__file__).with_name("spatial_run.py")  # python spatial_run.py N [--all] [--match ...]

# (kernel_size, stride, padding) per spatial axis D, H, W
WINDOWS = {
    "k2s2": ((2, 2, 2), (2, 2, 2), (0, 0, 0)),
    "k3s2p1": ((3, 3, 3), (2, 2, 2), (1, 1, 1)),
    "k3s1p1": ((3, 3, 3), (1, 1, 1), (1, 1, 1)),
    "k122": ((1, 2, 2), (1, 2, 2), (0, 0, 0)),
    "k5s1p2": ((5, 5, 5), (1, 1, 1), (2, 2, 2)),  # only in WIDE: a window wider than a shard
}
JOBS = ("layer", "bare", "recompute", "inference")
FACTORS = {  # the factors of a case, each with its values (the device count first)
    "devices": (2, 4, 8),
    "axis": ("D", "H", "W"),
    "layout": ("NCDHW", "NDHWC"),
    "dtype": ("f32", "bf16", "f16"),
    "window": ("k2s2", "k3s2p1", "k3s1p1", "k122"),
    "job": JOBS,
    "shards": ("even", "uneven"),
    "partitioner": ("shardy", "gspmd"),
}
# Kernel calls each job's rewritten program holds (auto on CPU: the indices strategy).
EXPECTED_CALLS = {
    "layer": {"forward": 1, "backward_from_indices": 1},
    "bare": {"backward_from_input": 1},
    "recompute": {"backward": 1},
    "inference": {"forward_output": 1},
}


def excluded(case: dict) -> str | None:
    """Why a combination is not a case (None: it is one)."""
    if case["window"] == "k122" and case["axis"] == "D" and case["layout"] == "NDHWC":
        # D has a unit window: the pass folds it into the kernel's batch (B*D), a reshape XLA
        # can only make of a D-split tensor by gathering it (see docs/jax_integration.md)
        return "D is not pooled by a (1,2,2) window and is folded into the batch in NDHWC"
    if case["job"] == "inference" and case["layout"] == "NDHWC" and case["window"] in ("k2s2", "k122"):
        return "the CPU binding leaves channels-last inference pools without overlap to XLA (speed rule)"
    return None


# A pairwise covering selection of FACTORS (greedy, seeded): every pair of values of two factors
# occurs in some case, except the pairs `excluded` rules out. test_spatial_sharding.py checks it.
CASES = (
    (2, "D", "NCDHW", "bf16", "k2s2", "bare", "uneven", "gspmd"),
    (2, "W", "NCDHW", "f16", "k2s2", "layer", "even", "shardy"),
    (2, "H", "NDHWC", "f32", "k3s2p1", "layer", "uneven", "shardy"),
    (2, "H", "NDHWC", "f16", "k3s1p1", "inference", "even", "shardy"),
    (2, "D", "NCDHW", "f16", "k122", "recompute", "uneven", "shardy"),
    (4, "H", "NCDHW", "bf16", "k122", "inference", "uneven", "gspmd"),
    (4, "H", "NCDHW", "bf16", "k3s1p1", "layer", "uneven", "gspmd"),
    (4, "H", "NDHWC", "f32", "k122", "bare", "uneven", "gspmd"),
    (4, "D", "NDHWC", "f16", "k3s1p1", "bare", "uneven", "shardy"),
    (4, "W", "NDHWC", "f32", "k3s2p1", "inference", "even", "shardy"),
    (4, "D", "NCDHW", "bf16", "k3s2p1", "recompute", "even", "shardy"),
    (4, "H", "NCDHW", "f16", "k3s2p1", "bare", "even", "shardy"),
    (4, "H", "NCDHW", "f32", "k2s2", "inference", "even", "shardy"),
    (8, "D", "NDHWC", "f32", "k3s2p1", "recompute", "even", "gspmd"),
    (8, "W", "NCDHW", "f16", "k3s1p1", "recompute", "uneven", "gspmd"),
    (8, "D", "NCDHW", "f32", "k122", "layer", "uneven", "gspmd"),
    (8, "D", "NDHWC", "f32", "k3s1p1", "inference", "even", "gspmd"),
    (8, "W", "NDHWC", "bf16", "k122", "bare", "even", "shardy"),
    (8, "H", "NDHWC", "f32", "k2s2", "recompute", "even", "shardy"),
)
# Windows wider than a shard (one plane per device): halos from neighbours 2, 3, 4 shards away.
WIDE = tuple(dict(zip(FACTORS, row, strict=True), planes=1) for row in (
    (4, "D", "NCDHW", "f32", "k5s1p2", "bare", "even", "shardy"),
    (8, "H", "NDHWC", "bf16", "k5s1p2", "layer", "even", "gspmd"),
))
STEPS = (("step_ncdhw_k2s2", "NCDHW", "k2s2"), ("step_ndhwc_k3s2p1", "NDHWC", "k3s2p1"))


def as_dict(row: tuple) -> dict:
    return dict(zip(FACTORS, row, strict=True))


def max_pool(window: str, layout: str):
    """The `WINDOWS[window]` max pool (JAX's reduce_window) of a volume in `layout`."""
    import jax.numpy as jnp
    from jax import lax

    kernel, stride, padding = WINDOWS[window]
    pads = tuple((p, p) for p in padding)
    if layout == "NCDHW":
        dims, strides, pads = (1, 1, *kernel), (1, 1, *stride), ((0, 0), (0, 0), *pads)
    else:
        dims, strides, pads = (1, *kernel, 1), (1, *stride, 1), ((0, 0), *pads, (0, 0))
    return lambda x: lax.reduce_window(x, -jnp.inf, lax.max, dims, strides, pads)


def step_shapes(layout: str) -> dict[str, tuple[int, ...]]:
    """The training step's input (batch 2, 4 channels, depth 32, 16x16) and convolution kernel (4 -> 8)."""
    if layout == "NCDHW":
        return {"x": (2, 4, 32, 16, 16), "kernel": (8, 4, 3, 3, 3)}
    return {"x": (2, 32, 16, 16, 4), "kernel": (3, 3, 3, 4, 8)}


def conv_pool_step(layout: str, window: str, mesh):
    """(step, the input's sharding): a training step on a volume whose depth is split over `mesh`'s one
    axis: a 3x3x3 convolution SAME, ReLU, the max pool, mean square loss, SGD on the convolution kernel.
    With `mesh` None: the same step with no sharding constraint (and the sharding None)."""
    import jax
    import jax.numpy as jnp
    from jax import lax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    pool = max_pool(window, layout)
    numbers = ("NCDHW", "OIDHW", "NCDHW") if layout == "NCDHW" else ("NDHWC", "DHWIO", "NDHWC")
    split = None
    if mesh is not None:
        axis = mesh.axis_names[0]
        split = NamedSharding(mesh, P(None, None, axis) if layout == "NCDHW" else P(None, axis))

    def loss(kernel, x):
        if split is not None:
            x = lax.with_sharding_constraint(x, split)
        h = jax.nn.relu(lax.conv_general_dilated(x, kernel, (1, 1, 1), "SAME", dimension_numbers=numbers))
        return jnp.mean(pool(h) ** 2)

    def step(kernel, x):
        value, grad = jax.value_and_grad(loss)(kernel, x)
        return value, kernel - 0.1 * grad

    return step, split


def name_of(case: dict) -> str:
    planes = case.get("planes", 4)
    return "-".join(str(case[f]) for f in FACTORS) + ("" if planes == 4 else f"-{planes}plane")


def uncovered_pairs(rows) -> list[tuple]:
    """The pairs of values of two factors no row of `rows` holds (and `excluded` allows): empty for CASES."""
    names = list(FACTORS)
    missing = []
    for a, b in itertools.combinations(names, 2):
        for va, vb in itertools.product(FACTORS[a], FACTORS[b]):
            probe = {name: None for name in names} | {a: va, b: vb}
            if excluded_pair(probe):
                continue
            if not any(row[a] == va and row[b] == vb for row in rows):
                missing.append(((a, va), (b, vb)))
    return missing


def excluded_pair(partial: dict) -> bool:
    """Whether no allowed case can hold the values `partial` names (None: any)."""
    names = [n for n, v in partial.items() if v is None]
    for values in itertools.product(*(FACTORS[n] for n in names)):
        if excluded(partial | dict(zip(names, values))) is None:
            return False
    return True


# Planes each call's operands take beyond the device's own along the split dimension (below, above), per
# window: the forward's input, the gradient's pooled operands, the gradient's input (bindings/halos.py).
HALOS = {
    "k2s2": {"forward": (0, 0), "grad": (0, 0), "grad_input": (0, 0)},
    "k3s2p1": {"forward": (1, 0), "grad": (0, 1), "grad_input": (1, 2)},
    "k3s1p1": {"forward": (1, 1), "grad": (1, 1), "grad_input": (2, 2)},
    "k122": {"forward": (0, 0), "grad": (0, 0), "grad_input": (0, 0)},
    "k5s1p2": {"forward": (2, 2), "grad": (2, 2), "grad_input": (4, 4)},
}


def expected_calls(case: dict) -> dict[str, int]:
    """The kernel calls of the case's rewritten program (auto on CPU: the indices strategy). A bare
    gradient split along a padded dimension runs forward + from-indices per shard (halo_exchange.py)."""
    padded = WINDOWS[case["window"]][2]["DHW".index(case["axis"])] > 0
    if case["job"] == "bare" and padded:
        return {"forward": 1, "backward_from_indices": 1}
    return EXPECTED_CALLS[case["job"]]


def aligned(case: dict) -> bool:
    """Windows inside the shards along the split dimension (no halo at all), with even shards."""
    return HALOS[case["window"]]["forward"] == HALOS[case["window"]]["grad"] == (0, 0) and case["shards"] == "even"


def problems(record: dict) -> list[str]:
    """What a case's record shows against the targets (empty: none)."""
    found = []
    if not record["bits_equal"]:
        found.append("results differ from the unsharded program's")
    calls = {kind: n for kind, n in record["kernel_calls"].items() if n}
    if calls != expected_calls(record):
        found.append(f"kernel calls {calls}, expected {expected_calls(record)}")
    if record["pool_gradient_ops_left"]:
        found.append("a scatter is left")
    plain = sum(c["bytes"] for c in record["plain_collectives"].values())
    rewritten = sum(c["bytes"] for c in record["rewritten_collectives"].values())
    if rewritten > plain:
        found.append(f"moves {rewritten} bytes between devices, XLA's program {plain}")
    if aligned(record) and rewritten:
        found.append(f"aligned windows move {rewritten} bytes")
    if record["rewritten_memory"] > record["plain_memory"] + record.get("memory_allowance", 0):
        found.append(f"{record['rewritten_memory']} bytes per device, XLA's program {record['plain_memory']}")
    lines = record["remarks"]
    if any(line.startswith(("WARNING", "ERROR")) for line in lines):
        found.append(f"warned: {lines}")
    partitioning = [line for line in lines if "per shard:" in line]
    if len(partitioning) != sum(EXPECTED_CALLS[record["job"]].values()):  # one per call the program holds
        found.append(f"partitioning remarks: {partitioning}")
    if any("gathered" in line or "regrouped" in line for line in partitioning):
        found.append(f"not split with halos: {partitioning}")
    return found + halo_problems(record)


def halo_problems(record: dict) -> list[str]:
    """Each kernel call's operands along the split dimension: the device's own planes (4) or windows
    (4 / stride) plus exactly the halo `HALOS` names."""
    from pool3d_pass.contract import CALLS, FORWARD, FORWARD_OUTPUT, INPUT, TENSOR_SHAPES

    if record["window"] == "k122" and record["axis"] == "D":
        return []  # D has a unit window: the kernel view folds it into the batch or the channels
    axis = "DHW".index(record["axis"])
    dim = axis + (1 if record["layout"] == "NDHWC" else 2)
    halos = HALOS[record["window"]]
    planes = record.get("planes", 4)
    windows = planes // WINDOWS[record["window"]][1][axis]
    found = []
    for kind, calls in record["kernel_operand_shapes"].items():
        for shapes in calls:
            for name, shape in zip(CALLS[kind].operands, shapes, strict=True):
                if TENSOR_SHAPES[name] == INPUT:
                    forward = kind in (FORWARD, FORWARD_OUTPUT) and record["job"] != "bare"
                    own, (below, above) = planes, halos["forward" if forward else "grad_input"]
                else:
                    own, (below, above) = windows, halos["grad"]
                if shape[dim] != own + below + above:
                    found.append(f"{kind}'s {name} has {shape[dim]} planes along {record['axis']}, "
                                 f"expected {own} + {below} + {above}")
    return found
