"""What the pass does to the TensorFlow/Keras and torch-xla fixtures (no XLA runs: fast).

The fixtures come from ``scripts/lower_fixtures.py --frontend tensorflow|torch-xla``
(docs/frontends.md); their manifest entries carry, besides the counts every
fixture has, ``expected_remarks`` (a substring of the miss reason of each
select_and_scatter a correct pass leaves alone) and ``forward_in_program``
(the program computes the forward max pool itself, so the pass reuses it:
``forward_inserted == 0``; torch-xla writes that forward as
``pad(-inf) + reduce_window`` and the gradient with attribute padding).
Numerics of the same fixtures against the spec oracle: tests/numerics/test_numerics_fixtures.py.
"""

from __future__ import annotations

import pytest

import pool3d_pass

from corpus import FIXTURES, MANIFEST

FRONTEND_SOURCES = {"tensorflow": ("tensorflow", "keras"), "torch-xla": ("torch-xla",)}
ENTRIES = [e for e in MANIFEST["fixtures"] if e["source"] in {s for v in FRONTEND_SOURCES.values() for s in v}]
TARGET = "pool3d.max_pooling_3d_backward"


@pytest.mark.parametrize("frontend", sorted(FRONTEND_SOURCES))
def test_at_least_fifteen_fixtures_per_frontend(frontend):
    entries = [e for e in ENTRIES if e["source"] in FRONTEND_SOURCES[frontend]]
    positives = [e for e in entries if not e["negative"]]
    assert len(entries) >= 15 and len(positives) >= 12, (frontend, len(entries), len(positives))
    assert MANIFEST["frontend_versions"][frontend], "record the frontend's versions"


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["name"] for e in ENTRIES])
def test_counts_remarks_and_forward_reuse(entry):
    text = (FIXTURES / entry["file"]).read_text()
    new_text, report = pool3d_pass.rewrite_text(text)
    assert report.candidates == entry["select_and_scatter_count"]
    assert report.rewritten == entry["expected_pool_gradients"]
    assert new_text.count(f"custom_call @{TARGET}(") == entry["expected_pool_gradients"]
    assert len(report.missed) == len(entry["expected_remarks"]), [m.reason for m in report.missed]
    for miss, expected in zip(report.missed, entry["expected_remarks"]):
        assert expected in miss.reason, (miss.reason, expected)
    assert new_text.count("stablehlo.select_and_scatter") == len(entry["expected_remarks"])
    if entry["forward_in_program"] and entry["expected_pool_gradients"]:
        assert report.forward_inserted == 0, str(report)
        # The program's forward reduce_windows are all there is: none added.
        assert new_text.count('"stablehlo.reduce_window"') == entry["reduce_window_count"]
