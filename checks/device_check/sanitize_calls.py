"""Every call kind of the gpu binding on small shapes, for compute-sanitizer (sanitizer.py runs it).

Each program holds the calls alone; inputs are placed with `device_put` so
no other kernel runs on the device. Results are fetched (so every kernel has
finished before exit) but not checked here: the numerics stage checks
values, this script only gives the sanitizer every kernel path to watch.
Prints "calls ok: N" last. `--quick` (the dry run, interpret mode): the
first shape, f32, one layout.
"""

from __future__ import annotations

import functools
import sys

import numpy as np

CONFIGS = [  # (shape NCDHW, kernel, stride, padding): non-overlapping, C3D's first pool, k3 s2 p1, generic
    ((2, 8, 4, 8, 8), (2, 2, 2), (2, 2, 2), (0, 0, 0)),
    ((1, 8, 2, 8, 8), (1, 2, 2), (1, 2, 2), (0, 0, 0)),
    ((1, 5, 7, 6, 9), (3, 3, 3), (2, 2, 2), (1, 1, 1)),
    ((1, 3, 5, 6, 7), (3, 2, 1), (1, 2, 3), (1, 0, 0)),
]
DTYPES = ("float32", "bfloat16")


def main() -> int:
    import jax
    import ml_dtypes

    from pool3d_pass.bindings.gpu import calls

    quick = "--quick" in sys.argv[1:]
    calls_made = 0
    rng = np.random.default_rng(0)
    device = jax.devices()[0]
    for shape, kernel, stride, padding in CONFIGS[:1] if quick else CONFIGS:
        for dtype_name in DTYPES[:1] if quick else DTYPES:
            dtype = np.dtype(ml_dtypes.bfloat16) if dtype_name == "bfloat16" else np.dtype(dtype_name)
            for layout in ("NDHWC",) if quick else ("NCDHW", "NDHWC"):
                attrs = dict(kernel_size=kernel, stride=stride, padding=padding, data_format=layout)
                x = rng.integers(-3, 4, shape).astype(dtype)
                if layout == "NDHWC":
                    x = np.moveaxis(x, 1, -1)
                x_dev = jax.device_put(np.ascontiguousarray(x), device)
                y, index = jax.jit(functools.partial(calls.max_pooling_3d_forward, **attrs))(x_dev)
                g = jax.device_put(rng.integers(-3, 4, y.shape).astype(dtype), device)
                results = [
                    y, index,
                    jax.jit(functools.partial(calls.max_pooling_3d_forward_output, **attrs))(x_dev),
                    jax.jit(functools.partial(calls.max_pooling_3d_backward_from_indices,
                                              input_shape=x.shape, **attrs))(g, index),
                    jax.jit(functools.partial(calls.max_pooling_3d_backward, **attrs))(g, x_dev, y),
                    jax.jit(functools.partial(calls.max_pooling_3d_backward_from_input, **attrs))(g, x_dev),
                ]
                for r in results:
                    np.asarray(r)
                calls_made += 5
    print(f"calls ok: {calls_made}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
