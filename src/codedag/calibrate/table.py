"""A human view of a calibration: one row per measured call signature."""

from __future__ import annotations

from typing import Any

from codedag.calibrate.measurement import Calibration


def fmt_ms(ns: int | None) -> str:
    """Milliseconds with three significant digits ("-" when unknown)."""
    if ns is None:
        return "-"
    return f"{ns / 1e6:.3g}"


def calibration_table(calibration: Calibration) -> Any:
    """A rich Table: function, arguments, library ms, torch ms, speedup, spread, source, note."""
    from rich.table import Table

    cached = f"{calibration.from_cache} from cache" if calibration.from_cache else "none cached"
    table = Table(
        title=(
            f"calibration on {calibration.device} ({calibration.device_name}): "
            f"{calibration.measured} measured, {cached}, {calibration.elapsed_s:.2f} s"
        ),
        expand=False,
    )
    table.add_column("function", overflow="fold", max_width=40)
    table.add_column("arguments", overflow="fold", max_width=40)
    table.add_column("library ms", justify="right")
    table.add_column("torch ms", justify="right")
    table.add_column("speedup", justify="right")
    table.add_column("spread ms", justify="right")
    table.add_column("note", overflow="fold", max_width=50)
    for m in calibration.rows():
        speedup = m.speedup
        style = "green" if speedup is not None and speedup > 1 else ""
        table.add_row(
            m.function,
            m.arguments,
            fmt_ms(m.original.median_ns if m.original else None),
            fmt_ms(m.backend.median_ns if m.backend else None),
            "-" if speedup is None else f"{speedup:.2f}x",
            fmt_ms(m.spread_ns) if m.ok else "-",
            (m.error or "") + (" (cached)" if m.cached else ""),
            style=style,
        )
    dispatch = calibration.dispatch
    table.caption = (
        f"patched-call overhead: {dispatch.migrated_ns / 1e3:.2g} us migrated, "
        f"{dispatch.passthrough_ns / 1e3:.2g} us passed through; cache "
        f"{calibration.cache_path or 'in memory'}"
    )
    return table
