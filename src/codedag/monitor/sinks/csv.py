"""The raw streams next to ``results.json``: every step, resource sample and logged value as CSV.

Per mode ``<mode>.batches.csv`` (``batch,time_s,batch_time_s,data_wait_s``),
``<mode>.resources.csv`` (``timestamp,metric,value``, metric names as in the results file:
``cpu_usage``, ``workers_cpu_usage``, ``gpu_usage/0``, ...) and ``<mode>.metrics.csv``
(``metric,epoch,batch,value``). :mod:`codedag.monitor.rebuild` recomputes a run from them.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from codedag.monitor.probes import ResourceSample
from codedag.monitor.records import MetricRecord, ModeEnd, ModeInfo, StepRecord
from codedag.monitor.resources import sample_rows
from codedag.monitor.sinks.base import Sink
from codedag.monitor.spill import CsvSpill

HEADERS = {
    "batches": "batch,time_s,batch_time_s,data_wait_s",
    "resources": "timestamp,metric,value",
    "metrics": "metric,epoch,batch,value",
}


def csv_files(file_stem: str) -> dict[str, str]:
    """The stream file names of a mode, by kind (``batches``, ``resources``, ``metrics``)."""
    return {kind: f"{file_stem}.{kind}.csv" for kind in HEADERS}


class CsvSink(Sink):
    """Writes each mode's raw streams into ``run_dir``.

    Args:
        run_dir: the run folder (the folder of ``results.json``).
    """

    name = "csv"

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self._modes: dict[str, dict[str, CsvSpill]] = {}
        self._lock = threading.Lock()

    def start_mode(self, mode: ModeInfo) -> None:
        spills = {
            kind: CsvSpill(self.run_dir / name, HEADERS[kind])
            for kind, name in csv_files(mode.file_stem).items()
        }
        with self._lock:
            self._modes[mode.name] = spills

    def _spill(self, mode: str, kind: str) -> CsvSpill | None:
        spills = self._modes.get(mode)
        return spills[kind] if spills is not None else None

    def log_steps(self, mode: str, steps: Sequence[StepRecord]) -> None:
        spill = self._spill(mode, "batches")
        if spill is not None:
            spill.write_lines(
                [f"{s.step},{s.time_s:.6f},{s.batch_time_s:.9g},{s.data_wait_s:.9g}" for s in steps]
            )

    def log_resources(self, mode: str, sample: ResourceSample) -> None:
        spill = self._spill(mode, "resources")
        if spill is not None:
            ts = round(sample.timestamp, 3)
            spill.write_lines(
                [f"{ts:.3f},{name},{value:.6g}" for name, value in sample_rows(sample)]
            )

    def log_metrics(self, mode: str, rows: Sequence[MetricRecord]) -> None:
        spill = self._spill(mode, "metrics")
        if spill is not None:
            spill.write_lines([f"{r.name},{r.epoch},{r.batch},{r.value!r}" for r in rows])

    def end_mode(self, end: ModeEnd) -> None:
        # closed, not forgotten: a value logged after stop_mode() reopens its stream to append
        for spill in self._modes.get(end.name, {}).values():
            spill.close()

    def flush(self) -> None:
        for spills in list(self._modes.values()):
            for spill in spills.values():
                spill.flush()

    def close(self) -> None:
        with self._lock:
            modes, self._modes = self._modes, {}
        for spills in modes.values():
            for spill in spills.values():
                spill.close()

    def open_files(self) -> list[IO[str]]:
        return [
            spill._fh
            for spills in list(self._modes.values())
            for spill in spills.values()
            if spill._fh is not None
        ]
