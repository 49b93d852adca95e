"""Rewriting matched max-pool gradients (and their forwards) into the contract's calls, as an MLIR pass."""

from pool3d_pass.options import targets
from pool3d_pass.rewriting.max_pool_backward import PASS_ARGUMENT, add_pass, rewrite, rewrite_text

__all__ = ["PASS_ARGUMENT", "add_pass", "rewrite", "rewrite_text", "targets"]
