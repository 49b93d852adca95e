"""Calibration ahead of time: before a program holds its device, or for classes named on a command line.

`measure(binding, settings, subjects, seconds)` runs the numerics battery and
(for speed subjects) the timing of every subject given, again, in one child
on the binding's platform, and stores the verdicts under the device the
child found (this process makes no device client: the device may be one a
single process owns). `python -m pool3d_pass calibrate` prints what it
returns (cli/calibrate.py).

`before_program(options)` is what `enable()` runs: for each platform whose
device one process owns (NeuronCores; `Calibration.exclusive_device`) and
whose binding can run here (its SDK imports) but whose device this process
has not taken yet, the battery for the classes programs use most
(`battery.CONFIGS`' windows, both layouts, every element type), within the
calibration budget, skipping what is stored. Only under calibration
"first-use". No JAX is imported here beyond what the child needs.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import time

from pool3d_pass.calibration import battery, decide, modes, runner
from pool3d_pass.calibration.device import jax_backend, kernels, versions
from pool3d_pass.calibration.key import NUMERICS, Device, Subject
from pool3d_pass.calibration.store import Store

logger = logging.getLogger("pool3d_pass")


@dataclasses.dataclass
class Measured:
    """One subject's outcome: the stored entry, or why nothing was stored."""

    subject: Subject
    entry: dict | None = None
    why: str = ""


def measure(binding, settings, subjects: list[Subject], seconds: float, *, store: Store | None = None,
            device_platform: str | None = None, rounds: int | None = None) -> tuple[Device | None, list[Measured]]:
    """Measure `subjects` (numerics first for each speed subject) on `binding`'s device; store and return them."""
    store = store or Store()
    platform = device_platform or binding.platform
    digest = kernels(binding, settings)
    tasks, by_id, counter = [], {}, itertools.count()
    numerics_ids = {}
    for subject in subjects:
        numerics = subject.numerics()
        if numerics not in numerics_ids:
            numerics_ids[numerics] = task_id = f"n{next(counter)}"
            tasks.append({"id": task_id, "kind": NUMERICS, "subject": dataclasses.asdict(numerics)})
            by_id[task_id] = numerics
        if subject.kind != NUMERICS:
            task_id = f"s{next(counter)}"
            task = {"id": task_id, "kind": subject.kind, "subject": dataclasses.asdict(subject),
                    "numerics_id": numerics_ids[numerics]}
            if rounds:
                task["rounds"] = rounds
            tasks.append(task)
            by_id[task_id] = subject
    outcome = runner.run(decide.binding_spec(binding, settings, digest), platform, tasks, seconds)
    if outcome.fatal is not None or outcome.device is None:
        why = outcome.fatal or "the calibration child found no device"
        return None, [Measured(s, None, why) for s in by_id.values()]
    device = Device(binding.platform, *outcome.device, digest, versions())
    results = []
    for task_id, subject in by_id.items():
        if task_id in outcome.verdicts:
            verdict = outcome.verdicts[task_id]
            if "shape" in verdict:
                subject = dataclasses.replace(subject, shape=tuple(verdict["shape"]))
            results.append(Measured(subject, store.write(device, subject, verdict)))
        elif task_id in outcome.refusals:
            why = outcome.refusals[task_id]
            if subject.kind == NUMERICS:
                results.append(Measured(subject, store.write(device, subject, {"passed": False, "failed": why,
                                                                               "cases": 0})))
            else:
                results.append(Measured(subject, None, why))
        else:
            results.append(Measured(subject, None, outcome.timed_out.get(task_id, "not measured")))
    return device, results


def common_subjects(binding) -> list[Subject]:
    """The numerics classes `before_program` checks: the battery's windows x layouts x element types."""
    subjects = []
    for (_, kernel, stride, padding), layout, dtype in itertools.product(
            battery.CONFIGS, battery.LAYOUTS, ("bf16", "f32", "f16")):
        subjects.append(Subject(NUMERICS, layout, dtype, kernel, stride, padding))
    return subjects


def before_program(options=None, *, device_platform: str | None = None) -> list[Measured]:
    """At `enable()`: the battery on devices one process owns, before this program takes them (see above)."""
    from pool3d_pass.bindings.registry import binding_for, platforms
    from pool3d_pass.options import binding_settings

    if modes.mode(options) != modes.FIRST_USE:
        return []
    done = []
    for platform in platforms():
        binding = binding_for(platform)
        if not binding.calibration.exclusive_device or jax_backend(platform) is not None:
            continue
        try:
            binding.require()
        except Exception:  # noqa: BLE001 - not this machine's platform
            continue
        left = modes.budget_s() - decide.spent_s()
        if left <= 0:
            break
        settings = binding_settings(options)
        start = time.monotonic()
        logger.info("pool3d_pass calibration: verifying the %s kernels before the program takes the device "
                    "(a child process, at most %.0f s)", platform, left)
        _, measured = measure(binding, settings, common_subjects(binding), left, device_platform=device_platform)
        decide.charge(time.monotonic() - start)
        done += measured
        failed = [m for m in measured if m.entry is not None and not m.entry["verdict"].get("passed", True)]
        for m in failed:
            logger.warning("pool3d_pass calibration: %s kernels refused for %s: %s", platform, m.subject.describe(),
                           m.entry["verdict"].get("failed"))
    return done
