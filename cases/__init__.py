"""The cases that `make bench`, the checks (checks/) and the tests run: which problems, on which inputs.

- `pooling`: one pooling layer per `Case` (shape, layout, window, dtype),
  the jobs a layer runs ("gradient only", "forward + gradient") and their
  seeded inputs: the bench's rows, the device and compile checks' cases;
- `spatial`: the spatially sharded programs, their pairwise selection, and
  what each must show;
- `fixtures`: the lowered programs under tests/fixtures (their manifest)
  and tie-heavy inputs for them;
- `hostile_mlir`: pool3d-opt's hostile inputs (syntactic and semantic
  mutations of valid modules, nesting and alias bombs), as the fuzz check
  and the CLI tests draw them.

The numerics battery that first-use calibration and the device check run is
the package's own (`pool3d_pass/calibration/battery.py`), not here: users
run it. What results are judged against is `oracles/`. Nothing here is a
test; tests, bench and checks import it from the repository root.
"""
