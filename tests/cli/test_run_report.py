"""``report.html`` of ``codedag run``: the epochs as a table and two charts, the cache, what the
plan moved and kept."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.support.browser import needs_chromium, rendered_dom

from codedag.cli._run_report import run_report, write_run_report
from codedag.integrations.run_results import AcceleratedRun, Decision, EpochFigures
from codedag.report.html import render_html


def _results() -> AcceleratedRun:
    return AcceleratedRun(
        codedag_version="0.1.0",
        command=["script", "train.py", "--workers", "2"],
        exit_code=0,
        loaders_seen=2,
        loader_index=0,
        dataset="Leaves <v2>",
        device="cpu",
        plan_status="applied",
        trace_s=0.5,
        plan_s=1.25,
        epochs=[
            EpochFigures(1, 6, 96, 2.0, 1.8, True, True, 2),
            EpochFigures(2, 6, 96, 0.5, 0.3, True, True),
            EpochFigures(3, 2, 32, 0.2, 0.1, False, True),
        ],
        moved=[Decision("cv2.imread -> cv2.resize", "cache", "prefix cache", "cut after resize")],
        kept=[
            Decision("cv2.flip", "calls", "cpu", "measured 7x slower through torch, stays"),
            Decision("torch.stack", "calls", "", "no torch backend"),
            Decision("__main__.Leaves.__getitem__", "calls", "", "no torch backend"),
        ],
        cache={"enabled": True, "hits": 192, "stored": 96, "hit_rate": 0.67, "hit_bytes": 4096},
    )


def test_the_page_shows_epochs_charts_cache_and_decisions() -> None:
    page = render_html(run_report(_results()))
    assert "codedag run -- python train.py --workers 2" in page
    assert "#0 over Leaves &lt;v2&gt;" in page
    assert "192 hits (67 %), 4,096 bytes read back, 96 values stored" in page
    assert page.count("<svg") == 2
    assert "from batch 2" in page and "on (partial)" in page
    assert "4.00x" in page  # epoch 2's samples/s against epoch 1's
    assert "<h2>Moved</h2>" in page and "cut after resize" in page
    # the functions nothing patches in one row, the pipeline's own code last
    assert "2 function(s) with no torch backend: torch.stack, __main__.Leaves.__getitem__" in page


def test_a_run_that_planned_nothing_has_a_page_without_charts() -> None:
    results = AcceleratedRun(command=["module", "pkg.train"], exit_code=3, loaders_seen=0)
    page = render_html(run_report(results))
    assert "codedag run -- python -m pkg.train" in page
    assert "<td>not planned</td>" in page  # the status alone where no reason was given
    assert "<svg" not in page and "<h2>Moved</h2>" not in page and "<h2>Epochs</h2>" not in page


@needs_chromium
def test_the_page_renders_in_headless_chromium(tmp_path: Path) -> None:
    page = write_run_report(_results(), tmp_path / "report.html")
    dom = rendered_dom(page, tmp_path / "profile")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert 'data-rendered="ok"' in dom.stdout and 'data-svgs="2"' in dom.stdout
    assert "Uncaught" not in dom.stderr


def test_codedag_report_of_an_accelerated_runs_results_writes_its_page(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from codedag.cli.main import main

    path = _results().save(tmp_path / "lightning_logs")  # as the Lightning callback leaves it
    assert main(["report", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"codedag report {path}: DataLoader #0 over Leaves <v2>, plan applied" in out
    assert "Samples per second, by epoch" in (path.parent / "report.html").read_text()
    assert main(["report", str(path.parent), "--out", str(tmp_path / "pages"), "--json"]) == 0
    assert (tmp_path / "pages" / "report.html").is_file()
    assert '"report"' in capsys.readouterr().out


def test_codedag_report_of_a_broken_accelerated_run_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from codedag.cli.main import main

    path = tmp_path / "results.json"
    path.write_text('{"schema_version": 1, "plan_status": 3, "epochs": "x"}')
    assert main(["report", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(path) in err[0] and "Traceback" not in err[0]
    assert not (tmp_path / "report.html").exists()
