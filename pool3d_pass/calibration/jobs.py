"""A pooling layer's job as XLA runs it and as the rewritten program runs it, at a shape within the budget.

The jobs are the device check's: "gradient only" (a vjp whose primal is
unused: `x, g -> dx`), "forward + gradient" (`x, g -> (y, dx)`), and
"inference" (`x -> y`). XLA's side is JAX's own max pool (`reduce_window`
max, -inf init, JAX's explicit padding) and its vjp, exactly what a user's
program holds. The rewritten side is the calls the pass emits for that job
(the plan kind, rewriting/strategy.py): the fused `backward_from_input`; the
forward call and `backward_from_indices`; or the recompute `backward` after
XLA's forward. The layer as the program has it: alone (as `make bench`
times it), or, for an inference pool whose input an elementwise op makes
(a bias, a ReLU: `producer`), after a ReLU in both programs, which XLA
fuses into its reduce_window while the rewritten program writes it out
for the call to read (inside a model that is what decides an inference pool
near 1x: the Flax C3D inference step, docs/benchmarks.md). Inputs come after
a ReLU (half zeros: tied windows, the path real data takes).

`fit(shape)` keeps the program's shape where its tensors fit
`MEMORY_BUDGET_BYTES`, else scales it down (batch, then channels, then the
pooled axes, never below one window), so one class is timed at a size like
the program's. Imports JAX where a job is built.
"""

from __future__ import annotations

import math

from pool3d_pass.calibration.key import FORWARD_AND_GRADIENT, GRADIENT_ONLY, INFERENCE, ITEMSIZE
from pool3d_pass.contract import BACKWARD, BACKWARD_FROM_INDICES, BACKWARD_FROM_INPUT, FORWARD, FORWARD_OUTPUT
from pool3d_pass.contract.pool_config import PoolConfig, shaped, split

MEMORY_BUDGET_BYTES = 512 * 2**20  # every tensor of one timed job, both variants
JAX_DTYPES = {"f32": "float32", "bf16": "bfloat16", "f16": "float16"}
# The plan kinds of rewriting/strategy.py (a string here: calibration sits below rewriting)
FUSED, BARE_INDICES, FORWARD_REPLACED, RECOMPUTE = "fused", "bare-indices", "forward-replaced", "recompute"


def job_bytes(shape, dtype: str, pool: PoolConfig) -> int:
    """The bytes one timed job holds: x, g, y, dx, indices, twice (both variants' results)."""
    n = math.prod(shape)
    m = math.prod(pool.pooled_shape(shape))
    size = ITEMSIZE.get(dtype, 4)
    return 2 * (2 * n * size + 2 * m * size + 2 * m)


def fit(shape, dtype: str, pool: PoolConfig, budget: int = MEMORY_BUDGET_BYTES) -> tuple[int, ...]:
    """`shape` (in the pool's layout), or the largest scaled-down shape of its class whose job fits `budget`."""
    batch, channels, spatial = split(shape, pool.data_format)
    spatial = list(spatial)

    def size() -> int:
        return job_bytes(shaped(batch, channels, spatial, pool.data_format), dtype, pool)

    while size() > budget and batch > 1:
        batch = (batch + 1) // 2
    while size() > budget and channels > 1:
        channels = (channels + 1) // 2
    while size() > budget:
        axis = max(range(3), key=lambda a: spatial[a])
        smallest = max(pool.kernel_size[axis], 2 * pool.stride[axis])
        if spatial[axis] <= smallest:
            break
        spatial[axis] = max(smallest, spatial[axis] // 2)
    return shaped(batch, channels, spatial, pool.data_format)


def _xla_pool(pool: PoolConfig, dtype):
    import numpy as np
    from jax import lax

    lead = (1, 1) if pool.data_format == "NCDHW" else (1,)
    tail = () if pool.data_format == "NCDHW" else (1,)
    window = (*lead, *pool.kernel_size, *tail)
    strides = (*lead, *pool.stride, *tail)
    pads = tuple((p, p) for p in (*(0,) * len(lead), *pool.padding, *(0,) * len(tail)))
    init = np.array(-np.inf, np.dtype(dtype))  # a constant: JAX's max-pool rule (and its vjp) needs one

    def pool_fn(x):
        return lax.reduce_window(x, init, lax.max, window, strides, pads)

    return pool_fn


def xla_job(job: str, pool: PoolConfig, dtype, producer: bool = False):
    """XLA's job: JAX's max pool (and its vjp), as a user's program holds it (`producer`: after a ReLU)."""
    import jax

    pool_fn = _xla_pool(pool, dtype)
    if job == INFERENCE:
        return (lambda x: pool_fn(jax.nn.relu(x))) if producer else pool_fn
    if job == GRADIENT_ONLY:
        return lambda x, g: jax.vjp(pool_fn, x)[1](g)[0]

    def forward_and_gradient(x, g):
        y, vjp = jax.vjp(pool_fn, x)
        return y, vjp(g)[0]

    return forward_and_gradient


def kernel_job(job: str, calls: str, functions: dict, pool: PoolConfig, input_shape, dtype, producer: bool = False):
    """The rewritten job: the calls the pass emits for `calls` (a plan kind) and `job`, from `functions`."""
    import jax

    attrs = pool.attributes()
    if job == INFERENCE:
        if producer:
            return lambda x: functions[FORWARD_OUTPUT](jax.nn.relu(x), **attrs)
        return lambda x: functions[FORWARD_OUTPUT](x, **attrs)
    with_y = job == FORWARD_AND_GRADIENT
    if calls == FUSED and not with_y:
        return lambda x, g: functions[BACKWARD_FROM_INPUT](g, x, **attrs)
    if calls in (FORWARD_REPLACED, BARE_INDICES):
        def from_indices(x, g):
            y, index = functions[FORWARD](x, **attrs)
            dx = functions[BACKWARD_FROM_INDICES](g, index, input_shape=tuple(input_shape), **attrs)
            return (y, dx) if with_y else dx
        return from_indices
    pool_fn = _xla_pool(pool, dtype)

    def recompute(x, g):
        y = pool_fn(x)
        dx = functions[BACKWARD](g, x, y, **attrs)
        return (y, dx) if with_y else dx

    return recompute


def arguments(job: str, shape, pool: PoolConfig, dtype, seed: int = 0) -> tuple:
    """The job's inputs on the default device: x (after a ReLU) and, for gradients, g (made by numpy: no compile)."""
    import jax
    import numpy as np

    rng = np.random.default_rng(seed)
    x = np.maximum(rng.standard_normal(tuple(shape), np.float32), 0).astype(np.dtype(dtype))
    if job == INFERENCE:
        return jax.block_until_ready((jax.device_put(x),))
    g = rng.standard_normal(pool.pooled_shape(tuple(shape)), np.float32).astype(np.dtype(dtype))
    return jax.block_until_ready((jax.device_put(x), jax.device_put(g)))
