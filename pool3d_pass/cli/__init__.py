"""Command-line tools: `pool3d-opt`, an mlir-opt style driver for the pass."""
