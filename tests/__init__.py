"""The test suite, a package so that pytest's append import mode puts the repository root on sys.path (pyproject.toml)."""
