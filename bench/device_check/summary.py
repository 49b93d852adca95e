"""The device check's closing summary, rendered from its JSON lines (so a killed run can be summarised too).

Kept under `LIMIT` characters: the device tool returns only the last 12,000
characters of a run's output, and the summary is printed last.
"""

from __future__ import annotations

from collections import Counter

from device_check.timing import TABLE_HEADER, table_row

LIMIT = 11_000


def render(rows: list[dict]) -> str:
    lines = ["", "## gpu_check summary"]
    for r in rows:
        if r["kind"] == "machine":
            lines.append(f"machine: {r.get('device_kind')} | jax {r.get('jax')} | torch {r.get('torch')} | "
                         f"python {r.get('python')} | kernels {r.get('implementation')} | dry run {r.get('dry_run')}")
            break
    for r in rows:
        if r["kind"] == "bandwidth" and r.get("bytes_per_s"):
            lines.append(f"copy bandwidth (read + write): {float(r['bytes_per_s']) / 1e12:.2f} TB/s")
    checks = [r for r in rows if r["kind"] in ("calls", "jobs")]
    failed = [r for r in checks if r.get("problems")]
    by_stage = Counter(r["kind"] for r in checks)
    lines.append(f"numerics: {len(checks) - len(failed)} passed, {len(failed)} failed "
                 f"(calls {by_stage['calls']}, jobs {by_stage['jobs']})")
    for r in failed[:15]:
        what = r.get("item") or f"{r.get('case')} / {r.get('job')} / {r.get('strategy')}"
        lines.append(f"  FAIL {what} [{r.get('inputs', '')}]: {'; '.join(r['problems'])[:300]}")
    timing = [r for r in rows if r["kind"] == "timing"]
    if timing:
        lines += ["", TABLE_HEADER] + [table_row(r) for r in timing]
        wins = [r for r in timing if isinstance(r.get("xla_over_pool3d"), (int, float))]
        if wins:
            faster = sum(r["xla_over_pool3d"] > 1 for r in wins)
            lines.append(f"pool3d_pass.jit faster than XLA:GPU in {faster} of {len(wins)} rows (min of rounds)")
    for r in rows:
        if r["kind"] == "model":
            lines.append(f"model {r['model']}: jax.jit {r['ms']['jax.jit']['min_ms']:.2f} ms, pool3d_pass.jit "
                         f"{r['ms']['pool3d_pass.jit']['min_ms']:.2f} ms ({r['jax_over_pool3d']:.2f}x), "
                         f"{r['kernel_calls']} kernel calls, params max diff {r['updated_params_max_abs_diff']:.3g}")
    skipped = [r for r in rows if r["kind"] == "skipped"]
    if skipped:
        lines.append(f"skipped ({len(skipped)}): " + "; ".join(f"{r['item']} ({r['reason']})" for r in skipped[:12])
                     + (" ..." if len(skipped) > 12 else ""))
    for r in rows:
        if r["kind"] in ("error", "stage_error"):
            lines.append(f"ERROR {r.get('item', r['stage'])}: {str(r.get('error'))[:400]}")
    text = "\n".join(lines)
    if len(text) > LIMIT:
        text = text[:LIMIT - 60] + "\n... (cut; the whole table is in gpu_check.md)"
    return text
