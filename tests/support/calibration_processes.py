"""One process of a two-process JAX program (jax.distributed on CPU) compiling an inference pool under auto.

    python calibration_processes.py PROCESS_ID PORT CACHE_DIR

Both processes register the planted CPU binding (planted_kernels.py) for "cpu"; process 0's environment has
PLANTED_SLOW=0 (its 2x2x2 kernel is the real one, faster than XLA's reduce_window here), process 1's the
slow one, and each its own verdict cache: decided alone they would differ. Prints one JSON line: whether
the compiled program holds the forward-output call, the remark, and how many calibration children this
process started.
"""

from __future__ import annotations

import json
import sys

import jax
import numpy as np
from jax import lax


def main() -> int:
    process_id, port, cache = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    jax.distributed.initialize(coordinator_address=f"localhost:{port}", num_processes=2, process_id=process_id)

    import pool3d_pass
    from pool3d_pass.bindings import registry
    from pool3d_pass.calibration import runner

    import planted_kernels

    registry.register_binding(planted_kernels.binding())
    children = []
    real_run = runner.run
    runner.run = lambda *a, **k: children.append(a) or real_run(*a, **k)
    def pool(x):
        return lax.reduce_window(x, np.float32(-np.inf), lax.max, (1, 1, 2, 2, 2), (1, 1, 2, 2, 2), "VALID")

    x = np.ones((4, 16, 16, 32, 32), np.float32)
    text = pool3d_pass.jit(pool).lower(x).compile().as_text()
    # the same decision again (this process remembers it), for its remark
    _, report = pool3d_pass.rewrite_text(jax.jit(pool).lower(x).as_text(), target="cpu")
    remarks = [event.remark() for event in report.events]
    print(json.dumps({"process": process_id, "cache": cache, "rewritten": "forward_output" in text,
                      "children": len(children), "remarks": remarks}), flush=True)
    jax.distributed.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
