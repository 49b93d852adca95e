"""Strategy `auto` decided on the machine that runs the program: kernels verified and timed there, and remembered.

XLA's GEMM autotuning, Triton's `autotune` and cuDNN's `benchmark` decide on
the device that runs the program, once, and remember; so does this package,
for the pool3d kernels (docs/calibration.md):

* `modes.py`: the option's words (options.py's) and the process's budget;
* `key.py`: what a verdict is about: the device (platform, model, runtime,
  the kernels' build, pool3d_pass/JAX versions) and the configuration class
  (job, calls, layout, element type, window, size bucket, fused producer);
  `device.py` reads the device from what the process already has;
* `store.py`: where verdicts are remembered: one JSON file per verdict in the
  user's cache folder (`$POOL3D_CACHE_DIR`), versioned, atomic, locked;
* `battery.py`: the numerics battery as plain data (configurations, element
  types, layouts, input kinds) and its rules against the reference binding;
  the device check (checks/device_check) runs the same;
* `timing.py`: interleaved timing with a spread, and the verdict it gives;
  the device check times with it too;
* `jobs.py`: a pooling layer's job, XLA's and rewritten (the calls the pass
  emits), at a shape within the memory budget;
* `child.py` / `runner.py`: the battery and the timing in a child process
  (its own device context, a time budget): a kernel that faults, hangs or is
  wrong is a refusal, never the user's crash;
* `decide.py`: the decision per call (`request.py`'s `Request` in, a
  `Decision` out) under the pass option `calibration` ("first-use",
  "cached", "off"): a verdict, else the binding's prior;
* `agreement.py`: several JAX processes decide once (process 0) through
  `jax.distributed`'s key-value store;
* `ahead.py`: calibration before a program holds its device (`enable()` for
  NeuronCores) and for `python -m pool3d_pass calibrate` (cli/calibrate.py).

Only `child.py`, `jobs.py`, `battery.py`'s runners and `timing.py`'s timers
import JAX; the decision never makes a JAX client (the device is read from
the backends the process already has).
"""

from pool3d_pass.calibration.modes import CACHED, FIRST_USE, MODES, OFF

__all__ = ["CACHED", "FIRST_USE", "MODES", "OFF"]
