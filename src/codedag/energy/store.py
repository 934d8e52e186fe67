"""Results on disk: session folders, experiment.json, summary.csv and one SQLite database.

Layout (the original)::

    results/
      codedag_energy.sqlite               every experiment of every session
      run_20251113_150000/                one session
        session.json                      settings, governor, status
        summary.csv                       rewritten atomically after every experiment
        examples_mnist_cnn_001/
          experiment.json
          training.log
          energy/                         raw samples and counter readings

A database file that is not codedag's (random bytes, damaged pages, other tables or columns,
records that are not JSON objects) is a :class:`~codedag.errors.ConfigError` naming the file,
found when it is opened where SQLite can tell, and at the latest when it is read.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from codedag.errors import ConfigError, SchemaError
from codedag.util.io import atomic_write_json, atomic_write_text, own_file
from codedag.util.text import printable

SCHEMA_VERSION = 1
DB_NAME = "codedag_energy.sqlite"
# The database's tables and their columns, in order (rows are inserted by position).
TABLES = {
    "sessions": ("session", "path", "started", "finished", "experiment_name", "status", "info"),
    "experiments": (
        "session",
        "experiment_id",
        "timestamp",
        "repository",
        "model",
        "mode",
        "governor",
        "training_success",
        "duration_s",
        "retries",
        "cpu_energy_j",
        "gpu_energy_j",
        "record",
    ),
}

BASE_COLUMNS = [
    "experiment_id",
    "timestamp",
    "repository",
    "model",
    "training_success",
    "duration_seconds",
    "retries",
]
# CSV column -> key of experiment.json's "energy_metrics". Missing measurements stay empty.
ENERGY_COLUMNS = {
    "energy_cpu_pkg_joules": "cpu_energy_pkg_joules",
    "energy_cpu_ram_joules": "cpu_energy_ram_joules",
    "energy_cpu_total_joules": "cpu_energy_total_joules",
    "energy_gpu_total_joules": "gpu_energy_total_joules",
    "energy_gpu_integrated_joules": "gpu_energy_integrated_joules",
    "energy_gpu_avg_watts": "gpu_power_avg_watts",
    "energy_gpu_max_watts": "gpu_power_max_watts",
    "energy_gpu_min_watts": "gpu_power_min_watts",
    "energy_gpu_temp_avg_celsius": "gpu_temp_avg_celsius",
    "energy_gpu_temp_max_celsius": "gpu_temp_max_celsius",
    "energy_gpu_util_avg_percent": "gpu_util_avg_percent",
    "energy_gpu_util_max_percent": "gpu_util_max_percent",
    "energy_cpu_source": "cpu_energy_source",
    "energy_gpu_source": "gpu_energy_source",
}


def summary_columns(records: Sequence[Mapping[str, Any]]) -> list[str]:
    """The summary's columns: base, ``hyperparam_*``, ``perf_*``, ``energy_*`` (dynamic parts
    sorted)."""
    hyper = sorted({k for r in records for k in r.get("hyperparameters", {})})
    perf = sorted({k for r in records for k in r.get("performance_metrics", {})})
    return [
        *BASE_COLUMNS,
        *(f"hyperparam_{k}" for k in hyper),
        *(f"perf_{k}" for k in perf),
        *ENERGY_COLUMNS,
    ]


def summary_row(record: Mapping[str, Any]) -> dict[str, Any]:
    """Flatten one experiment record into summary.csv's columns."""
    row: dict[str, Any] = {k: record.get(k) for k in BASE_COLUMNS}
    row.update({f"hyperparam_{k}": v for k, v in record.get("hyperparameters", {}).items()})
    row.update({f"perf_{k}": v for k, v in record.get("performance_metrics", {}).items()})
    energy = record.get("energy_metrics", {})
    row.update({col: energy.get(key) for col, key in ENERGY_COLUMNS.items()})
    return row


