"""The device check's closing summary, rendered from its JSON lines (so a killed run can be summarised too).

Kept under `LIMIT` characters: the device tool returns only the last 12,000
characters of a run's output, and the summary is printed last.
"""

from __future__ import annotations

from collections import Counter

from checks.device_check.timing import TABLE_HEADER, table_row

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
    checks = [r for r in rows if r["kind"] in ("calls", "jobs", "partitioned")]
    failed = [r for r in checks if r.get("problems")]
    by_stage = Counter(r["kind"] for r in checks)
    lines.append(f"numerics: {len(checks) - len(failed)} passed, {len(failed)} failed "
                 f"(calls {by_stage['calls']}, jobs {by_stage['jobs']}, partitioned {by_stage['partitioned']})")
    poisoned = [r for r in rows if r["kind"] == "calls" and isinstance(r.get("poison"), dict)]
    if poisoned:
        reached = sum(all(f.get("reached") for f in r["poison"].values()) for r in poisoned)
        unwritten = sum(f.get("unwritten", 0) for r in poisoned for f in r["poison"].values())
        lines.append(f"poisoned outputs: {reached} of {len(poisoned)} rows proven to reach the kernel; "
                     f"{unwritten} elements left unwritten")
    for r in rows:
        if r["kind"] == "calls" and "elements" in r:
            lines.append(f"int64: {r['item']}: {'ok' if not r.get('problems') else 'FAIL'}"
                         + (f" ({'; '.join(r.get('notes') or [])})" if r.get("notes") else ""))
    for r in failed[:15]:
        what = r.get("item") or f"{r.get('case')} / {r.get('job')} / {r.get('strategy') or r.get('form')}"
        lines.append(f"  FAIL {what} [{r.get('inputs', '')}]: {'; '.join(r['problems'])[:300]}")
    sanitized = [r for r in rows if r["kind"] == "sanitizer"]
    if sanitized:
        lines.append("sanitizer: " + "; ".join(
            f"{r['tool']} {r['status']}"
            + (f" ({r.get('calls')} calls, errors {r.get('errors')})" if "calls" in r else "")
            for r in sanitized))
        for r in sanitized:
            if r.get("report") and r["status"] != "pass":
                lines.append(f"  {r['tool']}: " + " | ".join(str(x) for x in r["report"])[:600])
    timing = [r for r in rows if r["kind"] == "timing"]
    if timing:
        lines += ["", TABLE_HEADER] + [table_row(r) for r in timing]
        wins = [r for r in timing if isinstance(r.get("xla_over_pool3d"), (int, float))]
        if wins:
            faster = sum(r["xla_over_pool3d"] > 1 for r in wins)
            lines.append(f"pool3d_pass.jit faster than XLA:GPU in {faster} of {len(wins)} rows (min of rounds)")
    best = [r for r in rows if r["kind"] == "variant_best"]
    if best:
        lines.append("launch variants (min ms; fastest):")
        for r in best:
            cells = ", ".join(f"{v} {ms:.3f}" for v, ms in r["ms"].items())
            lines.append(f"  {r['case']} / {r['job']}: {cells}; fastest {r['fastest']}")
    for r in rows:
        if r["kind"] == "model_split":
            from checks.device_check.model import split_text

            lines.append(f"model split {r['model']} / {r['program']} (step {r['step_min_ms']:.2f} ms): "
                         f"{split_text(r)}")
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
