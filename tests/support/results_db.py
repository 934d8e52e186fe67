"""Results databases (``codedag_energy.sqlite``) that are not sound, for the store and CLI tests."""

from __future__ import annotations

import json
import random
import sqlite3
from pathlib import Path

from codedag.energy.store import DB_NAME, ResultsDB

DAMAGES = ("random-bytes", "damaged-pages", "other-columns", "record-not-object", "text-lr")
"""Damages that :func:`damaged_results_db` makes; the first three are found on opening."""


def experiment(i: int, **changes: object) -> dict[str, object]:
    """One experiment record as a session stores it."""
    record: dict[str, object] = {
        "session": "run_1",
        "experiment_id": f"toy_m_{i:03d}",
        "timestamp": f"2025-01-01T00:00:{i:02d}",
        "repository": "toy",
        "model": "m",
        "training_success": True,
        "duration_seconds": 1.5,
        "hyperparameters": {"learning_rate": 0.1 + i},
        "performance_metrics": {"accuracy": 90.0},
        "energy_metrics": {"cpu_energy_total_joules": 3.0},
    }
    return record | changes


def damaged_results_db(folder: Path, damage: str) -> Path:
    """``folder/codedag_energy.sqlite`` with ``damage`` (one of :data:`DAMAGES`)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / DB_NAME
    noise = random.Random(damage)
    if damage == "random-bytes":
        path.write_bytes(noise.randbytes(8192))
        return path
    if damage == "other-columns":
        with sqlite3.connect(path) as db:
            db.execute("CREATE TABLE experiments (id INTEGER, data BLOB)")
        return path
    db = ResultsDB(folder)
    for i in range(40 if damage == "damaged-pages" else 1):  # kB records: the table spans pages
        db.add_experiment(experiment(i, log="x" * 3000))
    if damage == "damaged-pages":
        data = bytearray(path.read_bytes())
        data[4096:] = noise.randbytes(len(data) - 4096)  # all but the first page (the schema)
        path.write_bytes(bytes(data))
    elif damage in ("record-not-object", "text-lr"):
        record = (
            "[1, 2]"
            if damage == "record-not-object"
            else json.dumps(experiment(99, hyperparameters={"learning_rate": "fast"}))
        )
        with sqlite3.connect(path) as connection:
            connection.execute(
                "INSERT INTO experiments (session, experiment_id, timestamp, repository, model, "
                "record) VALUES ('run_1', 'toy_m_099', 'z', 'toy', 'm', ?)",
                (record,),
            )
    else:
        raise ValueError(f"unknown damage {damage!r}")
    return path