def render_csv(records: Sequence[Mapping[str, Any]], extra_base: Sequence[str] = ()) -> str:
    """Records as CSV text with the summary columns (plus ``extra_base`` in front)."""
    columns = [*extra_base, *summary_columns(records)]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for record in records:
        row = summary_row(record)
        row.update({k: record.get(k) for k in extra_base})
        writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return buffer.getvalue()


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class ResultsDB:
    """The SQLite database of all sessions under a results folder (safe across threads).

    Raises:
        ConfigError: the file is not a sound codedag results database (checked on opening:
            SQLite's quick check of every page, and the tables' columns).
    """

    def __init__(self, results_dir: Path) -> None:
        self.path = Path(results_dir) / DB_NAME
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        with self._open() as db:
            self._create_tables(db)
            self._check(db)

    def _broken(self, problem: object) -> ConfigError:
        return ConfigError(
            f"{self.path} is not a codedag results database: {printable(problem, 200)}"
        )

    @contextlib.contextmanager
    def _open(self) -> Iterator[sqlite3.Connection]:
        """A connection under the lock, committed and closed; SQLite's errors name the file."""
        with self._lock:
            own_file(self.path)  # SQLite opens it by name: never through a link planted there
            try:
                db = sqlite3.connect(self.path, timeout=30)
            except sqlite3.DatabaseError as error:
                raise self._broken(error) from None
            try:
                with db:
                    yield db
            except sqlite3.DatabaseError as error:
                raise self._broken(error) from None
            finally:
                db.close()

    def _check(self, db: sqlite3.Connection) -> None:
        """Every page readable and each table with codedag's columns."""
        found = [str(row[0]) for row in db.execute("PRAGMA quick_check(3)")]
        if found != ["ok"]:
            lines = [line for text in found for line in text.splitlines()]
            damage = [line for line in lines if line.strip() and not line.startswith("***")]
            raise self._broken(f"damaged: {'; '.join(damage)}")
        for table, expected in TABLES.items():
            columns = tuple(row[1] for row in db.execute(f"PRAGMA table_info({table})"))
            if columns != expected:
                raise self._broken(
                    f"table {table} has columns ({', '.join(columns)}), "
                    f"expected ({', '.join(expected)})"
                )

    def _create_tables(self, db: sqlite3.Connection) -> None:
        db.executescript(
            """
            CREATE TABLE IF NOT EXISTS sessions (
                session TEXT PRIMARY KEY, path TEXT, started TEXT, finished TEXT,
                experiment_name TEXT, status TEXT, info TEXT);
            CREATE TABLE IF NOT EXISTS experiments (
                session TEXT, experiment_id TEXT, timestamp TEXT, repository TEXT,
                model TEXT, mode TEXT, governor TEXT, training_success INTEGER,
                duration_s REAL, retries INTEGER, cpu_energy_j REAL, gpu_energy_j REAL,
                record TEXT, PRIMARY KEY (session, experiment_id));
            """
        )

    def upsert_session(self, session: str, path: Path, info: Mapping[str, Any]) -> None:
        """Create or update a session row."""
        with self._open() as db:
            db.execute(
                "INSERT INTO sessions VALUES (?,?,?,?,?,?,?) ON CONFLICT(session) DO UPDATE SET "
                "finished=excluded.finished, status=excluded.status, info=excluded.info",
                (
                    session,
                    str(path),
                    info.get("started"),
                    info.get("finished"),
                    info.get("experiment_name"),
                    info.get("status"),
                    json.dumps(info, default=str),
                ),
            )

    def add_experiment(self, record: Mapping[str, Any]) -> None:
        """Insert (or replace) one experiment record."""
        energy = record.get("energy_metrics", {})
        with self._open() as db:
            db.execute(
                "INSERT OR REPLACE INTO experiments VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    record["session"],
                    record["experiment_id"],
                    record["timestamp"],
                    record["repository"],
                    record["model"],
                    record.get("mode"),
                    record.get("governor"),
                    int(bool(record.get("training_success"))),
                    record.get("duration_seconds"),
                    record.get("retries"),
                    energy.get("cpu_energy_total_joules"),
                    energy.get("gpu_energy_total_joules"),
                    json.dumps(record, default=str),
                ),
            )

    def sessions(self) -> list[dict[str, Any]]:
        """Every session with its experiment and success counts, newest first."""
        with self._open() as db:
            db.row_factory = sqlite3.Row
            rows = db.execute(
                "SELECT s.session, s.path, s.started, s.finished, s.experiment_name, s.status, "
                "COUNT(e.experiment_id) AS experiments, "
                "COALESCE(SUM(e.training_success), 0) AS succeeded, "
                "SUM(e.cpu_energy_j) AS cpu_energy_j, SUM(e.gpu_energy_j) AS gpu_energy_j "
                "FROM sessions s LEFT JOIN experiments e ON e.session = s.session "
                "GROUP BY s.session ORDER BY s.started DESC"
            ).fetchall()
        return [dict(r) for r in rows]

    def experiments(
        self,
        session: str | None = None,
        repository: str | None = None,
        model: str | None = None,
        success: bool | None = None,
    ) -> list[dict[str, Any]]:
        """Experiment records matching every given filter, oldest first."""
        clauses: list[str] = []
        params: list[str | int] = []
        for column, value in (("session", session), ("repository", repository), ("model", model)):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        if success is not None:
            clauses.append("training_success = ?")
            params.append(int(success))
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        with self._open() as db:
            rows = db.execute(
                f"SELECT session, experiment_id, record FROM experiments {where} "
                "ORDER BY timestamp, experiment_id",
                params,
            ).fetchall()
        return [self._record(*row) for row in rows]

    def _record(self, session: object, experiment_id: object, text: object) -> dict[str, Any]:
        """One row's record, checked for the shape its readers rely on."""
        try:
            record = json.loads(text) if isinstance(text, str | bytes) else None
        except ValueError:
            record = None
        where = f"experiment {printable(experiment_id, 80)!r} of session {printable(session, 80)!r}"
        if not isinstance(record, dict):
            raise self._broken(f"the record of {where} is not a JSON object")
        for key in ("hyperparameters", "performance_metrics", "energy_metrics"):
            value = record.get(key, {})
            if not isinstance(value, dict):
                raise self._broken(f"{key} of {where} is not a JSON object")
            if key != "energy_metrics" and not all(_is_number(v) for v in value.values()):
                raise self._broken(f"{key} of {where} holds a value that is not a number")
        if record.get("duration_seconds") is not None and not _is_number(
            record["duration_seconds"]
        ):
            raise self._broken(f"duration_seconds of {where} is not a number")
        return record | {"session": session, "experiment_id": experiment_id}

    def hyperparameters(self, repository: str, model: str) -> list[dict[str, float]]:
        """Configurations already run for a model in any session (for cross-session dedup)."""
        return [r.get("hyperparameters", {}) for r in self.experiments(None, repository, model)]


