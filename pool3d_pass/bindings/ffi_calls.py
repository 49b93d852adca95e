"""Every binding's public functions, generated from `contract.CALLS`; the FFI bindings' calls entirely.

`contract_function(kind, implement)` makes the public function of one call
(its signature, attribute defaults, name and docstring) around a binding's
one implementation function, so no binding writes a wrapper per call.

A binding whose kernels are typed XLA FFI handlers registered under the
contract's target names (the CPU kernels; the CUDA kernels) needs no code per
call: `make_calls(register)` gives the five public functions,
`max_pooling_3d_<kind>(*operands, kernel_size=, stride=, padding=,
data_format=, output_format=)` (plus `input_shape=` where the call takes it),
each one `ffi_call` of `contract.TARGETS[kind]` with the call's result types:
a result named like the input (`grad_input`) has the input's shape, the
pooled ones (`output`, `indices`) the pooled shape, indices int16. Lowered,
each is exactly the contract's custom call, so a program holding it carries
no kernel code. Invalid attributes are the kernels' to reject, with an error
naming them (their shared validation); the shapes here stay computable for
them. No JAX is imported until a function is called.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence

import numpy as np

from pool3d_pass.contract import CALLS, INDEX_TYPE, INPUT, LAYOUTS, TARGETS, TENSOR_SHAPES
from pool3d_pass.contract.pool_config import PoolConfig
from pool3d_pass.options import binding_settings

# The element type of the forward's indices (contract.INDEX_TYPE, "i16").
INDEX_DTYPE = np.dtype({"i16": np.int16}[INDEX_TYPE])


def _i64_triple(name: str, values: Sequence[int]) -> np.ndarray:
    try:
        arr = np.asarray(values, dtype=np.int64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a sequence of integers, got {values!r}") from exc
    return arr.reshape(-1)


def attributes(kernel_size, stride, padding, data_format, output_format) -> dict:
    """The call's five attributes as the handlers take them (i64 arrays, layout strings)."""
    if output_format is None:
        output_format = data_format
    if not isinstance(data_format, str) or not isinstance(output_format, str):
        raise TypeError(f"data_format and output_format must be strings out of {LAYOUTS}")
    return dict(kernel_size=_i64_triple("kernel_size", kernel_size), stride=_i64_triple("stride", stride),
                padding=_i64_triple("padding", padding), data_format=data_format, output_format=output_format)


def pooled_shape(input_shape, attrs) -> tuple[int, ...]:
    """The forward-output shape (in output_format) of a data_format input shape; computable for
    invalid attributes too, which the kernel then rejects with its named error."""
    def known(layout):  # an unknown one is the kernel's to name
        return layout if layout in LAYOUTS else LAYOUTS[0]

    pool = PoolConfig(attrs["kernel_size"], attrs["stride"], attrs["padding"], known(attrs["data_format"]),
                      known(attrs["output_format"]))
    return pool.pooled_shape(input_shape, at_least_one=True)


def input_shape_of(kind: str, operands: tuple, attributes: dict) -> tuple[int, ...]:
    """The forward input's shape: the `input` operand's, else the `input_shape=` the call takes."""
    call = CALLS[kind]
    if "input" in call.operands:
        return tuple(operands[call.operands.index("input")].shape)
    return tuple(int(n) for n in attributes["input_shape"])


def contract_function(kind: str, implement: Callable, doc: str | None = None, *,
                      takes_settings: bool = False) -> Callable:
    """The public function of the contract's `kind` call, `max_pooling_3d_<kind>(*operands, **attributes)`.

    Its signature is the call's (operands as `contract.CALLS` names them, then
    `input_shape=` where the call takes it, the four attributes, and
    `output_format=` defaulting to `data_format`). Every binding's public
    functions are made here; what a binding writes is `implement(kind,
    operands, attributes)`: the operands in the contract's order and the
    attributes by name, `output_format` filled in. With `takes_settings`, the
    function also takes `settings=` (an `options.BindingSettings`; None:
    the environment's), passed on as `implement(kind, operands, attributes,
    settings)`.
    """
    call = CALLS[kind]
    keywords = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default)
                for name, default in (("input_shape", None), ("kernel_size", inspect.Parameter.empty),
                                      ("stride", inspect.Parameter.empty), ("padding", inspect.Parameter.empty),
                                      ("data_format", "NCDHW"), ("output_format", None))
                if name != "input_shape" or call.takes_input_shape]
    if takes_settings:
        keywords.append(inspect.Parameter("settings", inspect.Parameter.KEYWORD_ONLY, default=None))
    signature = inspect.Signature(
        [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD) for name in call.operands] + keywords)

    def function(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        values = dict(bound.arguments)
        operands = tuple(values.pop(name) for name in call.operands)
        if values["output_format"] is None:
            values["output_format"] = values["data_format"]
        if takes_settings:
            settings = values.pop("settings")
            return implement(kind, operands, values, binding_settings() if settings is None else settings)
        return implement(kind, operands, values)

    function.__name__ = function.__qualname__ = f"max_pooling_3d_{kind}"
    function.__signature__ = signature
    function.__doc__ = doc or (f"The contract's `{kind}` call ({call.target}): ({', '.join(call.operands)}) -> "
                               f"({', '.join(call.results)}); its meaning is docs/contract.md's.")
    return function


def contract_functions(implement: Callable, docs: dict[str, str] | None = None, *,
                       takes_settings: bool = False) -> dict[str, Callable]:
    """{kind: contract_function(kind, implement)} for every call of the contract: a module's `FUNCTIONS`
    (its binding's loader returns it, bindings/base.py `Functions`)."""
    return {kind: contract_function(kind, implement, (docs or {}).get(kind), takes_settings=takes_settings)
            for kind in CALLS}


def _ffi_implementation(register: Callable[[], None]) -> Callable:
    def implement(kind: str, operands: tuple, values: dict):
        import jax

        call = CALLS[kind]
        register()
        attrs = attributes(values["kernel_size"], values["stride"], values["padding"], values["data_format"],
                           values["output_format"])
        float_dtype = operands[0].dtype
        input_shape = input_shape_of(kind, operands, values)
        results = []
        for name in call.results:
            shape = input_shape if TENSOR_SHAPES[name] == INPUT else pooled_shape(input_shape, attrs)
            results.append(jax.ShapeDtypeStruct(shape, INDEX_DTYPE if name == "indices" else float_dtype))
        out = jax.ffi.ffi_call(TARGETS[kind], tuple(results) if len(results) > 1 else results[0])(*operands, **attrs)
        return tuple(out) if len(results) > 1 else out

    return implement


def make_calls(register: Callable[[], None]) -> dict[str, Callable]:
    """{kind: function} for every call of the contract; `register()` runs before each call is traced
    (idempotent: makes the handlers known to XLA)."""
    return contract_functions(_ffi_implementation(register))
