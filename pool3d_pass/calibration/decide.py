"""The decision per call: this machine's verdicts, else the binding's prior; an explicit strategy is the user's.

`Decider` is made once per pass run (rewriting/strategy.py) and asked, for
each call the pass would emit, `decide(request)`:

1. No binding (neutral output): nothing to decide.
2. Numerics: a stored battery verdict that failed refuses the class on this
   device under every strategy (a WARNING names the failing case, once); on
   a `verify_first` platform (GPU, Neuron) whose device this process has, so
   does a class whose battery has not passed here (calibration "off" or
   "cached" without a verdict, no child could run, the budget spent).
3. An explicit strategy ("indices", "recompute") uses the kernels.
4. `auto`: this machine's speed verdict, where one is stored; else the
   binding's prior (`Calibration.prior`: the CPU's stored table, the GPU's
   stored device run); a binding without one uses its kernels.

Under calibration "first-use", a class without a verdict is measured first
(runner.py: a child process) where the binding wants it: the numerics
battery before any use on a `verify_first` platform (GPU, Neuron) and before
any timing; the timing where `auto`'s prior is unsettled (every GPU class,
the CPU's thin margins). The first such class of a module brings every other
class of that module into the same child (`collect`). Within the process's
budget (modes.py); beyond it such a class stays the platform compiler's,
said once. A device one process owns (NeuronCores) is never calibrated here
once the program holds it: a WARNING says so once, and its classes stay the
platform compiler's.

Several JAX processes (jax.distributed) decide once: process 0 decides, the
others take its decision (agreement.py), so every process compiles the same
program. No JAX is imported here.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import logging
import threading
import time
from collections.abc import Callable

from pool3d_pass.calibration import agreement, battery, modes, runner, timing
from pool3d_pass.calibration.device import identify, jax_backend
from pool3d_pass.calibration.key import NUMERICS, SPEED, Device, shared_name
from pool3d_pass.calibration.request import Decision, Request
from pool3d_pass.calibration.store import Store

logger = logging.getLogger("pool3d_pass")


NOTHING_TO_DECIDE = Decision(True, "")

# --- process-wide state: the budget, what failed to start, what to say once -------

_lock = threading.RLock()
_spent = {"seconds": 0.0}
_not_here: dict[tuple, str] = {}  # (platform, kernels) -> why no child can calibrate there in this process
_this_process: dict[str, Decision] = {}  # digest of a class -> a decision that holds for this process only


def spent_s() -> float:
    return _spent["seconds"]


def charge(seconds: float) -> None:
    """Count `seconds` of calibration done elsewhere (ahead.py) against this process's budget."""
    with _lock:
        _spent["seconds"] += seconds


def reset() -> None:
    """Forget this process's budget use and in-memory decisions (tests; a long-running server)."""
    with _lock:
        _spent["seconds"] = 0.0
        _not_here.clear()
        _this_process.clear()
        agreement.reset()
        _say_once.cache_clear()


@functools.cache
def _say_once(level: int, message: str) -> None:
    logger.log(level, "pool3d_pass calibration: %s", message)


def binding_spec(binding, settings, kernels: str) -> dict:
    """What the child needs to call the binding's functions (runner.py, child.py): their loader by name."""
    functions = {"load": binding.functions.address, "calls": list(binding.functions)}
    return {"platform": binding.platform, "functions": functions,
            "lowering_platform": binding.lowering_platform, "takes_settings": binding.takes_settings,
            "settings": dataclasses.asdict(settings), "eager": binding.calibration.eager,
            "departures": list(battery.DEPARTURES.get(binding.platform, ())), "kernels": kernels}


def _when(entry: dict) -> str:
    return f"this machine's calibration of {entry.get('stored', 'an unknown time')}"


def numerics_decision(entry: dict) -> Decision | None:
    """A refusal where the stored battery failed (None: it passed)."""
    verdict = entry["verdict"]
    if verdict["passed"]:
        return None
    return Decision(False, _when(entry), f"the kernels failed the numerics battery on this device: {verdict.get('failed')}")


