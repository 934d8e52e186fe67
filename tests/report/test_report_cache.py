"""The report's prefix cache section: each chain's cut and figures, and the run's counts."""

from __future__ import annotations

from codedag.report.cache import cache_section_html
from codedag.report.html import ReportContent, render_html

SECTION = {
    "mode": "auto",
    "budget_bytes": 2_000_000_000,
    "dataset_len": 64,
    "bytes_total": 3_145_728,
    "saved_ns_per_sample": 1_840_000,
    "write_ns_per_sample": 36_000,
    "chains": [
        {
            "id": "prefix0",
            "source_function": "numpy.frombuffer",
            "source_kind": "buffer",
            "steps": ["numpy.frombuffer", "cv2.imdecode", "cv2.resize", "cv2.cvtColor"],
            "cached": True,
            "cut": {
                "step": "cv2.cvtColor",
                "bytes_per_sample": 49_152,
                "prefix_ns": 1_870_000,
                "read_ns": 27_000,
                "saved_ns": 1_843_000,
            },
            "reason": "cut after cv2.cvtColor <call 4 of 4>",
        },
        {
            "id": "prefix1",
            "source_function": "numpy.transpose",
            "steps": ["numpy.transpose"],
            "cached": False,
            "reason": "no cut saves time",
        },
    ],
}
STATS = {
    "enabled": True,
    "hits": 64,
    "hit_rate": 0.5,
    "misses": {"new": 60, "diverged": 4},
    "stored": 60,
    "bytes": {"ram": 2_949_120, "disk": 0},
    "budget_bytes": {"ram": 2_000_000_000, "disk": 1 << 34},
    "verify": {"checked": 2, "mismatches": 0},
    "diverged": {"prefix0: attribute .flags": 4},
    "lookup": {"gathered": 57, "computed": 3, "mismatches": 0},
}


def test_the_section_shows_each_cut_the_budget_and_the_runs_misses_by_reason() -> None:
    html = cache_section_html(SECTION, STATS)
    assert "budget 2000 MB" in html and "1.84 ms" in html  # expected saving per sample
    assert "cv2.cvtColor" in html and "0.0492" in html  # the cut and its MB per sample
    assert "&lt;call 4 of 4&gt;" in html  # escaped
    assert "misses: new" in html and "misses: diverged" in html and "50.0 %" in html
    assert "attribute .flags" in html
    assert "no cut saves time" in html
    assert (
        "gathered through a table / computed by their calls (mismatches)</td><td>57 / 3 (0)" in html
    )


def test_the_report_places_the_section_and_leaves_it_out_without_a_plan_section() -> None:
    page = render_html(ReportContent(title="t", cache=SECTION, cache_stats=STATS))
    assert "<h2>Prefix cache</h2>" in page
    without = render_html(ReportContent(title="t"))
    assert "Prefix cache" not in without
    planned_only = cache_section_html(SECTION, None)
    assert "misses" not in planned_only and "cv2.cvtColor" in planned_only
