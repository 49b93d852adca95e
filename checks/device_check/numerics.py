"""Stage "numerics": every call of the gpu binding against the contract's pure-JAX reference, on the device.

Per configuration, layout and element type one program of each binding is
compiled (the five calls of the contract side by side) and run on several
kinds of input: tie-heavy integers; NaN, +-inf and -0/+0 with a plane of
-inf only; subnormal numbers (inputs and gradients); -inf planes at the low
edges (the explicit-pad form). The configurations, input kinds and rules are
first-use calibration's battery (pool3d_pass/calibration/battery.py). Rules: forward maxima
and indices bit for bit equal to the reference's; the three gradient calls
equal each other bit for bit; the gradient bit for bit where windows do not
overlap, else within the f32 summation bound. Where the CUDA kernels serve,
every result must also equal the CPU kernels' bit for bit (same summation
order). Each gpu call runs in its own program, twice on the same inputs,
each time into result buffers filled beforehand with a different byte
pattern (poison.py): both runs must give the same bits (determinism), and an
element holding the first pattern after the first run and the second after
the second was never written, a failure for every call kind. A call whose
poisoned buffers did not reach the kernel (the proof in poison.py) fails
too where the CUDA kernels serve on the device; elsewhere (the Pallas
kernels, whose programs may hold other ops; the dry run's interpret mode)
it is only noted. Then, its own stage and never skipped for
the budget, one case of more than 2^31 elements (64-bit offsets): forward,
forward_output and backward_from_indices, poisoned, checked on the device
against XLA's own reductions of the same windows.
"""

from __future__ import annotations

import numpy as np

from pool3d_pass.calibration import battery

# The battery (configurations, element types, input kinds, the cases that reach the CUDA kernels'
# device-only code, the rules) is first-use calibration's, as plain data and functions
# (pool3d_pass/calibration/battery.py): the device check and a user's first compile run the same.
CONFIGS = battery.CONFIGS
DTYPES = battery.DTYPES
KINDS = battery.KINDS
DEVICE_BRANCH_CASES = battery.DEVICE_BRANCH_CASES
# More than 2^31 elements of bf16 (4.1 GiB): element offsets past int32, k2 s2 NDHWC.
INT64_SHAPE = (1, 66, 256, 256, 512)
# The same code on a small shape, in the dry run.
INT64_DRY_RUN_SHAPE = (1, 6, 4, 8, 16)
np_dtype, finfo, same_bits, max_diff, inputs = (battery.np_dtype, battery.finfo, battery.same_bits, battery.max_diff,
                                                battery.inputs)


def poisoned_program(module, attrs, x_shape, x_dtype, device=None):
    """The five calls of `module`, each its own program with poisoned results (poison.py).

    Returns run(x, g) -> (first results, second results, {call: {"unwritten": n, "reached": bool}}).
    """
    import jax

    from checks.device_check import poison

    out = tuple((n + 2 * p - k) // s + 1 for n, k, s, p in zip(
        _spatial(x_shape, attrs["data_format"]), attrs["kernel_size"], attrs["stride"], attrs["padding"]))
    g_shape = (x_shape[0], *out, x_shape[-1]) if attrs["data_format"] == "NDHWC" else (*x_shape[:2], *out)
    x_spec, g_spec = jax.ShapeDtypeStruct(x_shape, x_dtype), jax.ShapeDtypeStruct(g_shape, x_dtype)
    i_spec = jax.ShapeDtypeStruct(g_shape, np.int16)
    calls = {
        "forward": poison.PoisonedCall(lambda x: module.max_pooling_3d_forward(x, **attrs), (x_spec,), device),
        "y_only": poison.PoisonedCall(lambda x: module.max_pooling_3d_forward_output(x, **attrs), (x_spec,), device),
        "from_indices": poison.PoisonedCall(lambda g, i: module.max_pooling_3d_backward_from_indices(
            g, i, input_shape=x_shape, **attrs), (g_spec, i_spec), device),
        "backward": poison.PoisonedCall(lambda g, x, y: module.max_pooling_3d_backward(g, x, y, **attrs),
                                        (g_spec, x_spec, g_spec), device),
        "from_input": poison.PoisonedCall(lambda g, x: module.max_pooling_3d_backward_from_input(g, x, **attrs),
                                          (g_spec, x_spec), device),
    }

    def run(x, g):
        x, g = jax.device_put(x, device), jax.device_put(g, device)
        first, second, info = {}, {}, {}

        def one(name, keys, *operands):
            a, b, facts = calls[name].twice(*operands)
            first.update(zip(keys, a))
            second.update(zip(keys, b))
            info[name] = {"unwritten": sum(facts["unwritten"]), "reached": facts["reached"]}
            return a

        y, index = one("forward", ("y", "index"), x)
        one("y_only", ("y_only",), x)
        one("from_indices", ("from_indices",), g, index)
        one("backward", ("backward",), g, x, y)
        one("from_input", ("from_input",), g, x)
        as_np = lambda d: {k: np.asarray(v) for k, v in d.items()}
        return as_np(first), as_np(second), info

    return run


