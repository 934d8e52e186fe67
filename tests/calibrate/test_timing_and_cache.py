"""Interleaved timing and the calibration cache."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from codedag.calibrate import Budget, CalibrationCache, Stopwatch, Timing
from codedag.calibrate.saved_times import default_cache_path, entry_key
from codedag.calibrate.timing import time_pair


def test_timing_summarizes_median_and_quartiles() -> None:
    t = Timing.of([10, 30, 20, 40, 50])
    assert (t.median_ns, t.samples) == (30, 5)
    assert t.q25_ns <= t.median_ns <= t.q75_ns and t.iqr_ns == t.q75_ns - t.q25_ns
    assert Timing.from_dict(t.to_dict()) == t


def test_time_pair_interleaves_and_stops_at_the_budget() -> None:
    order: list[str] = []
    clock = iter(range(0, 10**9, 1000))
    watch = Stopwatch(clock=lambda: next(clock))
    a, b = time_pair(
        lambda: order.append("a"), lambda: order.append("b"), watch,
        Budget(min_samples=4, max_samples=10, target_ns=4000, warmup=1),
    )  # fmt: skip
    assert a.samples == b.samples == 4  # 4 pairs of 1000 ns each reach the budget
    assert order[:2] == ["a", "b"]  # warm-up
    timed = order[2:]
    assert timed[:4] == ["a", "b", "b", "a"]  # alternating which goes first


def test_time_pair_propagates_a_failure() -> None:
    with pytest.raises(ZeroDivisionError):
        time_pair(lambda: None, lambda: 1 / 0)


def test_cache_persists_merges_and_sets_aside_a_broken_file(tmp_path: Path) -> None:
    path = tmp_path / "calibration.json"
    one = CalibrationCache(path)
    key = entry_key("cpu X", {"cv2": "5"}, "cv2.resize", "abc")
    assert one.get(key) is None and one.misses == 1
    one.put(key, {"function": "cv2.resize", "value": 1})
    two = CalibrationCache(path)  # another process's view
    assert two.get(key) == {"function": "cv2.resize", "value": 1} and two.hits == 1
    other = entry_key("cpu X", {"cv2": "5"}, "cv2.flip", "abc")
    one.put(other, {"function": "cv2.flip"})  # written after two was read: merged, not lost
    two.put(entry_key("cpu X", {}, "numpy.sum", ""), {"function": "numpy.sum"})
    assert len(CalibrationCache(path).entries) == 3
    path.write_text("{not json")
    broken = CalibrationCache(path)
    assert broken.entries == {} and (tmp_path / "calibration.json.unreadable").exists()
    json.loads(json.dumps(broken.entries))
    assert CalibrationCache(None).path is None


def test_entries_with_nan_infinite_or_negative_figures_are_ignored_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "calibration.json"
    good = {"function": "cv2.flip", "original": {"median_ns": 5, "samples": 9}, "error": None}
    entries = {
        "good": good,
        "nan": {"function": "a", "original": {"median_ns": float("nan")}},
        "inf": {"function": "b", "h2d_ns": float("inf")},
        "negative": {"function": "c", "original": {"median_ns": 5, "q25_ns": -1}},
        "listed": {"function": "d", "timed_steps": [0, -2]},
        "dispatch": {"migrated_ns": float("-inf"), "passthrough_ns": 3},
    }
    path.write_text(json.dumps({"schema_version": 1, "entries": entries}))  # NaN, Infinity
    with caplog.at_level(logging.WARNING, logger="codedag.calibrate.saved_times"):
        cache = CalibrationCache(path)
    assert cache.entries == {"good": good}
    (warning,) = caplog.records
    assert "5 entries with NaN, infinite or negative figures ignored" in warning.getMessage()
    cache.put("new", {"function": "cv2.resize", "original": {"median_ns": 7}})

    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} written")

    written = json.loads(path.read_text(), parse_constant=refuse)
    assert set(written["entries"]) == {"good", "new"}  # the hostile entries are gone
    assert len(caplog.records) == 1


def test_keys_depend_on_device_versions_function_and_signature() -> None:
    keys = {
        entry_key("cpu X", {"cv2": "5"}, "cv2.resize", "s"),
        entry_key("cpu Y", {"cv2": "5"}, "cv2.resize", "s"),
        entry_key("cpu X", {"cv2": "4"}, "cv2.resize", "s"),
        entry_key("cpu X", {"cv2": "5"}, "cv2.flip", "s"),
        entry_key("cpu X", {"cv2": "5"}, "cv2.resize", "t"),
    }
    assert len(keys) == 5


def test_default_cache_path_follows_the_environment(tmp_path: Path) -> None:
    env = {**os.environ, "CODEDAG_CACHE_DIR": str(tmp_path)}
    code = "from codedag.calibrate import default_cache_path; print(default_cache_path())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == str(tmp_path / "calibration.json")
    env.pop("CODEDAG_CACHE_DIR")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.strip().endswith("codedag/calibration.json")
    assert default_cache_path().name == "calibration.json"


def _starved() -> Stopwatch:
    """A stopwatch whose thread never gets the CPU: every measurement counts as disturbed."""
    return Stopwatch(cpu_clock=lambda: 0)


QUICK_PAIR = Budget(min_samples=3, max_samples=3, target_ns=0, warmup=0)


def test_disturbed_timings_in_a_calibration_are_said_in_one_line(caplog) -> None:
    from codedag.calibrate.timing import summarized_disturbances

    names = ["cv2.resize", "cv2.resize", "numpy.max", "cv2.flip", "cv2.LUT", "numpy.clip"]
    with caplog.at_level(logging.WARNING), summarized_disturbances() as seen:
        for name in names:
            time_pair(lambda: None, lambda: None, _starved(), QUICK_PAIR, what=f"{name} (x)",
                      function=name)  # fmt: skip
        assert caplog.records == []  # nothing said while calibrating
    assert seen == names
    assert len(caplog.records) == 1
    line = caplog.records[0].getMessage()
    assert line.startswith("6 timings of cv2.resize, numpy.max, cv2.flip")
    assert "and 2 more disturbed by other work: " in line and "--recalibrate" in line


def test_a_nested_calibration_leaves_the_summary_to_the_outer_one(caplog) -> None:
    from codedag.calibrate.timing import summarized_disturbances

    with caplog.at_level(logging.WARNING), summarized_disturbances():
        with summarized_disturbances():
            time_pair(lambda: None, lambda: None, _starved(), QUICK_PAIR, function="cv2.flip")
        assert caplog.records == []
        time_pair(lambda: None, lambda: None, _starved(), QUICK_PAIR, what="batched chain c0")
    assert [r.getMessage().split(":")[0] for r in caplog.records] == [
        "2 timings of cv2.flip and batched chain c0 disturbed by other work"
    ]


def test_a_disturbed_timing_alone_is_said_with_its_signs(caplog) -> None:
    with caplog.at_level(logging.WARNING):
        time_pair(lambda: None, lambda: None, _starved(), QUICK_PAIR, what="cv2.flip (x)")
    (record,) = caplog.records
    assert "timing cv2.flip (x) was disturbed" in record.getMessage()
    assert "ran on a CPU for 0%" in record.getMessage()


def test_a_calibrator_says_its_disturbed_measurements_once(caplog) -> None:
    from calibrate_helpers import array

    from codedag.calibrate import Calibrator
    from codedag.graph.model import ExecutionDAG

    dag = ExecutionDAG()
    for i, n in enumerate((4, 5, 6)):
        for name in ("numpy.clip", "numpy.max"):
            args = [array("0", [n, 8], "float32")]
            if name == "numpy.clip":
                args += [{"name": "1", "kind": "scalar", "value": 0.0},
                         {"name": "2", "kind": "scalar", "value": 1.0}]  # fmt: skip
            dag.add_call(name=name, context_key=f"{name}#{i}", is_builtin=True, args=args)
    calibrator = Calibrator("cpu", cache=CalibrationCache(None), stopwatch=_starved(),
                            budget=QUICK_PAIR)  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="codedag.calibrate"):
        calibrator.calibrate(dag.calls())
    lines = [r.getMessage() for r in caplog.records if "disturbed" in r.getMessage()]
    assert len(lines) == 1, lines
    assert lines[0].startswith("6 timings of numpy.clip and numpy.max disturbed by other work")
