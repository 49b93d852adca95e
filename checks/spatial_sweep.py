"""Every spatially sharded case, not only make test's pairwise selection: per shard with halos, exact, frugal.

    .venv/bin/python -m checks.spatial_sweep [--devices 2 4 8] [--match TEXT,...] [--json PATH]   (from the root)

Runs cases/spatial_run.py with `--all` in one child process per
device count (each JAX reads its device count once): every combination of
split dimension, layout, element type, window, job, even or uneven shards
and partitioner (cases/spatial.py, 1,044 per device
count, about 20 minutes each on 2 quiet cores), and judges each record as
tests/integration/test_spatial_sharding.py judges its pairwise selection
(`cases.spatial.problems`): the unsharded program's bits, the expected
kernel calls and halo planes, no more bytes between devices nor memory per
device than XLA's own program. Prints one line per case with a problem and
a summary per device count (bytes moved, XLA's and the rewrite's, summed
over the cases), writes every record as JSON; exits 1 if any case has a
problem.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m checks.spatial_sweep", description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--match", help="only the cases whose name holds each of these comma-separated texts, "
                                            "e.g. uneven,k122")
    parser.add_argument("--json", type=Path, default=ROOT / "build" / "spatial_sweep.json")
    args = parser.parse_args(argv)
    from cases import children
    from cases.spatial import RUNNER, problems

    records, failed = [], 0
    for devices in args.devices:  # one at a time: each child keeps the cores busy with XLA's compiles
        match = ["--match", args.match] if args.match else []
        try:
            (cases,) = children.run(RUNNER, [devices, "--all", *match], timeout=None)
        except children.ChildFailed as error:
            print(f"spatial_sweep: the {devices}-device child failed: {error}", file=sys.stderr)
            return 2
        plain = rewritten = 0
        for record in cases:
            record["problems"] = problems(record)
            failed += bool(record["problems"])
            if record["problems"]:
                print(f"{record['case']}: {'; '.join(record['problems'])}", flush=True)
            plain += sum(c["bytes"] for c in record["plain_collectives"].values())
            rewritten += sum(c["bytes"] for c in record["rewritten_collectives"].values())
        bad = sum(bool(record["problems"]) for record in cases)
        print(f"{devices} devices: {len(cases) - bad} of {len(cases)} cases without a problem; bytes moved per "
              f"device, summed over the cases: XLA {plain}, rewritten {rewritten}", flush=True)
        records += cases
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(records, indent=1))
    print(f"JSON: {args.json}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