def _spatial(shape, layout):
    return tuple(shape[1:4]) if layout == "NDHWC" else tuple(shape[2:5])


def poison_problems(info: dict, strict: bool) -> tuple[list[str], list[str]]:
    """(problems, notes) of the poisoned runs: unwritten elements; poison that did not reach the kernel.

    `strict`: poison that did not reach the kernel is a problem (the CUDA kernels on the device: their
    programs are the FFI calls alone), else a note (interpret mode; Pallas programs may hold other ops).
    """
    problems = [f"{name}: {facts['unwritten']} elements left unwritten (poison survived both runs)"
                for name, facts in info.items() if facts["unwritten"]]
    missed = [name for name, facts in info.items() if not facts["reached"]]
    notes = []
    if missed:
        text = (f"poisoned result buffers did not reach the kernel for {', '.join(missed)} "
                "(unwritten elements undetectable there)")
        (problems if strict else notes).append(text)
    return problems, notes


def program(module, attrs, x_shape):
    """The five calls of `module` (a binding's calls module) on (x, g), in one jitted function."""
    import jax

    def run(x, g):
        y, index = module.max_pooling_3d_forward(x, **attrs)
        return {"y": y, "index": index,
                "y_only": module.max_pooling_3d_forward_output(x, **attrs),
                "from_indices": module.max_pooling_3d_backward_from_indices(g, index, input_shape=x_shape, **attrs),
                "backward": module.max_pooling_3d_backward(g, x, y, **attrs),
                "from_input": module.max_pooling_3d_backward_from_input(g, x, **attrs)}
    return jax.jit(run)


def compare(got: dict, again: dict, ref: dict, overlap: bool, dtype_name: str, cpu: dict | None = None
            ) -> tuple[list[str], dict]:
    """Problems of one run against the reference (empty: it passed), and its figures: the battery's rules.

    `cpu`: the CPU kernels' results on the same inputs, where the CUDA kernels serve: they sum each
    gradient in the CPU scatter's order, so every result must equal the CPU's bit for bit.
    """
    return battery.compare(got, ref, overlap, dtype_name, again=again, cpu=cpu)


def cpu_kernels():
    """The CPU binding's calls module where its kernels load (None: not here), for a bit-for-bit reference."""
    try:
        from pool3d_pass.bindings import cpu

        cpu.register()
        return cpu
    except Exception:  # noqa: BLE001 - no CPU kernels: the reference binding alone
        return None


def strict_poison(dry_run: bool) -> bool:
    """Whether poison that misses the kernel fails a call: on the device, where the CUDA kernels serve."""
    from pool3d_pass.bindings.gpu.binding import implementation

    return not dry_run and implementation() == "cuda"


