"""What the tests and the checks judge results by: statements of the contract and readings of programs.

- `contract_numpy`: the contract in float64 numpy (selection, gradient,
  the summation tolerance); `float_bits`: the one bit-level comparison;
- `xla_runner`: a StableHLO text module run on XLA:CPU (the unrewritten
  program's results);
- `compiled_hlo`: what a compiled program holds (pool gradients left to
  XLA, kernel calls, collectives and the bytes they move);
- `nki_max_pool_backward_numpy`: the NKI kernel's algorithm in numpy;
  `neuron_deviations`: where the neuron binding may differ from the
  contract, and the draws that show it.

Shared by tests/ and checks/ (which never import a test module); imported
from the repository root.
"""
