"""Lowering, inspection and output of the fixtures (scripts/lower_fixtures.py): apart from the cases.

`lower_case` lowers one JAX case (frontends/jax_cases.py) in this process;
`lower_frontend` runs another frontend's case script in its own venv
(frontends/tensorflow_cases.py, frontends/torch_xla_cases.py) and inspects
what it wrote. `inspect_module` summarises main's signature and the pooling
ops for the manifest.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import jax

from frontends.jax_cases import Case

REPO_ROOT = Path(__file__).resolve().parents[2]


_SITE_RE = re.compile(r'"[^"\n]*/site-packages/')


def relativize_paths(text: str) -> str:
    text = text.replace(f'"{REPO_ROOT}/', '"')
    return _SITE_RE.sub('"site-packages/', text)


_MLIR_TO_NP = {
    "f64": "float64", "f32": "float32", "f16": "float16", "bf16": "bfloat16",
    "i64": "int64", "i32": "int32", "i16": "int16", "i8": "int8", "i1": "bool",
    "ui32": "uint32", "ui8": "uint8",
}


def _ir():
    from jax._src.interpreters import mlir as jax_mlir
    from jax.extend.mlir import ir

    return jax_mlir, ir


def _dense_i64(attr) -> list:
    from jax.extend.mlir import ir

    if isinstance(attr, ir.DenseI64ArrayAttr):
        return [int(v) for v in attr]
    d = attr if isinstance(attr, ir.DenseIntElementsAttr) else ir.DenseIntElementsAttr(attr)
    vals = [int(v) for v in d]
    shape = ir.ShapedType(d.type).shape
    if len(shape) == 2:
        return [vals[i * shape[1]:(i + 1) * shape[1]] for i in range(shape[0])]
    return vals


def inspect_module(text: str) -> dict:
    """Parse the module and summarize main's signature and the pooling ops."""
    jax_mlir, ir = _ir()
    with jax_mlir.make_ir_context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        assert module.operation.verify()
        main = None
        funcs = []
        for op in module.body.operations:
            if op.operation.name == "func.func":
                sym = ir.StringAttr(op.attributes["sym_name"]).value
                funcs.append(sym)
                if sym == "main":
                    main = op
        ftype = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)

        def ty(t):
            rt = ir.RankedTensorType(t)
            return {"shape": list(rt.shape), "dtype": _MLIR_TO_NP[str(rt.element_type)]}

        args = [ty(t) for t in ftype.inputs]
        results = [ty(t) for t in ftype.results]

        counts: dict[str, int] = {}
        sas: list[dict] = []

        def walk(op):
            op = op.operation
            counts[op.name] = counts.get(op.name, 0) + 1
            if op.name == "stablehlo.select_and_scatter":
                sas.append(describe_sas(op))
            return ir.WalkResult.ADVANCE

        def describe_sas(op):
            def region_ops(i):
                return [o.operation for o in op.regions[i].blocks[0].operations]

            select_ops = region_ops(0)
            cmp = [o for o in select_ops if o.name == "stablehlo.compare"]
            direction = None
            if cmp:  # "#stablehlo<comparison_direction GE>" -> "GE"
                attr = str(cmp[0].attributes["comparison_direction"])
                direction = re.search(r"comparison_direction (\w+)", attr).group(1)
            scatter = [o.name for o in region_ops(1) if o.name != "stablehlo.return"]
            operand = op.operands[0]
            owner = operand.owner
            operand_def = (owner.operation.name if isinstance(owner, (ir.Operation, ir.OpView))
                           else "block_argument")
            info = {
                "func": None,
                "operand_type": str(operand.type),
                "source_type": str(op.operands[1].type),
                "window_dimensions": _dense_i64(op.attributes["window_dimensions"]),
                "window_strides": (_dense_i64(op.attributes["window_strides"]) if "window_strides" in op.attributes
                                   else [1] * len(_dense_i64(op.attributes["window_dimensions"]))),
                "padding": _dense_i64(op.attributes["padding"]) if "padding" in op.attributes else None,
                "select_compare": direction,
                "scatter_ops": scatter,
                "operand_defined_by": operand_def,
            }
            if operand_def == "stablehlo.pad":
                pad = owner.operation
                pad_inp = pad.operands[0].owner
                info["pad"] = {
                    "low": _dense_i64(pad.attributes["edge_padding_low"]),
                    "high": _dense_i64(pad.attributes["edge_padding_high"]),
                    "interior": _dense_i64(pad.attributes["interior_padding"]),
                    "value_defined_by": pad.operands[1].owner.operation.name,
                    "input_defined_by": (pad_inp.operation.name
                                         if isinstance(pad_inp, (ir.Operation, ir.OpView))
                                         else "block_argument"),
                }
            parent = op.parent
            while parent is not None and parent.name != "func.func":
                parent = parent.parent
            if parent is not None:
                info["func"] = ir.StringAttr(parent.attributes["sym_name"]).value
            return info

        module.operation.walk(walk)

    return {
        "args": args,
        "results": results,
        "funcs": funcs,
        "select_and_scatter_count": counts.get("stablehlo.select_and_scatter", 0),
        "reduce_window_count": counts.get("stablehlo.reduce_window", 0),
        "optimization_barrier_count": counts.get("stablehlo.optimization_barrier", 0),
        "transpose_count": counts.get("stablehlo.transpose", 0),
        "select_and_scatter": sas,
    }