def run(rec, budget, calls_module, reference_module, log, cpu_module=None, dry_run: bool = False) -> int:
    """Records one row per (config, layout, dtype, inputs); returns the number of failures.

    `cpu_module`: also compare bit for bit with the CPU kernels (run on the host), where the CUDA
    kernels serve.
    """
    import time

    import jax

    failures, per_compile = 0, 20.0
    # input kinds the device's compiler cannot carry through plain XLA ops (XLA:CPU flushes subnormals:
    # the dry run's interpret-mode kernels) are left out there, saying why, as first use does
    kinds, left_out = battery.kinds_for(jax.devices()[0].platform)
    for kind, why in left_out.items():
        rec.record("skipped", item=f"{kind} inputs", reason=why)
        log(f"numerics: {kind} inputs left out: {why}")
    configs = [(*c, DTYPES, kinds) for c in CONFIGS] + [
        (c["shape"], c["kernel"], c["stride"], c["padding"], c["dtypes"], tuple(k for k in c["kinds"] if k in kinds))
        for c in DEVICE_BRANCH_CASES]
    for shape, kernel, stride, padding, dtypes, kinds in configs:
        overlap = any(s < k for k, s in zip(kernel, stride))
        for dtype_name in dtypes:
            for layout in ("NCDHW", "NDHWC"):
                attrs = dict(kernel_size=kernel, stride=stride, padding=padding, data_format=layout)
                label = f"{layout} {dtype_name} {shape} k{kernel} s{stride} p{padding}"
                if not budget.fits(per_compile):
                    rec.record("skipped", item=label, reason=f"budget: {budget.left():.0f} s left")
                    continue
                start = time.monotonic()
                x_shape = shape if layout == "NCDHW" else (shape[0], *shape[2:], shape[1])
                ours = poisoned_program(calls_module, attrs, x_shape, np_dtype(dtype_name), jax.devices()[0])
                theirs = program(reference_module, attrs, x_shape)
                on_cpu = None if cpu_module is None else program(cpu_module, attrs, x_shape)
                for seed, kind in enumerate(kinds):
                    x, g = inputs(shape, kernel, stride, padding, layout, dtype_name, kind, seed)
                    got, again, info = ours(x, g)
                    ref = {k: np.asarray(v) for k, v in theirs(x, g).items()}
                    cpu = None
                    if on_cpu is not None:
                        host = jax.devices("cpu")[0]
                        cpu = {k: np.asarray(v) for k, v in on_cpu(jax.device_put(x, host), jax.device_put(g, host)).items()}
                    problems, figures = compare(got, again, ref, overlap, dtype_name, cpu)
                    poisoned, notes = poison_problems(info, strict_poison(dry_run))
                    problems += poisoned
                    failures += bool(problems)
                    rec.record("calls", item=label, inputs=kind, dtype=dtype_name, layout=layout, overlap=overlap,
                               problems=problems, notes=notes, poison=info, **figures)
                    rec.table(f"| numerics | {label} | {kind} | {'ok' if not problems else 'FAIL: ' + '; '.join(problems)} |")
                per_compile = max(5.0, time.monotonic() - start)
                log(f"numerics {label}: {time.monotonic() - start:.1f} s")
    jax.clear_caches()
    return failures


