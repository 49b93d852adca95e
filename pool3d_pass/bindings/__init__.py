"""Kernel bindings of the pool3d.max_pooling_3d_backward custom call, one per platform."""
