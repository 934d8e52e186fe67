"""The tracer's calibrated per-event costs: measured once per setting, then cached; every cost
is a finite non-negative time, and following lines adds a per-line cost."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from codedag.trace import overhead
from codedag.trace.costs import Calibration
from codedag.trace.overhead import calibration
from codedag.trace.records import KIND_C, KIND_PY, KIND_WRAPPED


def test_a_calibration_is_measured_once_per_setting_and_its_costs_are_times() -> None:
    first = calibration(track_memory=False)
    assert calibration(track_memory=False) is first
    assert isinstance(first, Calibration)
    for name, value in first.to_dict().items():
        assert math.isfinite(value) and value >= 0, name
    for kind in (KIND_PY, KIND_WRAPPED, KIND_C):
        assert first.per_record(kind) >= 0
    assert first.line_ns == 0.0  # no line events without line-level tracing
    assert calibration(track_memory=False, line_level=True) is not first


def _new_process(monkeypatch: Any) -> None:
    """Forget this process's measurements, as a new process would have none."""
    monkeypatch.setattr(overhead, "_cache", {})


def _measurements(monkeypatch: Any) -> list[bool]:
    counted: list[bool] = []
    measure = overhead._once

    def once(track_memory: bool, line_level: bool) -> Calibration:
        counted.append(track_memory)
        return measure(track_memory, line_level)

    monkeypatch.setattr(overhead, "_once", once)
    return counted


def test_a_later_process_reads_the_costs_back_instead_of_measuring(
    monkeypatch: Any, tmp_path: Path
) -> None:
    monkeypatch.setenv("CODEDAG_CACHE_DIR", str(tmp_path))
    _new_process(monkeypatch)
    counted = _measurements(monkeypatch)
    first = calibration(track_memory=False)
    assert len(counted) == overhead._REPEATS and (tmp_path / overhead.COSTS_FILE).is_file()
    _new_process(monkeypatch)
    assert calibration(track_memory=False) == first
    assert len(counted) == overhead._REPEATS  # read back, not measured
    calibration(track_memory=True)  # another setting: measured, and kept beside the first
    _new_process(monkeypatch)
    assert calibration(track_memory=False) == first
    assert len(counted) == 2 * overhead._REPEATS


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        '["a list"]',
        '{"entries": "none"}',
        "{entry}",  # the right key, NaN costs
        "{entry_negative}",
        "{entry_huge}",
        "{entry_missing}",
        "{entry_text}",
    ],
)
def test_costs_from_elsewhere_are_measured_again_and_replaced(
    monkeypatch: Any, tmp_path: Path, text: str
) -> None:
    monkeypatch.setenv("CODEDAG_CACHE_DIR", str(tmp_path))
    key = overhead._entry_key((False, tracemalloc.is_tracing(), False))
    good = dict.fromkeys(overhead._FIELDS, 1.0)
    bad = {
        "{entry}": {**good, "skip_ns": float("nan")},
        "{entry_negative}": {**good, "kept_py_ns": -5.0},
        "{entry_huge}": {**good, "kept_c_ns": 1e12},
        "{entry_missing}": {k: v for k, v in good.items() if k != "line_ns"},
        "{entry_text}": {**good, "skip_ns": "1.0"},
    }
    path = tmp_path / overhead.COSTS_FILE
    if text in bad:
        path.write_text(json.dumps({"entries": {key: bad[text]}}))
    else:
        path.write_text(text)
    _new_process(monkeypatch)
    counted = _measurements(monkeypatch)
    costs = calibration(track_memory=False)
    assert len(counted) == overhead._REPEATS
    for name, value in costs.to_dict().items():
        assert math.isfinite(value) and 0 <= value <= overhead._MAX_COST_NS, name
    saved = json.loads(path.read_text())["entries"][key]
    assert saved == dataclasses.asdict(costs)


def test_a_cache_folder_that_cannot_be_written_still_gives_costs(
    monkeypatch: Any, tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("CODEDAG_CACHE_DIR", str(blocker / "below"))
    _new_process(monkeypatch)
    costs = calibration(track_memory=False)
    assert isinstance(costs, Calibration) and not (blocker / "below").exists()


def _valid_file(path: Path) -> str:
    """A file holding costs of 1 ns for the default setting: what a read would take."""
    key = overhead._entry_key((False, tracemalloc.is_tracing(), False))
    text = json.dumps({"entries": {key: dict.fromkeys(overhead._FIELDS, 1.0)}})
    path.write_text(text)
    return text


def test_costs_are_never_read_through_a_link(monkeypatch: Any, tmp_path: Path) -> None:
    monkeypatch.setenv("CODEDAG_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
    elsewhere = tmp_path / "elsewhere.json"
    text = _valid_file(elsewhere)
    (tmp_path / "cache" / overhead.COSTS_FILE).symlink_to(elsewhere)
    _new_process(monkeypatch)
    counted = _measurements(monkeypatch)
    calibration(track_memory=False)
    assert len(counted) == overhead._REPEATS  # measured, not read through the link
    assert elsewhere.read_text() == text  # and nothing written through it


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="needs root to chown")
def test_another_users_costs_are_not_read(monkeypatch: Any, tmp_path: Path) -> None:
    monkeypatch.setenv("CODEDAG_CACHE_DIR", str(tmp_path))
    path = tmp_path / overhead.COSTS_FILE
    _valid_file(path)
    os.chown(path, 12345, 12345)
    _new_process(monkeypatch)
    counted = _measurements(monkeypatch)
    calibration(track_memory=False)
    assert len(counted) == overhead._REPEATS


def test_a_valid_file_of_this_user_is_read(monkeypatch: Any, tmp_path: Path) -> None:
    monkeypatch.setenv("CODEDAG_CACHE_DIR", str(tmp_path))
    _valid_file(tmp_path / overhead.COSTS_FILE)
    _new_process(monkeypatch)
    counted = _measurements(monkeypatch)
    assert calibration(track_memory=False) == Calibration(*(1.0,) * len(overhead._FIELDS))
    assert counted == []
