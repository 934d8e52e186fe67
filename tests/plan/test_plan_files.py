"""Plan files: one reader validates a plan once, and a bad file is refused with one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from migrate_support import plan_for
from plan_sections import count_plan_validations

from codedag.cli.main import main
from codedag.errors import SchemaError
from codedag.migrate.api import PipelineMigrator
from codedag.plan import MigrationPlan, read_plan

BAD = {
    "not JSON": "{not json",
    "not an object": "[1, 2]",
    "newer": json.dumps({"schema_version": 9, "context_device_map": {}}),
    "malformed": json.dumps({"context_device_map": {"a#0/cv2.flip#0": "gpu"}, "k": 0}),
    "not a plan": json.dumps({"nodes": []}),
}


@pytest.fixture
def validations(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every validation of a plan dict through the model."""
    return count_plan_validations(monkeypatch)


def test_a_plan_file_is_validated_once_from_the_file_to_the_migrator(
    tmp_path: Path, validations: list[object]
) -> None:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan_for({"ds.get/cv2.flip#0": "cpu"})))
    plan = read_plan(path)
    assert isinstance(plan, MigrationPlan) and plan.devices == {"cpu"}
    assert len(validations) == 1
    migrator = PipelineMigrator.from_json(path, default_device="cpu", guard=False)
    assert migrator.plan.migrated_functions == ["cv2.flip"]
    assert len(validations) == 2  # from_json read the file once more, and validated it once
    PipelineMigrator.from_plan(plan, default_device="cpu", guard=False)
    assert len(validations) == 2  # a model is used as it is


@pytest.mark.parametrize("what", [*BAD, "missing"])
def test_a_bad_plan_file_is_one_line_naming_it(
    what: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad plan.json"
    if what != "missing":
        path.write_text(BAD[what])
    with pytest.raises(SchemaError) as refused:
        read_plan(path)
    message = str(refused.value)
    assert "\n" not in message and "bad plan.json" in message
    assert main(["plan", "explain", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bad plan.json" in err and "Traceback" not in err
