"""The ``results.json`` of an accelerated run (``codedag run``, ``codedag.accelerate``): one model
shared by the writer and every reader.

:class:`AcceleratedRun` holds the planned DataLoader's epochs (time, samples, data wait), what the
plan moved and kept with the reasons, the prefix cache's counters and why planning was skipped
when it was. :meth:`AcceleratedRun.save` writes it atomically; :func:`load_run_results` reads and
validates a file (a newer schema version is refused with the version it found).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from codedag.errors import SchemaError

RUN_SCHEMA_VERSION = 1
RESULTS_FILE = "results.json"


class EpochFigures(BaseModel):
    """One epoch of the planned DataLoader, as the script consumed it."""

    model_config = ConfigDict(extra="forbid")

    epoch: int
    batches: int = 0
    samples: int = 0
    epoch_s: float = 0.0
    """From the iterator's creation to its last batch (or the next epoch's start)."""
    data_wait_s: float = 0.0
    """Time the script spent waiting in ``__next__`` (and creating the iterator)."""
    complete: bool = False
    """The iterator was exhausted (False: the script stopped reading early)."""
    planned: bool = False
    """A plan was applied during this epoch."""
    plan_from_batch: int | None = None
    """The batch (from 1) from which a plan applied within this epoch served it; ``None`` when it
    served the whole epoch or none of it."""

    @property
    def samples_per_s(self) -> float:
        """Samples per second over the epoch (0 for an empty one)."""
        return self.samples / self.epoch_s if self.epoch_s > 0 else 0.0


class Decision(BaseModel):
    """One thing the plan moved (or kept where it was), and why."""

    model_config = ConfigDict(extra="forbid")

    what: str
    section: str
    """``calls``, ``batched`` or ``cache``."""
    where: str = ""
    reason: str = ""


class AcceleratedRun(BaseModel):
    """Everything one accelerated run measured and decided."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = RUN_SCHEMA_VERSION
    codedag_version: str = ""
    command: list[str] = Field(default_factory=list)
    exit_code: int | None = None
    loaders_seen: int = 0
    loader_index: int | None = None
    """Which DataLoader was planned, counted from 0 in the order of first iteration."""
    dataset: str = ""
    device: str = ""
    plan_status: str = "not planned"
    """``applied``, ``nothing to apply`` (the plan changes nothing, so the loader runs as it
    is), either with `` (stored plan)``, ``skipped`` or ``not planned``."""
    plan_reason: str = ""
    plan_key: str = ""
    plan_path: str = ""
    trace_s: float = 0.0
    plan_s: float = 0.0
    epochs: list[EpochFigures] = Field(default_factory=list)
    moved: list[Decision] = Field(default_factory=list)
    kept: list[Decision] = Field(default_factory=list)
    cache: dict[str, Any] = Field(default_factory=dict)
    """``hits``, ``stored``, ``hit_rate``, ``hit_bytes`` and ``bytes`` of the prefix cache."""

    def save(self, folder: str | os.PathLike[str]) -> Path:
        """Write ``results.json`` into ``folder`` (created) atomically; return its path."""
        from codedag.util.io import atomic_write_text

        path = Path(folder) / RESULTS_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, self.model_dump_json(indent=2) + "\n")
        return path


def load_run_results(path: str | os.PathLike[str]) -> AcceleratedRun:
    """Read a ``results.json`` written by :meth:`AcceleratedRun.save` (or its folder).

    Raises:
        SchemaError: not JSON, not this model, or a schema version newer than this codedag's.
    """
    target = Path(path)
    if target.is_dir():
        target = target / RESULTS_FILE
    try:
        data = json.loads(target.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise SchemaError(f"{target}: not JSON ({error.msg} at line {error.lineno})") from None
    version = data.get("schema_version") if isinstance(data, dict) else None
    if not isinstance(version, int) or version > RUN_SCHEMA_VERSION:
        raise SchemaError(
            f"{target}: schema_version {version!r}; expected an integer <= {RUN_SCHEMA_VERSION}"
        )
    try:
        return AcceleratedRun.model_validate(data)
    except ValidationError as error:
        raise SchemaError(f"{target}: not an accelerated run's results: {error}") from None
