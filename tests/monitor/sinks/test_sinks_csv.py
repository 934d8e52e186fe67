"""The CSV sink: each mode's batches, resources and metrics streams."""

from __future__ import annotations

from pathlib import Path

from codedag.monitor.probes import ResourceSample
from codedag.monitor.records import MetricRecord, ModeEnd, ModeInfo, StepRecord
from codedag.monitor.sinks.csv import HEADERS, CsvSink, csv_files


def test_stream_file_names_per_kind() -> None:
    assert csv_files("base") == {
        "batches": "base.batches.csv",
        "resources": "base.resources.csv",
        "metrics": "base.metrics.csv",
    }


def test_a_mode_writes_its_three_streams(tmp_path: Path) -> None:
    sink = CsvSink(tmp_path)
    sink.start_mode(ModeInfo("base line", "base_line", {}, 0.0))
    sink.log_steps("base line", [StepRecord(0, 0.5, 0.25, 0.125, 4)])
    sink.log_resources("base line", ResourceSample(12.34567, cpu_pct=50.0, workers=2))
    sink.log_metrics("base line", [MetricRecord("loss", 0, 0, 0.1, -1, 0.0)])
    assert len(sink.open_files()) == 3
    sink.end_mode(ModeEnd("base line", "completed", None, 1, {}))
    assert sink.open_files() == []
    read = {k: (tmp_path / n).read_text().splitlines() for k, n in csv_files("base_line").items()}
    assert read["batches"] == [HEADERS["batches"], "0,0.500000,0.25,0.125"]
    assert read["resources"] == [HEADERS["resources"], "12.346,cpu_usage,50", "12.346,workers,2"]
    assert read["metrics"] == [HEADERS["metrics"], "loss,0,0,0.1"]


def test_a_value_logged_after_the_mode_ended_is_appended(tmp_path: Path) -> None:
    sink = CsvSink(tmp_path)
    sink.start_mode(ModeInfo("m", "m", {}, 0.0))
    sink.log_metrics("m", [MetricRecord("loss", 0, 0, 1.0, -1, 0.0)])
    sink.end_mode(ModeEnd("m", "completed", None, 0, {}))
    sink.log_metrics("m", [MetricRecord("accuracy", 0, 0, 0.5, -1, 0.0)])
    sink.close()
    lines = (tmp_path / "m.metrics.csv").read_text().splitlines()
    assert lines == [HEADERS["metrics"], "loss,0,0,1.0", "accuracy,0,0,0.5"]


def test_rows_of_an_unknown_mode_are_dropped(tmp_path: Path) -> None:
    sink = CsvSink(tmp_path)
    sink.log_steps("never started", [StepRecord(0, 0.0, 0.0, 0.0, 0)])
    sink.flush()
    assert list(tmp_path.iterdir()) == []
