"""The ``results.json`` of an accelerated run (``codedag run``, ``codedag.accelerate``): one model
shared by the writer and every reader.

:class:`AcceleratedRun` holds the planned DataLoader's epochs (time, samples, data wait), what the
plan moved and kept with the reasons, the prefix cache's counters and why planning was skipped
when it was. :meth:`AcceleratedRun.save` writes it atomically; :func:`load_run_results` reads and
validates a file (a newer schema version is refused with the version it found).

The models are plain dataclasses, so a run that writes its results never imports pydantic (its
import and first model cost a script that plans nothing a tenth of a second); the reader validates
them with pydantic, unknown fields refused.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codedag.errors import SchemaError

RUN_SCHEMA_VERSION = 1
RESULTS_FILE = "results.json"
_FORBID = {"extra": "forbid"}
"""pydantic's configuration of the models when a reader validates them: no unknown field."""


@dataclass
class EpochFigures:
    """One epoch of the planned DataLoader, as the script consumed it."""

    __pydantic_config__ = _FORBID

    epoch: int
    batches: int = 0
    samples: int = 0
    epoch_s: float = 0.0
    """From the iterator's creation to its end; for an epoch the script stopped reading early,
    to its last batch and the epoch's mean step after it."""
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


@dataclass
class Decision:
    """One thing the plan moved (or kept where it was), and why."""

    __pydantic_config__ = _FORBID

    what: str
    section: str
    """``calls``, ``batched``, ``cache`` or ``tables``."""
    where: str = ""
    reason: str = ""


@dataclass
class AcceleratedRun:
    """Everything one accelerated run measured and decided."""

    __pydantic_config__ = _FORBID

    schema_version: int = RUN_SCHEMA_VERSION
    codedag_version: str = ""
    command: list[str] = field(default_factory=list)
    exit_code: int | None = None
    loaders_seen: int = 0
    loaders_made: int = 1
    """DataLoader objects the planned loader's epochs ran on: more than one where the script
    made it again over the same data set and settings (one each epoch)."""
    loader_index: int | None = None
    """Which DataLoader was planned, counted from 0 in the order of first iteration."""
    dataset: str = ""
    device: str = ""
    plan_status: str = "not planned"
    """``applied``, ``nothing to apply`` (the plan changes nothing, so the loader runs as it
    is), either with `` (stored plan)``, ``skipped`` or ``not planned``."""
    plan_reason: str = ""
    """Why the plan was skipped or changes nothing; with ``applied``, why a stored plan was not
    used (``planned again: helpers changed since the stored plan``)."""
    plan_key: str = ""
    plan_path: str = ""
    trace_s: float = 0.0
    plan_s: float = 0.0
    epochs: list[EpochFigures] = field(default_factory=list)
    moved: list[Decision] = field(default_factory=list)
    kept: list[Decision] = field(default_factory=list)
    cache: dict[str, Any] = field(default_factory=dict)
    """``hits``, ``stored``, ``not_stored_later``, ``hit_rate``, ``hit_bytes`` and ``bytes`` of
    the prefix cache."""

    def save(self, folder: str | os.PathLike[str], name: str = RESULTS_FILE) -> Path:
        """Write ``results.json`` (or ``name``) into ``folder`` (created) atomically; return its
        path."""
        from codedag.util.io import atomic_write_text

        path = Path(folder) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(_finite(dataclasses.asdict(self)), indent=2, ensure_ascii=False)
        atomic_write_text(path, text + "\n")
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
    return run_results_of(data, target)


def is_run_results(data: Any) -> bool:
    """Whether parsed JSON looks like an accelerated run's results (a plan status, no modes: an
    experiment's results have modes), before it is validated."""
    return isinstance(data, dict) and "plan_status" in data and "modes" not in data


def run_results_of(data: Any, target: Path) -> AcceleratedRun:
    """Validate parsed JSON read from ``target`` as :class:`AcceleratedRun`.

    Raises:
        SchemaError: not this model, or a schema version newer than this codedag's.
    """
    version = data.get("schema_version") if isinstance(data, dict) else None
    if not isinstance(version, int) or version > RUN_SCHEMA_VERSION:
        raise SchemaError(
            f"{target}: schema_version {version!r}; expected an integer <= {RUN_SCHEMA_VERSION}"
        )
    from pydantic import TypeAdapter, ValidationError

    try:
        return TypeAdapter(AcceleratedRun).validate_python(data)
    except ValidationError as error:
        raise SchemaError(f"{target}: not an accelerated run's results: {error}") from None


def _finite(value: Any) -> Any:
    """``value`` with every NaN or infinity replaced by None (JSON has neither)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value
