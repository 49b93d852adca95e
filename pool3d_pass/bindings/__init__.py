"""Bindings of the pool3d contract's calls (docs/contract.md), one per platform (registry.py)."""
