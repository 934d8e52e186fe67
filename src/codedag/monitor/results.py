"""The results JSON: each mode's batch times, data wait, resources and metrics; the environment.

Layout (``SCHEMA_VERSION = 1``; every key of version 0, which had no version, is kept with its
meaning)::

    {"schema_version": 1, "codedag_version": "0.1.0",
     "experiment_name": str, "timestamp": int (epoch s), "datetime": ISO 8601,
     "environment": {host, python, torch, cuda, gpus, cpu_capacity_cpus, memory_limit_mb, ...},
     "modes": {name: {
        "config": {...}, "status": "running|completed|interrupted|failed", "error": str|null,
        "started_at": epoch s, "ended_at": epoch s|null,
        "batch_times": [[batch, s]], "data_wait_times": [[batch, s]],
        "resource_usage": {"cpu_usage": [[ts, pct]], "memory_usage": [[ts, pct]],
                           "gpu_usage": {"0": [[ts, pct]]}, "gpu_memory": {"0": [[ts, MB]]},
                           "gpu_power_w": {...}, "gpu_temperature_c": {...},
                           "process_cpu_usage": [[ts, pct]], "process_memory_mb": [[ts, MB]], ...},
        "metrics": {"losses": [[epoch, batch, v]], "accuracies": [[epoch, batch, v]]},
        "summary": {"total_time", "num_batches",
                    "batch_time": {mean, std, min, max, p50, p95},
                    "data_wait": {mean, std, min, max, p50, p95, total, share_pct},
                    "step_time", "throughput": {batches_per_s, samples_per_s},
                    "loss": {initial, final, min, max}, "accuracy": {initial, final, best},
                    "resources": {...}, "timing": {...}},
        "downsampling": {"batch_times": stride, "losses": stride, ...},
        "files": {"batches": "baseline.batches.csv", ...}}}}

Series longer than the in-memory capacity are bucket means with the stride in ``downsampling``;
the CSV files named in ``files`` hold every raw row. Files without ``schema_version`` (the original
format) load with defaults, and their summaries are recomputed from the series.

:func:`load_results` checks a file against this layout (every problem named by its path), fills
what older files lack (:func:`upgrade_results`) and returns the model of the file,
:class:`~codedag.monitor.model.RunResults`, which writer and readers share.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from codedag.errors import SchemaError
from codedag.monitor.model import ModeResults, RunResults

SCHEMA_VERSION = 1


def _quantile(ordered: list[float], p: float) -> float:
    """Nearest-rank quantile of sorted values (0 when empty)."""
    return ordered[max(0, math.ceil(p * len(ordered)) - 1)] if ordered else 0.0


def _stats(values: list[float]) -> dict[str, float]:
    """Exact mean/std/min/max/p50/p95 of a list (nearest-rank quantiles); zeros when empty."""
    if not values:
        return {"mean": 0.0, "std": 0.0, "min": 0.0, "max": 0.0, "p50": 0.0, "p95": 0.0}
    n = len(values)
    mean = sum(values) / n
    ordered = sorted(values)
    return {
        "mean": mean,
        "std": math.sqrt(sum((v - mean) ** 2 for v in values) / n),
        "min": ordered[0],
        "max": ordered[-1],
        "p50": _quantile(ordered, 0.5),
        "p95": _quantile(ordered, 0.95),
    }


def steady_from_series(times: list[float], waits: list[float], warmup: int = 1) -> dict[str, Any]:
    """The ``steady`` summary (that key of :meth:`codedag.monitor.timer.Timer.summary`) from raw
    per-batch series: the first ``warmup`` batches left out, exact quartiles."""
    times, waits = times[warmup:], waits[warmup:]
    steps = [t + w for t, w in zip(times, waits)]
    step = _stats(steps)
    ordered = sorted(steps)
    n = len(steps)
    active = sum(steps)
    return {
        "warmup_batches": warmup,
        "num_batches": n,
        "step_time": {
            "mean": step["mean"],
            "std": step["std"],
            "p25": _quantile(ordered, 0.25),
            "p50": step["p50"],
            "p75": _quantile(ordered, 0.75),
            "p95": step["p95"],
        },
        "batch_time": {
            k: v for k, v in _stats(times).items() if k in ("mean", "std", "p50", "p95")
        },
        "data_wait": {
            "mean": sum(waits) / n if n else 0.0,
            "share_pct": 100.0 * sum(waits) / active if active > 0 else 0.0,
        },
        "throughput": {"batches_per_s": n / active if active > 0 else 0.0, "samples_per_s": None},
    }


def summary_from_series(mode: dict[str, Any]) -> dict[str, Any]:
    """Recompute a mode's summary from its series (for files that lack parts of it).

    The ``steady`` section is recomputed only from raw series (one point per batch, with data
    waits): bucket means of a downsampled series have no quartiles of single steps.
    """
    times = [float(p[1]) for p in mode.get("batch_times", [])]
    waits = [float(p[1]) for p in mode.get("data_wait_times", [])]
    batch = _stats(times)
    out: dict[str, Any] = {"num_batches": len(times), "batch_time": batch}
    raw = (mode.get("downsampling") or {}).get("batch_times", 1) == 1
    if raw and waits and len(waits) == len(times) and len(times) > 1:
        out["steady"] = steady_from_series(times, waits)
    if waits:
        wait = _stats(waits)
        active = sum(times) + sum(waits)
        wait.update(total=sum(waits), share_pct=100.0 * sum(waits) / active if active else 0.0)
        out["data_wait"] = wait
        out["step_time"] = {"mean": active / len(times) if times else 0.0, "total": active}
    else:
        active = sum(times)
        out["data_wait"] = None  # not measured by the program that wrote the file
        out["step_time"] = {"mean": batch["mean"], "total": active}
    out["throughput"] = {
        "batches_per_s": len(times) / active if active > 0 else 0.0,
        "samples_per_s": None,
    }
    losses = [float(p[2]) for p in mode.get("metrics", {}).get("losses", [])]
    accs = [float(p[2]) for p in mode.get("metrics", {}).get("accuracies", [])]
    out["loss"] = (
        {"initial": losses[0], "final": losses[-1], "min": min(losses), "max": max(losses)}
        if losses
        else None
    )
    out["accuracy"] = {"initial": accs[0], "final": accs[-1], "best": max(accs)} if accs else None
    return out


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_series(where: str, value: object, width: int, problems: list[str]) -> None:
    if not isinstance(value, list):
        problems.append(f"{where}: expected a list, got {type(value).__name__}")
        return
    for i, point in enumerate(value):
        if (
            not isinstance(point, list | tuple)
            or len(point) != width
            or not all(_is_number(v) for v in point)
        ):
            shown = repr(point) if len(repr(point)) <= 60 else repr(point)[:57] + "..."
            problems.append(f"{where}[{i}]: expected a list of {width} numbers, got {shown}")
            return


# Summary groups and the numeric fields readers use (other keys are kept as they are).
SUMMARY_NUMBERS = ("num_batches", "total_time")
SUMMARY_GROUPS: dict[str, tuple[str, ...]] = {
    "batch_time": ("mean", "std", "min", "max", "p50", "p95"),
    "data_wait": ("mean", "std", "min", "max", "p50", "p95", "total", "share_pct"),
    "step_time": ("mean", "total"),
    "throughput": ("batches_per_s", "samples_per_s"),
    "loss": ("initial", "final", "min", "max"),
    "accuracy": ("initial", "final", "best"),
}
# Mode fields and the JSON types they may have (absent is always fine).
MODE_FIELDS: dict[str, tuple[type, ...]] = {
    "config": (dict,),
    "status": (str,),
    "error": (str, type(None)),
    "started_at": (int, float, type(None)),
    "ended_at": (int, float, type(None)),
    "summary": (dict, type(None)),
    "resources": (dict, type(None)),
    "downsampling": (dict, type(None)),
    "files": (dict, type(None)),
}
TOP_FIELDS: dict[str, tuple[type, ...]] = {
    "environment": (dict,),
    "timestamp": (int, float),
    "datetime": (str,),
}


def _check_fields(
    where: str, data: dict, fields: dict[str, tuple[type, ...]], problems: list[str]
) -> None:
    for key, kinds in fields.items():
        if key in data and (not isinstance(data[key], kinds) or isinstance(data[key], bool)):
            expected = " or ".join("null" if k is type(None) else k.__name__ for k in kinds)
            problems.append(f"{where}{key}: expected {expected}, got {type(data[key]).__name__}")


def _check_summary(where: str, summary: object, problems: list[str]) -> None:
    if not isinstance(summary, dict):
        return
    for key in SUMMARY_NUMBERS:
        if key in summary and not _is_number(summary[key]):
            problems.append(f"{where}.{key}: expected a number, got {summary[key]!r:.40}")
    for group, keys in SUMMARY_GROUPS.items():
        values = summary.get(group)
        if values is None:
            continue
        if not isinstance(values, dict):
            problems.append(f"{where}.{group}: expected an object or null")
            continue
        for key in keys:
            if values.get(key) is not None and not _is_number(values[key]):
                problems.append(
                    f"{where}.{group}.{key}: expected a number, got {values[key]!r:.40}"
                )


def validate_results(data: object) -> list[str]:
    """Every structural problem of a results dict (an empty list means it is valid)."""
    problems: list[str] = []
    if not isinstance(data, dict):
        return [f"top level: expected an object, got {type(data).__name__}"]
    if not isinstance(data.get("experiment_name"), str):
        problems.append("experiment_name: expected a string")
    _check_fields("", data, TOP_FIELDS, problems)
    modes = data.get("modes")
    if not isinstance(modes, dict):
        return [*problems, f"modes: expected an object, got {type(modes).__name__}"]
    for name, mode in modes.items():
        if not isinstance(mode, dict):
            problems.append(f"modes.{name}: expected an object")
            continue
        _check_fields(f"modes.{name}.", mode, MODE_FIELDS, problems)
        _check_summary(f"modes.{name}.summary", mode.get("summary"), problems)
        _check_series(f"modes.{name}.batch_times", mode.get("batch_times", []), 2, problems)
        _check_series(f"modes.{name}.data_wait_times", mode.get("data_wait_times", []), 2, problems)
        metrics = mode.get("metrics", {})
        if not isinstance(metrics, dict):
            problems.append(f"modes.{name}.metrics: expected an object")
        else:
            for key in ("losses", "accuracies"):
                _check_series(f"modes.{name}.metrics.{key}", metrics.get(key, []), 3, problems)
        usage = mode.get("resource_usage", {})
        if not isinstance(usage, dict):
            problems.append(f"modes.{name}.resource_usage: expected an object")
            continue
        for key, series in usage.items():
            if isinstance(series, dict):
                for device, points in series.items():
                    _check_series(
                        f"modes.{name}.resource_usage.{key}.{device}", points, 2, problems
                    )
            else:
                _check_series(f"modes.{name}.resource_usage.{key}", series, 2, problems)
    return problems


def upgrade_results(data: dict[str, Any]) -> dict[str, Any]:
    """Fill what older files lack (defaults, recomputed summaries); returns a new dict."""
    out = dict(data)
    version = out.get("schema_version", 0)
    out["schema_version"] = SCHEMA_VERSION
    out.setdefault("environment", {})
    out.setdefault("timestamp", 0)
    out.setdefault("datetime", "")
    modes: dict[str, Any] = {}
    for name, mode in out["modes"].items():
        m = dict(mode)
        m.setdefault("config", {})
        m.setdefault("status", "completed")
        m.setdefault("error", None)
        m.setdefault("batch_times", [])
        m.setdefault("data_wait_times", [])
        m.setdefault("downsampling", {})
        m.setdefault("files", {})
        usage = dict(m.get("resource_usage") or {})
        for key in ("cpu_usage", "memory_usage"):
            usage.setdefault(key, [])
        for key in ("gpu_usage", "gpu_memory"):
            usage.setdefault(key, {})
        m["resource_usage"] = usage
        metrics = dict(m.get("metrics") or {})
        metrics.setdefault("losses", [])
        metrics.setdefault("accuracies", [])
        m["metrics"] = metrics
        recomputed = summary_from_series(m)
        summary = dict(m.get("summary") or {})
        if version < 1 and isinstance(summary.get("batch_time"), dict):
            # keep the writer's mean/std (over every batch) and add the missing quantiles
            summary["batch_time"] = {**recomputed["batch_time"], **summary["batch_time"]}
        for key, value in recomputed.items():
            summary.setdefault(key, value)
        step = summary.get("step_time") or {}
        summary.setdefault("total_time", step.get("total", recomputed["step_time"]["total"]))
        m["summary"] = summary
        modes[str(name)] = m
    out["modes"] = modes
    return out


def check_version(version: object, where: str) -> None:
    """Accept 0 (the first format, also when the key is absent) up to :data:`SCHEMA_VERSION`.

    Raises:
        SchemaError: not a whole number, negative, or written by a newer codedag.
    """
    if type(version) is not int:
        raise SchemaError(f"{where}: schema_version must be a whole number, got {version!r}")
    if version < 0:
        raise SchemaError(
            f"{where}: schema_version {version} was never written by codedag "
            f"(expected 0 to {SCHEMA_VERSION})"
        )
    if version > SCHEMA_VERSION:
        raise SchemaError(
            f"{where}: schema_version {version} is newer than this codedag reads "
            f"(<= {SCHEMA_VERSION}); upgrade codedag"
        )


def load_results(
    source: str | os.PathLike[str] | Mapping[str, Any] | RunResults,
) -> RunResults:
    """Load, validate and upgrade a results file (or its dict) into the model.

    A :class:`RunResults` is returned as it is. ``load_results(...).to_dict()`` is the upgraded
    JSON form.

    Raises:
        SchemaError: unreadable JSON, a structural problem (all are listed), or a
            ``schema_version`` that is not 0 to ``SCHEMA_VERSION`` (newer files need a newer
            codedag).
    """
    if isinstance(source, RunResults):
        return source
    if isinstance(source, Mapping):
        data: Any = dict(source)
        where = "results"
    else:
        from codedag.util.io import read_json

        where = f"results file {source}"
        data = read_json(source, "results file", expect=dict)
    if isinstance(data, dict):
        check_version(data.get("schema_version", 0), where)
    problems = validate_results(data)
    if problems:
        raise SchemaError(f"{where}: not a codedag results file: " + "; ".join(problems[:10]))
    try:
        return RunResults.model_validate(upgrade_results(data))
    except ValidationError as error:
        problems = _model_problems(error)
        raise SchemaError(
            f"{where}: not a codedag results file: " + "; ".join(problems[:10])
        ) from None


_EXPECTED = {
    "int_type": "a whole number",
    "float_type": "a number",
    "string_type": "a string",
    "dict_type": "an object",
    "model_type": "an object",
    "list_type": "a list",
}


def _model_problems(error: ValidationError) -> list[str]:
    """The model's complaints in the words of :func:`validate_results` (one per field)."""
    found: dict[str, str] = {}
    for problem in error.errors(include_url=False):
        loc = list(problem["loc"])
        kind = problem["type"]
        if loc and loc[-1] in ("int", "float"):  # a member of ``int | float``: one number
            loc.pop()
            kind = "float_type"
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")
        expected = _EXPECTED.get(kind)
        got = type(problem.get("input")).__name__
        found.setdefault(
            where,
            f"{where}: expected {expected}, got {got}"
            if expected
            else f"{where}: {problem['msg']}",
        )
    return list(found.values())


def merge_results(
    runs: Sequence[RunResults | Mapping[str, Any]], labels: list[str] | None = None
) -> RunResults:
    """Combine the modes of several loaded runs into one, for comparing separate processes.

    A mode name seen in an earlier run gets ``@label`` appended (the label defaults to the run's
    experiment name), so nothing is dropped. The first run provides the top-level fields.

    Raises:
        SchemaError: when ``runs`` is empty, or a run is not valid results.
    """
    if not runs:
        raise SchemaError("expected at least one results file to merge, got none")
    loaded = [load_results(run) for run in runs]
    modes: dict[str, ModeResults] = {}
    for index, run in enumerate(loaded):
        label = labels[index] if labels else run.experiment_name
        for name, mode in run.modes.items():
            modes[name if name not in modes else f"{name}@{label}"] = mode
    unique = list(dict.fromkeys(run.experiment_name for run in loaded))
    name = unique[0] if len(unique) == 1 else " + ".join(unique)
    return loaded[0].model_copy(update={"modes": modes, "experiment_name": name})
