"""Lower real max-pool gradients from JAX, flax and equinox into test fixtures.

What: every case below is a small function (a gradient, a VJP, a training
step, ...) that a user would actually write. Each is lowered with
``jax.jit(fn).lower(*args)`` on CPU and written as StableHLO text to
``<out>/<name>.mlir``, with ``<out>/manifest.json`` describing all of them:
the source library, how many max-pool gradients (``stablehlo.select_and_scatter``
with select ``compare GE`` and scatter ``add``) a correct pass must rewrite,
the total select_and_scatter count, per-op details, and the shapes/dtypes of the
module's ``main`` arguments so tests can build random inputs and run the module
through XLA.

Why: hand-written IR drifts from what JAX really emits (explicit ``pad``/
``slice`` around the op on CPU, ``optimization_barrier`` under
``jax.checkpoint``, forward ``reduce_window`` present or absent, transposes from
equinox, rank-6 windows under ``vmap``...). These fixtures pin that real IR for
the pass's matcher and end-to-end numerics tests. Re-run this script after a
JAX/flax/equinox upgrade and review the diff.

Locations: the text is written with ``debug_info=True`` because it carries
``file:line:col`` locations of the user's source (the pass should keep them on
the ops it creates). Absolute paths are rewritten to be machine independent:
the repository root is stripped and anything under ``site-packages/`` is
shortened to ``site-packages/...``.

Usage::

    python scripts/lower_fixtures.py [--out tests/fixtures] [--only NAME ...]
    python scripts/lower_fixtures.py --frontend tensorflow --python /work/venv-tf/bin/python
    python scripts/lower_fixtures.py --frontend torch-xla --python /work/venv-txla/bin/python

Needs the ``fixtures`` extra (flax, equinox) next to jax==0.10.2. The cases are in
``scripts/frontends/jax_cases.py`` (the registry, raw JAX) and
``scripts/frontends/flax_equinox_cases.py``; lowering, inspection and the
manifest's fields in ``scripts/frontends/fixture_lowering.py``; this script is
the command line.

Other frontends (TensorFlow/Keras, torch-xla): their cases live in
``scripts/frontends/tensorflow_cases.py`` and ``scripts/frontends/torch_xla_cases.py``,
which run in the frontend's OWN virtual environment (``--python``; none of it
is needed by ``make test``, and torch-xla 2.9 cannot share a venv with this
project's torch 2.13). Each writes the cases' StableHLO text to a JSON file;
this script (in the project's venv, with jax) inspects each module and
writes the fixtures and their manifest entries, keeping every other
frontend's entries. Extra manifest fields for those entries:
``expected_remarks`` (substrings of the pass's miss reasons, one per
select_and_scatter left alone) and ``forward_in_program`` (the program
computes the forward max pool, so a correct pass reuses it: report
``forward_inserted == 0``). The venvs, as made for the committed fixtures
(docs/frontends.md)::

    python3 -m venv /work/venv-tf
    nice /work/venv-tf/bin/pip install tensorflow-cpu==2.21.0          # keras 3.15 comes with it
    python3 -m venv /work/venv-txla
    nice /work/venv-txla/bin/pip install torch==2.9.0 torch-xla==2.9.0

torch-xla 2.9.0 requires torch 2.9.0 exactly. PyPI has no CPU-only wheel of
torch 2.9 for x86_64 (those live on download.pytorch.org, not reachable
here), so pip takes PyPI's default build, the CUDA 12.8 one (with the
nvidia-* wheels, about 3 GB, 7 GB installed); it runs on CPU, and torch-xla
is driven with ``PJRT_DEVICE=CPU``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax

from frontends import flax_equinox_cases  # noqa: F401 - imported for its cases, registered after jax_cases (which it imports first)
from frontends.fixture_lowering import (
    FRONTENDS,
    REPO_ROOT,
    compact_json,
    lower_case,
    lower_frontend,
    versions,
)
from frontends.jax_cases import CASES, NOT_LOWERABLE, probe_window_dilation

MAX_FIXTURE_BYTES = 60_000


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=REPO_ROOT / "tests" / "fixtures")
    ap.add_argument("--only", nargs="*", help="re-lower only these case names; their manifest "
                    "entries are replaced, the others kept")
    ap.add_argument("--frontend", choices=sorted(FRONTENDS), default="jax",
                    help="which frontend's cases to lower (default jax: this process's JAX, flax, equinox)")
    ap.add_argument("--python", help="the frontend venv's python (tensorflow, torch-xla)")
    ns = ap.parse_args(argv)
    ns.out.mkdir(parents=True, exist_ok=True)

    frontend_versions = {}
    if ns.frontend == "jax":
        cases = [c for c in CASES if not ns.only or c.name in ns.only]
        names = [c.name for c in CASES]
        assert len(names) == len(set(names)), "duplicate case names"
        lowered = [lower_case(c) for c in cases]
        probe_window_dilation()
    else:
        if not ns.python:
            ap.error(f"--frontend {ns.frontend} needs --python (its venv's interpreter, docs/frontends.md)")
        lowered, frontend_versions = lower_frontend(ns.frontend, ns.python, ns.only)

    entries = []
    for text, entry in lowered:
        size = len(text.encode())
        assert size < MAX_FIXTURE_BYTES, (entry["name"], size)
        (ns.out / entry["file"]).write_text(text)
        entries.append(entry)
        print(f"{entry['name']:55s} sas={entry['select_and_scatter_count']} "
              f"expected={entry['expected_pool_gradients']} rw={entry['reduce_window_count']} "
              f"{size / 1024:.1f} KiB", file=sys.stderr)

    manifest_path = ns.out / "manifest.json"
    old = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    owned = FRONTENDS[ns.frontend][1]
    old_entries = old.get("fixtures", [])
    fresh = {e["name"]: e for e in entries}
    if ns.only:  # replace the named entries in place, keep the rest
        merged = [fresh.pop(e["name"], e) for e in old_entries] + list(fresh.values())
    else:  # this frontend's entries are exactly this run's; other frontends' are kept
        merged = [e for e in old_entries if e["source"] not in owned] + entries
    all_versions = dict(old.get("frontend_versions", {}))
    if ns.frontend != "jax":
        all_versions[ns.frontend] = frontend_versions
    manifest = {
        "generated_by": "scripts/lower_fixtures.py",
        "versions": versions() if ns.frontend == "jax" else old.get("versions", versions()),
        "frontend_versions": all_versions,
        "platform": jax.default_backend() if ns.frontend == "jax" else old.get("platform", "cpu"),
        "debug_info": True,
        "fixtures": merged,
        "not_lowerable": NOT_LOWERABLE if ns.frontend == "jax" else old.get("not_lowerable", []),
    }
    manifest_path.write_text(compact_json(manifest) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
