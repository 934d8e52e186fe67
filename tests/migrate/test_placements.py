"""The migrator's index of a plan: placements by function, validated by the plan model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from migrate_support import plan_for

from codedag.errors import SchemaError
from codedag.migrate.placements import PlanView, load_plan_file, parse_plan


def test_placed_calls_are_indexed_by_function_with_their_device() -> None:
    view = parse_plan(plan_for({"ds.get/cv2.flip#0": "cpu", "ds.get/cv2.add#1": "cpu"}))
    assert view.entries == {
        "cv2.flip": [("ds.get/cv2.flip#0", "cpu")],
        "cv2.add": [("ds.get/cv2.add#1", "cpu")],
    }
    assert view.devices == {"cpu"}
    assert view.migrated_functions == ["cv2.add", "cv2.flip"]
    assert view.plan is not None and view.plan.context_device_map["ds.get/cv2.flip#0"] == "cpu"


def test_traced_calls_the_plan_keeps_on_the_cpu_are_indexed_as_none() -> None:
    calls = [
        {"function": "numpy.clip", "migrate": False, "context_keys": ["ds.get/numpy.clip#0"]},
        {"function": "cv2.flip", "migrate": True, "context_keys": ["ds.get/cv2.flip#0"]},
    ]
    view = parse_plan(plan_for({"ds.get/cv2.flip#0": "cpu"}, calls))
    assert view.entries["numpy.clip"] == [("ds.get/numpy.clip#0", None)]
    assert view.entries["cv2.flip"] == [("ds.get/cv2.flip#0", "cpu")]
    assert view.migrated_functions == ["cv2.flip"]


def test_an_empty_view_migrates_nothing() -> None:
    assert PlanView().migrated_functions == []


def test_an_invalid_plan_is_refused_with_its_source_named() -> None:
    with pytest.raises(SchemaError, match="my plan"):
        parse_plan({"schema_version": 1, "context_device_map": "nope"}, source="my plan")


def test_load_plan_file_round_trips_a_valid_plan(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan_for({"ds.get/cv2.flip#0": "cpu"})))
    plan = load_plan_file(path)
    assert plan.context_device_map == {"ds.get/cv2.flip#0": "cpu"}
    assert parse_plan(plan).migrated_functions == ["cv2.flip"]


def test_load_plan_file_refuses_a_missing_file_and_bad_json(tmp_path: Path) -> None:
    with pytest.raises(SchemaError):
        load_plan_file(tmp_path / "absent.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(SchemaError):
        load_plan_file(bad)