class SessionStore:
    """One session folder: experiment folders, experiment.json files and summary.csv."""

    def __init__(self, results_dir: Path, db: ResultsDB | None = None) -> None:
        self.results_dir = Path(results_dir)
        self.db = db or ResultsDB(self.results_dir)
        stamp = time.strftime("%Y%m%d_%H%M%S")
        for suffix in ["", *(f"_{i}" for i in range(1, 1000))]:
            path = self.results_dir / f"run_{stamp}{suffix}"
            try:
                path.mkdir(parents=True)
                break
            except FileExistsError:
                continue
        self.path = path
        self.name = path.name
        self.records: list[dict[str, Any]] = []
        self._counters: dict[str, int] = {}
        self._lock = threading.Lock()

    def new_experiment_dir(self, repository: str, model: str) -> tuple[str, Path]:
        """Allocate ``<repo>_<model>_<NNN>`` (numbered per repository and model)."""
        with self._lock:
            base = f"{repository}_{model}"
            self._counters[base] = self._counters.get(base, 0) + 1
            experiment_id = f"{base}_{self._counters[base]:03d}"
            folder = self.path / experiment_id
            (folder / "energy").mkdir(parents=True)
        return experiment_id, folder

    def save_session_info(self, info: Mapping[str, Any]) -> None:
        """Write session.json and update the database's session row."""
        atomic_write_json(self.path / "session.json", {"schema_version": SCHEMA_VERSION, **info})
        self.db.upsert_session(self.name, self.path, info)

    def add(self, record: dict[str, Any]) -> None:
        """Save an experiment: experiment.json, the database row, and the rewritten summary.csv."""
        record = {"schema_version": SCHEMA_VERSION, "session": self.name, **record}
        atomic_write_json(self.path / record["experiment_id"] / "experiment.json", record)
        with self._lock:
            self.records.append(record)
            records = list(self.records)
        self.db.add_experiment(record)
        atomic_write_text(self.path / "summary.csv", render_csv(records))


def load_session_records(session_dir: Path) -> list[dict[str, Any]]:
    """Read every experiment.json of a session folder, in experiment order."""
    session_dir = Path(session_dir)
    if not session_dir.is_dir():
        raise SchemaError(f"session folder {session_dir} does not exist")
    from codedag.util.io import read_json

    return [
        read_json(file, "experiment record", expect=dict)
        for file in sorted(session_dir.glob("*/experiment.json"))
    ]