def speed_decision(entry: dict) -> Decision:
    verdict = entry["verdict"]
    figure = timing.describe(verdict)
    if verdict["rewrite"]:
        return Decision(True, _when(entry), figure=figure)
    return Decision(False, _when(entry), f"XLA as fast or faster, or within the spread: XLA time / kernel time {figure}",
                    speed=True)


class Decider:
    """The decisions of one pass run (see the module docstring)."""

    def __init__(self, options, binding, settings, *, collect: Callable[[], list[Request]] | None = None,
                 store: Store | None = None):
        self.options = options
        self.binding = binding
        self.settings = settings
        self.mode = modes.mode(options)
        self.explicit = options.strategy != "auto"
        self.collect = collect  # every Request of the module, for one child (set by the pass run)
        self.store = store
        self._device: Device | None | bool = False  # False: not looked up yet

    # --- what this run knows ---

    def device(self) -> Device | None:
        if self._device is False:
            self._device = None
            if self.mode != modes.OFF and self.binding is not None and not self.options.neutral:
                try:
                    self._device = identify(self.options.target, self.binding, self.settings)
                except Exception as error:  # noqa: BLE001 - no key, no verdicts: the prior decides
                    _say_once(logging.WARNING, f"the device could not be identified ({type(error).__name__}: "
                                               f"{error}); no verdict can be looked up (GPU, Neuron: nothing is "
                                               "rewritten for this device)")
        return self._device

    def _store(self) -> Store:
        if self.store is None:
            self.store = Store()
        return self.store

    def _prior(self, request: Request):
        rule = self.binding.calibration.prior
        return None if rule is None else rule(request.signature, request.input_shape, self.settings)

    def _wants(self, request: Request) -> tuple[bool, bool]:
        """(numerics wanted, timing wanted) on first use of this class here."""
        if self.mode != modes.FIRST_USE or self.device() is None:
            return False, False
        prior = None if self.explicit else self._prior(request)
        speed = prior is not None and not prior.settled
        return speed or self.binding.calibration.verify_first, speed

    # --- the decision ---

    def decide(self, request: Request) -> Decision:
        if self.options.neutral or self.binding is None:
            return NOTHING_TO_DECIDE
        if not agreement.several_processes():
            return self._decide_here(request)
        subject = request.subject()
        device = self.device()
        name = shared_name(self.options.target, device.kernels if device else self.binding.platform, subject,
                           self.options.strategy)
        return agreement.shared(name, lambda: self._decide_here(request))

    def _decide_here(self, request: Request) -> Decision:
        subject = request.subject()
        device = self.device()
        numerics_wanted, speed_wanted = self._wants(request)
        if numerics_wanted or speed_wanted:
            refusal = self._calibrate_if_needed(request, numerics_wanted, speed_wanted)
            if refusal is not None:
                return refusal
        numerics = None if device is None else self._store().read(device, subject.numerics())
        if numerics is not None and (refused := numerics_decision(numerics)) is not None:
            _say_once(logging.WARNING, f"{self.binding.platform} kernels refused for {subject.numerics().describe()} "
                                       f"on {device.describe()}: {numerics['verdict'].get('failed')}")
            return refused
        if numerics is None and (unverified := self._unverified(device)) is not None:
            return unverified
        if self.explicit:
            return Decision(True, f"the explicit strategy '{self.options.strategy}'")
        if device is not None:
            entry = self._store().read(device, subject)
            if entry is not None:
                return speed_decision(entry)
        prior = self._prior(request)
        if prior is None:
            return Decision(True, f"the {self.binding.platform} binding (no speed figures to weigh: its kernels are "
                                  "used wherever they run)")
        return Decision(prior.rewrite, prior.source, "" if prior.rewrite else prior.reason,
                        figure=prior.reason if prior.rewrite and not prior.settled else "", speed=not prior.rewrite)

    def _unverified(self, device: Device | None) -> Decision | None:
        """On a `verify_first` platform whose device this process has: a refusal of a class with no battery verdict.

        No kernel runs on such a device before it gave the contract's results there, whatever the strategy
        and the calibration mode. A compile without the device (deviceless, `pool3d-opt --target=gpu` on a
        laptop) runs nothing here: the prior decides.
        """
        if not self.binding.calibration.verify_first or jax_backend(self.options.target) is None:
            return None
        if self.mode == modes.OFF:
            why = "calibration is 'off'"
        elif self.mode == modes.CACHED:
            why = "calibration is 'cached' and no verdict is stored for this class"
        elif device is None:
            why = "the device could not be identified"
        else:
            why = _not_here.get((device.platform, device.kernels)) or "no calibration could run"
            why = {"held": "its device belongs to one process, and this program holds it"}.get(why, why)
        platform = self.binding.platform
        return Decision(False, "the numerics rule (no kernel before its battery passed on this device)",
                        f"the {platform} kernels have not passed the numerics battery on this device ({why}); "
                        f"`python -m pool3d_pass calibrate --platform {platform}` verifies them ahead of time")

    def _calibrate_if_needed(self, request: Request, numerics_wanted: bool, speed_wanted: bool) -> Decision | None:
        """Measure this class (and the module's others) where it has no verdict; a refusal where it cannot."""
        device = self.device()
        store = self._store()
        subject = request.subject()
        numerics = store.read(device, subject.numerics())
        if numerics is not None and not numerics["verdict"]["passed"]:
            return None  # refused by its battery: nothing to time
        missing_numerics = numerics_wanted and numerics is None
        missing_speed = speed_wanted and store.read(device, subject) is None
        if not (missing_numerics or missing_speed):
            return None
        keys = (store.path(device, subject.numerics()).name, store.path(device, subject).name)
        if (known := _in_this_process(keys)) is not None:
            return known
        where = (device.platform, device.kernels)
        if where in _not_here:
            return None  # said once: the prior decides
        if self.binding.calibration.exclusive_device and jax_backend(device.platform) is not None:
            _not_here[where] = "held"
            _say_once(logging.WARNING, f"the {device.platform} kernels were not verified on this {device.model}: its "
                                       "device belongs to one process, and this program holds it; calibrate before "
                                       "the program takes it (pool3d_pass.enable() before the first computation, or "
                                       "`python -m pool3d_pass calibrate --platform "
                                       f"{device.platform}` ahead of time); until then its classes stay the platform "
                                       "compiler's")
            return None
        with _lock:
            requests = [request]
            if self.collect is not None:
                try:
                    requests += [r for r in self.collect() if r != request]
                except Exception as error:  # noqa: BLE001 - the class alone, then
                    logger.debug("pool3d_pass calibration: collecting the module's classes failed: %s", error)
            calibrate(self, requests)
        return _in_this_process(keys)


