"""The results database: a file that is not a sound codedag database is one ConfigError."""

from __future__ import annotations

from pathlib import Path

import pytest
from results_db import DAMAGES, damaged_results_db, experiment

from codedag.energy.store import ResultsDB
from codedag.errors import ConfigError


def test_a_sound_database_reopens_with_its_records(tmp_path: Path) -> None:
    db = ResultsDB(tmp_path)
    db.add_experiment(experiment(1))
    db.upsert_session("run_1", tmp_path / "run_1", {"started": "2025", "status": "completed"})
    again = ResultsDB(tmp_path)
    assert again.experiments() == [experiment(1)]
    assert again.hyperparameters("toy", "m") == [{"learning_rate": 1.1}]
    assert [s["experiments"] for s in again.sessions()] == [1]


@pytest.mark.parametrize("damage", DAMAGES[:3])
def test_a_damaged_database_is_refused_on_opening(tmp_path: Path, damage: str) -> None:
    path = damaged_results_db(tmp_path, damage)
    with pytest.raises(ConfigError, match="is not a codedag results database") as error:
        ResultsDB(tmp_path)
    assert str(path) in str(error.value)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        ("record-not-object", "the record of experiment 'toy_m_099' of session 'run_1'"),
        ("text-lr", "hyperparameters of experiment 'toy_m_099' of session 'run_1' holds a value"),
    ],
)
def test_a_record_of_the_wrong_shape_is_refused_when_read(
    tmp_path: Path, damage: str, problem: str
) -> None:
    path = damaged_results_db(tmp_path, damage)
    db = ResultsDB(tmp_path)
    for read in (db.experiments, lambda: db.hyperparameters("toy", "m")):
        with pytest.raises(ConfigError, match="is not a codedag results database") as error:
            read()
        assert str(path) in str(error.value) and problem in str(error.value)