def lower_case(c: Case) -> tuple[str, dict]:
    fn, args = c.build()
    if c.platform == "cpu":
        text = relativize_paths(jax.jit(fn).lower(*args).as_text(debug_info=True))
    else:  # another platform's lowering, made here: jax.export lowers for any platform
        exported = jax.export.export(jax.jit(fn), platforms=(c.platform,))(*args)
        text = relativize_paths(exported.mlir_module())
    info = inspect_module(text)
    text_count = len(re.findall(r'"stablehlo\.select_and_scatter"|stablehlo\.select_and_scatter\b', text))
    assert text_count == info["select_and_scatter_count"], (c.name, text_count, info)
    if c.negative is None:
        ge_add = [s for s in info["select_and_scatter"]
                  if s["select_compare"] == "GE" and s["scatter_ops"] == ["stablehlo.add"]]
        assert len(ge_add) == c.expected_pool_gradients == info["select_and_scatter_count"], (
            c.name, c.expected_pool_gradients, info["select_and_scatter_count"])
    else:
        assert c.expected_pool_gradients == 0
    entry = {
        "name": c.name,
        "file": f"{c.name}.mlir",
        "description": c.description,
        "source": c.source,
        "expected_pool_gradients": c.expected_pool_gradients,
        "negative": c.negative,
        "notes": c.notes,
        **({"platform": c.platform} if c.platform != "cpu" else {}),
        **info,
    }
    return text, entry


_NUM_LIST_RE = re.compile(r"\[\s*(-?\d+(?:,\s*-?\d+)*)\s*\]")


def compact_json(obj) -> str:
    """Indented JSON with lists of integers kept on one line (smaller diffs)."""
    text = json.dumps(obj, indent=1)
    return _NUM_LIST_RE.sub(lambda m: "[" + ", ".join(re.split(r",\s*", m.group(1))) + "]", text)


def versions() -> dict:
    import importlib.metadata as md

    out = {}
    for pkg in ("jax", "jaxlib", "flax", "equinox", "optax"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = None
    return out


# --------------------------------------------------------------------------
# Other frontends: lowered in their own venv, inspected here
# --------------------------------------------------------------------------

FRONTENDS = {
    # frontend -> (case script, the manifest `source` values it owns)
    "jax": (None, {"jax", "flax.linen", "flax.nnx", "equinox"}),
    "tensorflow": ("tensorflow_cases.py", {"tensorflow", "keras"}),
    "torch-xla": ("torch_xla_cases.py", {"torch-xla"}),
}


def lower_frontend(frontend: str, python: str, only: list[str] | None) -> tuple[list[tuple[str, dict]], dict]:
    """Run the frontend's case script under `python`; ([(text, manifest entry)], versions)."""
    import subprocess
    import tempfile

    script = REPO_ROOT / "scripts" / "frontends" / FRONTENDS[frontend][0]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "cases.json"
        env = dict(os.environ, PJRT_DEVICE=os.environ.get("PJRT_DEVICE", "CPU"))
        subprocess.run([python, str(script), str(out), *(only or [])], check=True, env=env)
        cases = json.loads(out.read_text())
    results, frontend_versions = [], {}
    for c in cases:
        text = relativize_paths(c.pop("text"))
        frontend_versions = c.pop("versions")
        info = inspect_module(text)
        ge_add = [s for s in info["select_and_scatter"]
                  if s["select_compare"] == "GE" and s["scatter_ops"] == ["stablehlo.add"]]
        if c["negative"] is None:
            assert len(ge_add) == c["expected_pool_gradients"] == info["select_and_scatter_count"], (
                c["name"], c["expected_pool_gradients"], info["select_and_scatter_count"])
        else:
            assert c["expected_pool_gradients"] == 0
        entry = {"name": c["name"], "file": f"{c['name']}.mlir", "description": c["description"],
                 "source": c["source"], "expected_pool_gradients": c["expected_pool_gradients"],
                 "negative": c["negative"], "notes": c["notes"],
                 "expected_remarks": c["expected_remarks"], "forward_in_program": c["forward_in_program"],
                 **info}
        results.append((text, entry))
    return results, frontend_versions
