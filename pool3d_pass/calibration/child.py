"""The calibration child: `python -m pool3d_pass.calibration.child`, a request on stdin, one line per result.

Runs in its own process (runner.py starts it) with its own device context,
so a kernel that faults, hangs or corrupts its device takes only this
process with it. The request (JSON) names the binding by its functions (the
"module:function" of their loader, `Functions.address`, and the calls) and its settings,
and lists tasks, each a numerics battery (battery.py) or a timing (jobs.py,
timing.py) of one class. For each task it prints `START <id>`, then
`DONE <id> <verdict JSON>` (or `FAILED <id> <message>` for a Python error of
the binding's functions, itself a refusal), each line prefixed with
`MARK`, so whatever else writes to stdout is ignored; first, `DEVICE` and
the device's model and runtime (what `python -m pool3d_pass calibrate` keys
its verdicts by, having no device of its own). A class whose battery
failed in this run is not timed. A failure to start (no device of that
platform: exclusive-process mode, a NeuronCore already taken) is one
`FATAL <message>` line.
"""

from __future__ import annotations

import faulthandler
import functools
import importlib
import json
import sys
import traceback

from pool3d_pass.calibration.runner import MARK


def emit(kind: str, task_id: str = "", payload: str = "") -> None:
    print(f"{MARK} {kind} {task_id} {payload}".rstrip(), flush=True)


def binding_functions(spec: dict) -> dict:
    """call kind -> function, from the request's binding (its settings bound where it takes them)."""
    from pool3d_pass.options import BindingSettings

    settings = BindingSettings(**spec.get("settings", {}))
    module_name, name = spec["functions"]["load"].split(":")
    table = getattr(importlib.import_module(module_name), name)()
    functions = {}
    for call in spec["functions"]["calls"]:
        function = table[call]
        functions[call] = functools.partial(function, settings=settings) if spec.get("takes_settings") else function
    return functions


def numerics(task: dict, spec: dict, functions: dict, platform: str) -> dict:
    from pool3d_pass.calibration import battery
    from pool3d_pass.contract.pool_config import PoolConfig

    subject = task["subject"]
    pool = PoolConfig(subject["kernel"], subject["stride"], subject["padding"], subject["layout"])
    kinds, left_out = battery.kinds_for(platform)
    verdict = battery.run(functions, pool, subject["dtype"], eager=spec.get("eager", False),
                          departures=tuple(spec.get("departures", ())), kinds=kinds)
    verdict["left_out"] = left_out
    return verdict


def speed(task: dict, functions: dict) -> dict:
    import jax
    import jax.numpy as jnp

    from pool3d_pass.calibration import jobs, timing
    from pool3d_pass.contract.pool_config import PoolConfig

    subject = task["subject"]
    pool = PoolConfig(subject["kernel"], subject["stride"], subject["padding"], subject["layout"])
    dtype = getattr(jnp, jobs.JAX_DTYPES[subject["dtype"]])
    shape = jobs.fit(tuple(subject["shape"]), subject["dtype"], pool)
    job = subject["job"]
    arguments = jobs.arguments(job, shape, pool, dtype)
    producer = bool(subject.get("producer"))
    xla = jax.jit(jobs.xla_job(job, pool, dtype, producer)).lower(*arguments).compile()
    ours = jax.jit(jobs.kernel_job(job, subject["calls"], functions, pool, shape, dtype, producer)).lower(
        *arguments).compile()
    figures = timing.measure({"xla": timing.jax_timer(xla, arguments), "kernels": timing.jax_timer(ours, arguments)},
                             task.get("rounds", timing.ROUNDS))
    verdict = timing.verdict(figures["xla"]["samples_ms"], figures["kernels"]["samples_ms"])
    verdict["shape"] = list(shape)
    return verdict


def main() -> int:
    faulthandler.enable()  # a fault's last words on stderr, which the parent quotes
    request = json.loads(sys.stdin.read())
    spec = request["binding"]
    try:
        import jax  # (`-m` imported pool3d_pass first, which registered the kernels with XLA)

        from pool3d_pass.calibration import device

        platform = request["device_platform"]
        backend = jax.devices(platform)[0].client
        functions = binding_functions(spec)
        emit("DEVICE", "", json.dumps(device.model_and_runtime(platform, backend)))
    except Exception as error:  # noqa: BLE001 - no device or no binding here: the parent decides without us
        emit("FATAL", "", json.dumps(f"{type(error).__name__}: {error}"[:2000]))
        return 2
    failed_numerics = set()
    for task in request["tasks"]:
        task_id = task["id"]
        numerics_of = task.get("numerics_id", "")
        if task["kind"] == "speed" and numerics_of in failed_numerics:
            emit("SKIPPED", task_id, json.dumps("its numerics battery failed in this run"))
            continue
        emit("START", task_id)
        try:
            verdict = numerics(task, spec, functions, platform) if task["kind"] == "numerics" else speed(task, functions)
        except Exception as error:  # noqa: BLE001 - the binding's own error: a refusal, named
            lines = traceback.format_exception_only(type(error), error)
            emit("FAILED", task_id, json.dumps("".join(lines).strip()[:2000]))
            if task["kind"] == "numerics":
                failed_numerics.add(task_id)
            continue
        if task["kind"] == "numerics" and not verdict["passed"]:
            failed_numerics.add(task_id)
        emit("DONE", task_id, json.dumps(verdict))
    return 0


if __name__ == "__main__":
    sys.exit(main())
