"""The demo's HTML report: its mode and epoch tables, its notes, the written file."""

from __future__ import annotations

from pathlib import Path

import codedag.report.demo_report as demo_report
from codedag.experiments.demo_settings import (
    DemoResult,
    DemoSettings,
    EpochSummary,
    Equivalence,
    ModeSummary,
    PlanSummary,
)


def _demo(device: str = "cpu", **extra: object) -> DemoResult:
    modes = [
        ModeSummary("baseline", 20, 0.2, 0.1, 0.15, 0.5, 160.0, 1.25, 0.01, 2),
        ModeSummary("optimization", 20, 0.1, 0.08, 0.09, 0.125, 320.0, None, 0.02, 2),
    ]
    epochs = [
        EpochSummary("baseline", 1, 10, 320, 2.0, 1.0),
        EpochSummary("optimization", 1, 10, 320, 1.0, 0.25),
        EpochSummary("optimization", 2, 10, 320, 0.0, 0.0),
    ]
    fields = dict(
        settings=DemoSettings(task="images", batches=20, batch_size=32),
        device=device,
        modes=modes,
        speedup=2.0,
        migrated_calls={"cv2.resize": 640, "cv2.flip": 0},
        fallbacks={"cv2.warpAffine": 3, "cv2.add": 0},
        fallback_reasons={"cv2.warpAffine": {"dtype": 3}},
        equivalence=Equivalence(passed=True, batches_compared=2, max_abs_diff=0.0),
        plan_summary=PlanSummary(),
        epochs=epochs,
        verdict="2x faster",
        speedup_spread=0.1,
    )
    fields.update(extra)
    return DemoResult(**fields)  # type: ignore[arg-type]


def test_mode_rows_show_warm_up_spread_share_and_a_missing_loss() -> None:
    columns, rows = demo_report._mode_table(_demo())
    assert len(columns) == len(rows[0]) == 8
    assert rows[0][:3] == ["baseline", "20 (2 warm-up)", "0.2000 ± 0.0100"]
    assert rows[0][5] == "50.0 %" and rows[0][7] == 1.25
    assert rows[1][7] == "n/a"


def test_epoch_rows_compare_with_the_baselines_same_epoch() -> None:
    _columns, rows = demo_report._epoch_table(_demo())
    assert rows[0][6:] == ["50.0 %", "1.00x"]
    assert rows[1][6:] == ["25.0 %", "2.00x"]
    assert rows[2][6:] == ["-", "-"]  # no time measured, no baseline epoch 2


def test_notes_state_the_verdict_speedup_migrations_and_fallbacks() -> None:
    notes = demo_report._notes(_demo())
    assert notes[0] == "2x faster"
    assert any("first 2 batch(es)" in n for n in notes)
    assert any("2.000x ± 0.100 (95 % interval)" in n for n in notes)
    assert "Migrated calls per function: cv2.resize: 640" in notes
    assert "Fallbacks to the original function: cv2.warpAffine: 3 ({'dtype': 3})" in notes
    assert notes[-1].startswith("No CUDA device here")


def test_notes_of_a_run_without_difference_or_migrations() -> None:
    demo = _demo("cuda:0", verdict="", speedup=1.0, speedup_spread=None, migrated_calls={},
                 fallbacks={}, difference="no difference")  # fmt: skip
    notes = demo_report._notes(demo)
    assert not any(n.startswith("No CUDA") for n in notes)
    assert any(n.endswith("1.000x: no difference, the ratio lies within its spread") for n in notes)
    assert "Migrated calls per function: none" in notes
    assert not any(n.startswith("Fallbacks") for n in notes)


def test_the_report_file_is_written_with_the_tables(tmp_path: Path) -> None:
    path = demo_report.write_demo_report(
        tmp_path / "report.html", _demo(), {}, None, "digraph { a -> b }", [],
        {"host": "h1", "python": "3.12", "secret": "not shown"},
    )  # fmt: skip
    text = path.read_text()
    assert path == tmp_path / "report.html"
    assert "codedag demo (images)" in text and "20 batches of 32 per mode on cpu" in text
    assert "20 (2 warm-up)" in text and "2.00x" in text
    assert "h1" in text and "not shown" not in text
