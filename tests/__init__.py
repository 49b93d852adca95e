"""The test suite: a package, so that pytest's append import mode puts the repository root last on the import path.

Tests then import cases/, oracles/, bench/ and checks/ as packages, and JAX 0.9's half of `make test`
(which runs the installed pool3d_pass, not the work tree's) still finds the installed
one first (pyproject.toml's pytest settings).
"""
