"""Recognising max-pool gradients in StableHLO.

`select_and_scatter` decides whether one op is a max-pool gradient the kernel
can compute exactly (and if not, why not); `window` maps its window onto the
kernel's 3-D geometry; `forward` finds a forward max-pool to reuse.
"""

from pool3d_pass.matching.select_and_scatter import NoMatch, PoolGradient, match_pool_gradient

__all__ = ["NoMatch", "PoolGradient", "match_pool_gradient"]
