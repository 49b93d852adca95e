"""Neuron binding: nkilib's NKI kernel `max_pooling_3d_backward` (Neuron SDK 2.33+, Trn2/Trn3).

- `calls.py`: the contract's `backward` call through the NKI kernel, the
  kernel's preconditions beyond the contract's, the logical NeuronCore degree
  it is launched with, and pool3d-opt's remark on NKI kernel artifacts;
- `sdk.py`: finding the Neuron SDK's nki and nkilib, and the one-line error
  naming what to install from where;
- `binding.py`: the registry's `Binding` for platform "neuron".

Without the SDK this package imports (no JAX, no SDK). See docs/neuron.md.
"""

from pool3d_pass.bindings.neuron import calls as _calls
from pool3d_pass.bindings.neuron.calls import *  # noqa: F403  the binding's public names, listed once there

__all__ = _calls.__all__