def _in_this_process(keys) -> Decision | None:
    return next((_this_process[k] for k in keys if k in _this_process), None)


def _tasks(decider: Decider, requests: list[Request]) -> tuple[list[dict], dict]:
    """The child's tasks for what `requests` still miss, and task id -> (subject)."""
    device, store = decider.device(), decider._store()
    tasks, subjects, seen = [], {}, set()
    counter = itertools.count()
    for request in requests:
        numerics_wanted, speed_wanted = decider._wants(request)
        subject = request.subject()
        numerics = subject.numerics()
        numerics_id = store.path(device, numerics).name
        stored = store.read(device, numerics)
        if stored is not None and not stored["verdict"]["passed"]:
            continue  # refused by its battery: nothing to time
        if (numerics_wanted or speed_wanted) and numerics_id not in seen and stored is None:
            seen.add(numerics_id)
            task_id = f"n{next(counter)}"
            tasks.append({"id": task_id, "kind": NUMERICS, "subject": dataclasses.asdict(numerics)})
            subjects[task_id] = numerics
        speed_id = store.path(device, subject).name
        if speed_wanted and speed_id not in seen and store.read(device, subject) is None:
            seen.add(speed_id)
            task_id = f"s{next(counter)}"
            numerics_task = next((t for t, s in subjects.items() if s == numerics), "")
            tasks.append({"id": task_id, "kind": SPEED, "subject": dataclasses.asdict(subject),
                          "numerics_id": numerics_task})
            subjects[task_id] = subject
    return tasks, subjects


