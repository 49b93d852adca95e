"""The reference binding: every call of the contract in pure JAX (`calls.py`), its registry entry (`binding.py`).

`pool3d_pass.bindings.reference.max_pooling_3d_<kind>` is `calls.py`'s
function, imported on first use: `import pool3d_pass` registers this binding
without importing JAX.
"""

from __future__ import annotations


def __getattr__(name: str):
    if name.startswith("max_pooling_3d_"):
        from pool3d_pass.bindings.reference import calls

        return getattr(calls, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
