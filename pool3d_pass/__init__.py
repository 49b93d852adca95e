"""pool3d_pass: rewrite StableHLO max-pool gradients, and their forward max pools, into the pool3d contract's calls.

Public API:
  rewrite(module) -> RewriteReport        rewrite a jaxlib MLIR module in place
  rewrite_text(text) -> (text, report)    the same on textual MLIR
  add_pass(pm)                            the pass in your own PassManager
  PassOptions(target, strategy, ...)      the settings of every entry, as one checked object
  clear_caches()                          forget cached binding lowerings (jax.clear_caches() does too)
  jit, enable, disable, enabled           JAX integration (see docs/jax_integration.md)
"""

__all__ = ["Miss", "PASS_ARGUMENT", "PassOptions", "RewriteReport", "add_pass", "clear_caches", "rewrite", "rewrite_text"]

# Without jax/jaxlib/numpy (its dependencies) the package still imports, so `python -m pool3d_pass` can
# say what is missing; every public name then raises an ImportError saying so.
_JAX_MISSING: str | None = None
try:
    from pool3d_pass.bindings.registry import register_kernels as _register_kernels
    from pool3d_pass.caches import clear_caches
    from pool3d_pass.options import PassOptions
    from pool3d_pass.report import Miss, RewriteReport
    from pool3d_pass.rewriting import PASS_ARGUMENT, add_pass, rewrite, rewrite_text
except ModuleNotFoundError as _error:
    if (_error.name or "").split(".")[0] not in ("jax", "jaxlib", "numpy"):
        raise
    _JAX_MISSING = (f"pool3d_pass needs jax and jaxlib (>=0.9.0,<0.13) and numpy: {_error}; "
                    "install them first, e.g. pip install 'jax>=0.9.0,<0.13'")
    KERNEL_REGISTRATION_FAILURES: dict[str, str] = {}
else:
    # Every platform's kernels are known to XLA from here on: executables holding
    # pool3d calls (compiled, deserialized, or from JAX's persistent cache) run.
    KERNEL_REGISTRATION_FAILURES = _register_kernels()

_INTEGRATION = ("jit", "enable", "disable", "enabled")
__all__ += list(_INTEGRATION)


def __getattr__(name: str):
    if _JAX_MISSING is not None and name in __all__:
        raise ImportError(_JAX_MISSING)
    # The JAX integration imports jax; the pass and pool3d-opt need only jaxlib.
    if name in _INTEGRATION:
        from pool3d_pass import integration

        return getattr(integration, name)
    raise AttributeError(f"module 'pool3d_pass' has no attribute {name!r}")
