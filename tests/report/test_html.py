"""The HTML report: self-contained, escaped, and rendering in headless Chromium."""

from __future__ import annotations

import subprocess
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from tests.support.browser import chromium_flags, needs_chromium, rendered_dom

from codedag.report.html import ReportContent, render_html, write_html_report

SVG = """<?xml version="1.0"?><!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" "x">
<svg xmlns="http://www.w3.org/2000/svg" width="120" height="40"><rect width="120" height="40"
fill="#9cc"/><text x="5" y="25">cv2.resize</text></svg>"""

PLAN = {
    "schema_version": 1,
    "k": 2,
    "gpu_count": 0,
    "target_device": "cpu",
    "context_device_map": {"a#0/cv2.resize#0": "cpu"},
    "calls": [
        {
            "function": "cv2.resize",
            "device": "cpu",
            "migrate": True,
            "instance_count": 32,
            "measured_ns": 2_500_000,
            "estimated_gain_ns": 1_000_000,
            "transfer_cost_ns": 100_000,
            "reason": "<saves more than it moves>",
        }
    ],
    "notes": ["no GPU: torch on the CPU"],
}


def make_plot(path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([0, 1, 2], [0.3, 0.2, 0.25], label="baseline")
    ax.set_title("batch time")
    ax.legend()
    fig.savefig(path)
    plt.close(fig)
    return path


def content(tmp_path: Path) -> ReportContent:
    return ReportContent(
        title="codedag demo <image>",
        summary_columns=["mode", "mean batch s", "batches"],
        summary_rows=[["baseline", 0.25, 20], ["optimization", 0.2, 20]],
        equivalence={"passed": True, "max_abs_diff": 0.004, "tolerance": 0.01},
        plan=PLAN,
        dag_svg=SVG,
        partition_colors={"cpu": "#dde", "cuda:0": "#cec"},
        plots=[make_plot(tmp_path / "batch_time.png")],
        environment={"torch": "2.13.0+cpu", "GPUs": "none"},
    )


def test_page_is_self_contained_and_escaped(tmp_path: Path) -> None:
    page = render_html(content(tmp_path))
    assert "codedag demo &lt;image&gt;" in page
    assert "&lt;saves more than it moves&gt;" in page
    assert "data:image/png;base64," in page
    assert "<?xml" not in page and "<!DOCTYPE svg" not in page
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "")
    assert page.count("<h2>") == 6


def test_without_dot_the_dag_is_shown_as_text(tmp_path: Path) -> None:
    page = render_html(ReportContent(title="t", dag_dot="digraph { a -> b }"))
    assert "digraph { a -&gt; b }" in page and "dot -Tsvg" in page


@needs_chromium
def test_renders_in_headless_chromium(tmp_path: Path) -> None:
    report = write_html_report(tmp_path / "report.html", content(tmp_path))
    flags = chromium_flags(tmp_path / "profile")
    dom = rendered_dom(report, tmp_path / "profile")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert 'data-rendered="ok"' in dom.stdout
    assert 'data-broken-images="0"' in dom.stdout and 'data-images="1"' in dom.stdout
    assert "Uncaught" not in dom.stderr  # no JavaScript error in the console
    shot = tmp_path / "report.png"
    subprocess.run(
        [*flags, f"--screenshot={shot}", "--window-size=1280,1400", report.as_uri()],
        capture_output=True,
        timeout=120,
        check=True,
    )
    assert shot.stat().st_size > 10_000
