"""The calibration table: one row per measured signature, slowest original first, times in
milliseconds with three significant digits, and the wrapper's costs in the caption."""

from __future__ import annotations

from rich.console import Console

from codedag.calibrate.measurement import Calibration, DispatchCost, Measurement
from codedag.calibrate.table import calibration_table, fmt_ms
from codedag.measure.summary import Timing


def _timing(median_ns: int) -> Timing:
    return Timing(median_ns, median_ns - 1000, median_ns + 1000, 9)


def test_milliseconds_keep_three_significant_digits() -> None:
    assert fmt_ms(None) == "-"
    assert fmt_ms(1_234_567) == "1.23"
    assert fmt_ms(50_000) == "0.05"


def test_rows_are_sorted_slowest_first_and_show_speedup_and_errors() -> None:
    fast = Measurement("cv2.flip", "s1", "(8, 8) uint8", "cpu", "cpu", _timing(2_000_000))
    fast.backend = _timing(1_000_000)
    slow = Measurement("cv2.resize", "s2", "(64, 64) uint8", "cpu", "cpu", _timing(9_000_000))
    slow.error = "results differ"
    calibration = Calibration(
        "cpu",
        "test cpu",
        {"a": fast, "b": slow},
        dispatch=DispatchCost(migrated_ns=1500, passthrough_ns=300),
        measured=2,
        elapsed_s=0.5,
    )
    table = calibration_table(calibration)
    assert table.row_count == 2
    columns = {c.header: list(c.cells) for c in table.columns}
    assert columns["function"] == ["cv2.resize", "cv2.flip"]
    assert columns["library ms"] == ["9", "2"]
    assert columns["speedup"] == ["-", "2.00x"]
    assert columns["note"] == ["results differ", ""]
    console = Console(width=200, record=True)
    console.print(table)
    text = console.export_text()
    assert "2 measured, none cached" in text and "1.5 us migrated, 0.3 us passed" in text
