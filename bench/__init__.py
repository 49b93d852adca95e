"""`make bench`: the benchmarks of pool3d_pass, run as `python -m bench.run` from the repository root.

One module per section (run.py lists them), with the cases, the timing and the
tables they share; docs/benchmarks.md says what each figure means.
"""
