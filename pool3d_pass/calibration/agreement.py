"""Several JAX processes, one decision: process 0 decides, the others take its decision.

In a multi-process JAX program (`jax.distributed.initialize`) every process
compiles the same program; if one rewrote a pool and another did not, their
programs would differ and their collectives hang. So where JAX's distributed
client is up, `shared(name, decide)` runs `decide` in process 0 only (its
verdicts, its calibration, else its prior) and publishes the decision in
the distributed key-value store under `pool3d_pass/decision/<name>`; every
other process waits for it there (up to `WAIT_S`) and decides the same. The
name holds no host-specific field (key.shared_name). A process that waits in
vain falls back to its prior, with a WARNING: that happens only where
process 0 never compiled the same program.

Only a process that has imported JAX and initialised `jax.distributed` is
looked at; nothing is imported or started here otherwise.
"""

from __future__ import annotations

import json
import logging
import sys
import threading

from pool3d_pass.calibration.request import Decision

logger = logging.getLogger("pool3d_pass")
WAIT_S = 600.0  # process 0 may be calibrating (its budget) or compiling other programs first
PREFIX = "pool3d_pass/decision/"

_decided: dict[str, object] = {}
_lock = threading.Lock()


def reset() -> None:
    _decided.clear()


def _client_and_index():
    """(key-value client, process index) where jax.distributed is initialised with several processes, else None."""
    distributed = sys.modules.get("jax._src.distributed")
    state = getattr(distributed, "global_state", None)
    client = getattr(state, "client", None)
    if client is None or (getattr(state, "num_processes", 1) or 1) <= 1:
        return None
    return client, int(getattr(state, "process_id", 0) or 0)


def several_processes() -> bool:
    return _client_and_index() is not None


def shared(name: str, decide):
    """Process 0's `decide()`, published under `name`; the others read it (see the module docstring)."""
    found = _client_and_index()
    if found is None:
        return decide()
    client, index = found
    with _lock:
        if name in _decided:
            return _decided[name]
    key = PREFIX + name
    if index == 0:
        decision = decide()
        try:
            client.key_value_set(key, json.dumps(decision.__dict__))
        except Exception as error:  # noqa: BLE001 - already published (a recompile), or the service is gone
            logger.debug("pool3d_pass calibration: publishing %s: %s", key, error)
    else:
        try:
            value = client.blocking_key_value_get(key, int(WAIT_S * 1000))
            theirs = json.loads(value)
            decision = Decision(theirs["rewrite"], f"process 0's decision ({theirs['source']})", theirs["detail"],
                                theirs["figure"])
        except Exception as error:  # noqa: BLE001 - no word from process 0: this process's own prior
            logger.warning("pool3d_pass calibration: process %d had no decision from process 0 for %s within %.0f s "
                           "(%s); deciding alone, which may differ from process 0", index, key, WAIT_S, error)
            decision = decide()
    with _lock:
        _decided[name] = decision
    return decision