def calibrate(decider: Decider, requests: list[Request]) -> dict:
    """Measure what `requests` miss on the decider's device, store it; {subject: entry or reason}."""
    device, store = decider.device(), decider._store()
    left = modes.budget_s() - _spent["seconds"]
    results: dict = {}
    tasks, subjects = _tasks(decider, requests)
    if not tasks:
        return results
    if left <= 0:
        for subject in subjects.values():
            _this_process[store.path(device, subject).name] = Decision(
                False, "the calibration budget",
                f"no verdict for this class on this machine, and this process's calibration budget "
                f"({modes.budget_s():.0f} s) is spent", speed=True)  # said once, below
        _say_once(logging.WARNING, f"the calibration budget of {modes.budget_s():.0f} s is spent in this process; "
                                   "classes without a verdict stay the platform compiler's (raise "
                                   "POOL3D_CALIBRATION_BUDGET_S, or run `python -m pool3d_pass calibrate` ahead)")
        return results
    start = time.monotonic()
    with store.lock(left) as held:
        if not held:
            return results
        # another process may have measured them while we waited
        tasks, subjects = _tasks(decider, requests)
        if not tasks:
            return results
        left = modes.budget_s() - _spent["seconds"] - (time.monotonic() - start)
        names = "; ".join(sorted({s.numerics().describe() for s in subjects.values()}))
        logger.info("pool3d_pass calibration: measuring %d class(es) on this %s (a child process, at most %.0f s): %s",
                    len({s.numerics() for s in subjects.values()}), device.describe(), max(left, 0), names)
        outcome = runner.run(binding_spec(decider.binding, decider.settings, device.kernels), device.platform,
                             tasks, max(left, 0.0))
    _spent["seconds"] += time.monotonic() - start
    if outcome.fatal is not None:
        _not_here[(device.platform, device.kernels)] = outcome.fatal
        unverified = ("classes never verified here stay the platform compiler's"
                      if decider.binding.calibration.verify_first else "the prior decides")
        _say_once(logging.WARNING, f"no calibration child could use this {device.describe()} ({outcome.fatal}); "
                                   f"{unverified} (GPUs in exclusive-process mode: run `python -m pool3d_pass "
                                   "calibrate` before the program starts)")
        return results
    for task_id, subject in subjects.items():
        if task_id in outcome.verdicts:
            verdict = outcome.verdicts[task_id]
            if subject.kind == SPEED and "shape" in verdict:
                subject = dataclasses.replace(subject, shape=tuple(verdict["shape"]))
            results[subject] = store.write(device, subject, verdict)
        elif task_id in outcome.refusals:
            why = outcome.refusals[task_id]
            verdict = ({"passed": False, "failed": why, "cases": 0} if subject.kind == NUMERICS else
                       {"rewrite": False, "ratio": 0.0, "spread": 0.0, "xla_ms": 0.0, "kernels_ms": 0.0,
                        "rounds": 0, "failed": why})
            if subject.kind == SPEED and why.startswith("its numerics battery failed"):
                continue  # the numerics verdict refuses it
            results[subject] = store.write(device, subject, verdict)
            if subject.kind == SPEED:
                _this_process[store.path(device, subject).name] = Decision(
                    False, _when(results[subject]), f"the rewritten job failed in the calibration child: {why}")
        elif task_id in outcome.timed_out:
            why = outcome.timed_out[task_id]
            results[subject] = why
            _this_process[store.path(device, subject).name] = Decision(
                False, "this process's calibration", f"calibration of this class {why}")
    return results
