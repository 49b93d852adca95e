"""Every spatially sharded case, not only make test's pairwise selection: per shard with halos, exact, frugal.

    .venv/bin/python -m checks.spatial_sweep [--devices 2 4 8] [--match TEXT,...] [--json PATH]   (from the root)

Runs tests/support/spatial_cases.py with `--all` in one child process per
device count (each JAX reads its device count once): every combination of
split dimension, layout, element type, window, job, even or uneven shards
and partitioner (tests/support/spatial_cases_table.py, 1,044 per device
count, about 20 minutes each on 2 quiet cores), and judges each record as
tests/integration/test_spatial_sharding.py judges its pairwise selection
(`spatial_cases_table.problems`): the unsharded program's bits, the expected
kernel calls and halo planes, no more bytes between devices nor memory per
device than XLA's own program. Prints one line per case with a problem and
a summary per device count (bytes moved, XLA's and the rewrite's, summed
over the cases), writes every record as JSON; exits 1 if any case has a
problem.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUPPORT = ROOT / "tests" / "support"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m checks.spatial_sweep", description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--match", help="only the cases whose name holds each of these comma-separated texts, "
                                            "e.g. uneven,k122")
    parser.add_argument("--json", type=Path, default=ROOT / "build" / "spatial_sweep.json")
    args = parser.parse_args(argv)
    from tests.support.spatial_cases_table import problems

    environment = dict(os.environ, JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="1")
    records, failed = [], 0
    for devices in args.devices:  # one at a time: each child keeps the cores busy with XLA's compiles
        match = ["--match", args.match] if args.match else []
        child = subprocess.run([sys.executable, str(SUPPORT / "spatial_cases.py"), str(devices), "--all", *match],
                               capture_output=True, text=True, env=environment, cwd=SUPPORT)
        if child.returncode != 0:
            print(f"spatial_sweep: the {devices}-device child failed:\n{child.stderr[-4000:]}", file=sys.stderr)
            return 2
        cases = [json.loads(line) for line in child.stdout.splitlines() if line.startswith("{")]
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
