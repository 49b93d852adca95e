"""The gpu binding's Pallas kernels (`kernels.py`): what serves where the CUDA kernels' library is not built.

A package of its own so that the two implementations of the gpu binding
(`../cuda/`, this one) each keep their code apart; `../calls.py` chooses
between them. Importing it imports nothing; `kernels` imports JAX.
"""
