"""The report's lookup tables section: where runs start, and what the run counted."""

from __future__ import annotations

from codedag.report.html import ReportContent, render_html
from codedag.report.tables import tables_section_html

SECTION = {
    "mode": "auto",
    "runs": [
        {
            "producer": "cv2.warpAffine",
            "callers": ["codedag.experiments.demo_data.ImageDemoDataset.__getitem__"],
            "calls": ["numpy.ndarray.astype", "operator.truediv", "operator.truediv"],
            "consumer": "numpy.transpose",
            "traced_ns": 312_000,
            "samples": 16,
        }
    ],
    "guards": ["torch.from_numpy"],
}
STATS = {
    "enabled": True,
    "producers": ["cv2.warpAffine"],
    "runs": 576,
    "gathered": 573,
    "computed": 3,
    "trials": 3,
    "mismatches": 0,
    "errors": 0,
}


def test_the_section_shows_each_run_and_the_counts() -> None:
    html = tables_section_html(SECTION, STATS)
    assert "cv2.warpAffine" in html and "ImageDemoDataset" in html
    assert "astype &gt; truediv &gt; truediv" in html and "0.312" in html
    assert "<td>gathered through a table</td><td>573</td>" in html
    assert "<td>trials (mismatches)</td><td>3 (0)</td>" in html
    assert "runs started" not in tables_section_html(SECTION, None)


def test_the_report_places_the_section_only_with_a_tables_section() -> None:
    page = render_html(ReportContent(title="t", tables=SECTION, tables_stats=STATS))
    assert "<h2>Lookup tables</h2>" in page
    assert "Lookup tables" not in render_html(ReportContent(title="t"))
