"""lit configuration: IR tests of pool3d-opt, checked with the Python `filecheck`."""

import os
import shutil

import lit.formats

config.name = "pool3d_pass"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.excludes = ["lit.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.environment["PATH"] = os.environ["PATH"]
# Strategy auto decides by the bindings' priors here, as on a machine never calibrated: stored verdicts only
# (none: a cache of the test run's own), never a calibration child (docs/calibration.md).
config.environment["POOL3D_CALIBRATION"] = "cached"
config.environment["POOL3D_CACHE_DIR"] = os.path.join(os.path.dirname(__file__), "Output", "pool3d-cache")

for tool in ("pool3d-opt", "filecheck"):
    if shutil.which(tool) is None:
        lit_config.fatal(f"'{tool}' is not on PATH; run `make install` (it installs both into .venv)")

config.substitutions.append(("FileCheck", "filecheck"))
