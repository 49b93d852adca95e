"""`python -m checks.kernel_ab`: its summary takes each library's best over its processes, its spread, and
flags results that differ between libraries. No timing is asserted."""

from __future__ import annotations

from checks import kernel_ab


def _ab_child(ms: dict, digest: str = "d") -> dict:
    return {case: {"ms": dict.fromkeys(kernel_ab.CALLS, t), "digest": digest} for case, t in ms.items()}


def test_kernel_ab_summary_takes_best_and_spread_per_library():
    runs = {"A": [_ab_child({"c": 2.0}), _ab_child({"c": 3.0})],
            "B": [_ab_child({"c": 1.0}), _ab_child({"c": 1.5})]}
    summary = kernel_ab.summarize(runs)
    assert summary["results_differ"] == []
    rows = [r for r in summary["rows"] if r["call"] == "from_indices"]
    assert rows == [{"case": "c", "call": "from_indices", "best_ms": {"A": 2.0, "B": 1.0},
                     "spread": {"A": 1.5, "B": 1.5}}]
    text = kernel_ab.table(summary)
    assert "| c | from_indices | 2 | 1 | 2.00x | 1.50x | 1.50x |" in text
    assert "median 1.50x, largest 1.50x (8 figures)" in text


def test_kernel_ab_flags_results_that_differ():
    runs = {"A": [_ab_child({"c": 1.0, "d": 1.0})],
            "B": [_ab_child({"c": 1.0}, digest="other") | _ab_child({"d": 1.0})]}
    assert kernel_ab.summarize(runs)["results_differ"] == ["c"]
