"""Comparison figures for one and two modes, and ``codedag report``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from monitor_helpers import record_run

from codedag.cli.main import main
from codedag.monitor.compare import compare_modes
from codedag.monitor.experiment import ExperimentMonitor

FIGURES = {
    "batch_time.png",
    "cpu.png",
    "memory.png",
    "gpu_util.png",
    "gpu_memory.png",
    "loss.png",
    "accuracy.png",
    "summary.png",
}


def check_figures(paths: list[Path]) -> None:
    assert {p.name for p in paths} == FIGURES
    for path in paths:
        data = path.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5_000, path.name


def test_plots_render_for_one_mode(tmp_path: Path) -> None:
    from codedag.monitor.results import load_results

    results = record_run(tmp_path / "run", {"baseline": 1.0}, batches=6)
    from codedag.monitor.plots import plot_results

    check_figures(plot_results(load_results(results), tmp_path / "plots"))


def test_plot_metrics_renders_two_modes_overlaid(tmp_path: Path) -> None:
    monitor = ExperimentMonitor("two", run_dir=tmp_path / "run", stream_to_disk=False)
    for name, work in (("baseline", 4000), ("optimization", 1000)):
        monitor.start_mode(name, resource_interval=None)
        for b in range(8):
            monitor.start_batch()
            sum(range(work))
            monitor.end_batch()
            monitor.log_loss(0, b, 1.0 / (b + 1))
        monitor.stop_mode()
    check_figures(monitor.plot_metrics())


def test_compare_modes_gives_speedup_and_deltas(two_mode_results: Path) -> None:
    from codedag.monitor.results import load_results

    rows = {r["mode"]: r for r in compare_modes(load_results(two_mode_results))}
    base, opt = rows["baseline"], rows["optimization"]
    assert base["is_baseline"] and base["speedup"] == pytest.approx(1.0)
    # steady state (the warm-up batch left out): the ratio of median step times, with a spread
    assert base["warmup_batches"] == 1 and base["steady_batches"] == base["num_batches"] - 1
    assert opt["speedup"] == pytest.approx(base["step_p50_s"] / opt["step_p50_s"], rel=1e-4)
    assert opt["speedup_spread"] > 0 and opt["difference"] in ("faster", "slower", "no difference")
    assert opt["loss_delta"] == pytest.approx(opt["final_loss"] - base["final_loss"])
    assert opt["loss_delta"] < 0 and opt["accuracy_delta"] == pytest.approx(0.0)


def test_report_prints_the_table_and_writes_plots(
    two_mode_results: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "figs"
    assert main(["report", str(two_mode_results), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    for text in ("baseline (ref)", "optimization", "batch mean ms", "data wait", "speedup"):
        assert text in printed
    assert "1.00x" in printed and "8 figures" in printed
    assert {p.name for p in out.iterdir()} == FIGURES


def test_report_json_output(two_mode_results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(two_mode_results), "--no-plots", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [r["mode"] for r in data["modes"]] == ["baseline", "optimization"]
    assert data["figures"] == []


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such file"),
        (
            "{truncated",
            "is not JSON: Expecting property name enclosed in double quotes at line 1 column 2",
        ),
        ('{"experiment_name": "x", "modes": []}', "modes: expected an object"),
    ],
)
def test_report_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, message: str
) -> None:
    path = tmp_path / "results.json"
    if content is not None:
        path.write_text(content)
    assert main(["report", str(path), "--no-plots"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("codedag report: error:") and message in err
    assert len(err.splitlines()) == 1


def test_report_unknown_baseline_is_exit_2(
    two_mode_results: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", str(two_mode_results), "--no-plots", "--baseline", "nope"]) == 2
    assert "baseline mode 'nope'" in capsys.readouterr().err