def int64_expected(x, kernel):
    """(y, first-maximum tap, dx for g) of non-overlapping NDHWC windows by XLA's own reshapes and reductions.

    Exact for inputs without NaN: max is exact, argmax takes the first maximum in the window's (d, h, w)
    order (the contract's tap order), and each dx element is g at its window's tap or zero (no sums).
    """
    import jax.numpy as jnp

    b, d, h, w, c = x.shape
    kd, kh, kw = kernel
    windows = x.reshape(b, d // kd, kd, h // kh, kh, w // kw, kw, c).transpose(0, 1, 3, 5, 7, 2, 4, 6)
    windows = windows.reshape(*windows.shape[:5], kd * kh * kw)
    return windows.max(axis=-1), jnp.argmax(windows, axis=-1).astype(jnp.int16)


def run_int64(rec, budget, calls_module, log, dry_run: bool = False) -> int:
    """More than 2^31 bf16 elements, NDHWC k2 s2, each call poisoned; checked on the device.

    The dry run runs the same code on a small shape.
    """
    import jax
    import jax.numpy as jnp

    from checks.device_check import poison

    shape = INT64_DRY_RUN_SHAPE if dry_run else INT64_SHAPE
    elements = int(np.prod(shape))
    label = f"NDHWC bfloat16 {shape} k2 s2 ({elements} elements{': 64-bit offsets' if elements > 2**31 else ''})"
    kernel = (2, 2, 2)
    attrs = dict(kernel_size=kernel, stride=kernel, padding=(0, 0, 0), data_format="NDHWC")
    b, d, h, w, c = shape
    pooled = (b, d // 2, h // 2, w // 2, c)
    x_spec = jax.ShapeDtypeStruct(shape, jnp.bfloat16)
    g_spec = jax.ShapeDtypeStruct(pooled, jnp.bfloat16)
    i_spec = jax.ShapeDtypeStruct(pooled, jnp.int16)
    problems, notes, facts = [], [], {}
    bits = lambda a: jax.lax.bitcast_convert_type(a, jnp.uint16) if a.dtype == jnp.bfloat16 else a
    poisoned_bits = poison.pattern_bits(np.dtype(jnp.bfloat16), poison.PATTERNS[0])
    try:
        kx, kg = jax.random.split(jax.random.PRNGKey(7))
        x = jax.random.normal(kx, shape, jnp.bfloat16)
        g = jax.random.normal(kg, pooled, jnp.bfloat16)
        y_ref, index_ref = jax.jit(int64_expected, static_argnums=1)(x, kernel)
        calls = {
            "forward": poison.PoisonedCall(lambda x: calls_module.max_pooling_3d_forward(x, **attrs), (x_spec,)),
            "forward_output": poison.PoisonedCall(
                lambda x: calls_module.max_pooling_3d_forward_output(x, **attrs), (x_spec,)),
            "backward_from_indices": poison.PoisonedCall(lambda g, i: calls_module.max_pooling_3d_backward_from_indices(
                g, i, input_shape=shape, **attrs), (g_spec, i_spec)),
        }
        # one run each, poisoned with NaN bytes: the expected values hold no NaN, so an unwritten element differs
        (y, index), reached_forward = calls["forward"].call(poison.PATTERNS[0], x)
        (y_only,), reached_output = calls["forward_output"].call(poison.PATTERNS[0], x)
        (dx,), reached_gather = calls["backward_from_indices"].call(poison.PATTERNS[0], g, index_ref)

        @jax.jit
        def check(y, index, y_only, dx, x, g, y_ref, index_ref):
            dx_ref = int64_expected_dx(g, index_ref, x.shape, kernel)
            # counts per (batch, depth) slice, each below 2^31 (int32: JAX's default); summed on the host
            count = lambda mask: jnp.sum(mask, axis=tuple(range(2, mask.ndim)), dtype=jnp.int32)
            # values, not bits: -0 and +0 are one here (no input is zero by design); a NaN poison never equals
            same = lambda a, r: count(a != r)
            poisoned = lambda a: count(bits(a) == poisoned_bits)
            return {"forward y": same(y, y_ref), "forward indices": same(index, index_ref),
                    "forward_output": same(y_only, y_ref), "backward_from_indices": same(dx, dx_ref),
                    "poison left in y": poisoned(y), "poison left in forward_output": poisoned(y_only),
                    "poison left in dx": poisoned(dx)}

        facts = {k: int(np.asarray(v, np.int64).sum()) for k, v in check(y, index, y_only, dx, x, g, y_ref,
                                                                          index_ref).items()}
        problems = [f"{k}: {n} elements differ" if not k.startswith("poison") else f"{k}: {n} elements unwritten"
                    for k, n in facts.items() if n]
        missed = [n for n, ok in (("forward", reached_forward), ("forward_output", reached_output),
                                  ("backward_from_indices", reached_gather)) if not ok]
        if missed:
            text = f"poisoned result buffers did not reach the kernel for {', '.join(missed)}"
            (problems if strict_poison(dry_run) else notes).append(text)
    except Exception as error:  # noqa: BLE001 - recorded: an allocation or launch failure is a result
        problems = [f"{type(error).__name__}: {str(error).splitlines()[0][:300] if str(error) else ''}"]
    rec.record("calls", item=label, inputs="normal", dtype="bfloat16", layout="NDHWC", overlap=False,
               problems=problems, notes=notes, int64=elements > 2**31, elements=elements, counts=facts)
    rec.table(f"| numerics | {label} | normal | {'ok' if not problems else 'FAIL: ' + '; '.join(problems)} |")
    log(f"numerics int64: {problems or 'ok'}")
    jax.clear_caches()
    return int(bool(problems))


def int64_expected_dx(g, index, x_shape, kernel):
    """dx of non-overlapping NDHWC windows: each window's g at its tap `index`, zero elsewhere."""
    import jax.numpy as jnp

    b, d, h, w, c = x_shape
    kd, kh, kw = kernel
    taps = jnp.arange(kd * kh * kw, dtype=jnp.int16)
    blocks = jnp.where(index[..., None] == taps, g[..., None], jnp.zeros((), g.dtype))  # (b, D, H, W, c, taps)
    blocks = blocks.reshape(b, d // kd, h // kh, w // kw, c, kd, kh, kw).transpose(0, 1, 5, 2, 6, 3, 7, 4)
    return blocks.reshape(x_shape)
