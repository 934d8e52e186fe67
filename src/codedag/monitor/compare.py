"""Compare the modes of one results file: timing, data-wait share, throughput, speedup, metrics.

Speedup is the baseline's mean *step* time (data wait + batch time) over the mode's: moving
preprocessing to the GPU shortens the wait for data, which the batch time alone never shows.
``batch_speedup`` is the ratio of mean batch times alone, for the compute part.
"""

from __future__ import annotations

import math
from typing import Any

from codedag.errors import ConfigError


def pick_baseline(results: dict[str, Any], baseline: str | None = None) -> str | None:
    """The reference mode: ``baseline`` if given, else one named "baseline", else the first."""
    modes = list(results.get("modes", {}))
    if baseline is not None:
        if baseline not in modes:
            raise ConfigError(f"baseline mode {baseline!r} not in the results; modes: {modes}")
        return baseline
    if "baseline" in modes:
        return "baseline"
    return modes[0] if modes else None


def _get(d: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(key)
    return d


def _num(d: Any, *keys: str) -> float | None:
    """The number at ``keys`` (int or finite float; not bool), else None."""
    value = _get(d, *keys)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _ratio(num: Any, den: Any) -> float | None:
    if isinstance(num, int | float) and isinstance(den, int | float) and den > 0:
        return float(num) / float(den)
    return None


def _delta(value: Any, ref: Any) -> float | None:
    if isinstance(value, int | float) and isinstance(ref, int | float):
        return float(value) - float(ref)
    return None


def compare_modes(results: dict[str, Any], baseline: str | None = None) -> list[dict[str, Any]]:
    """One row per mode (times in seconds, shares in percent, ratios plain).

    Keys: mode, status, num_batches, total_time_s, batch_mean_s, batch_std_s, batch_p50_s,
    batch_p95_s, data_wait_mean_s, data_wait_share_pct, step_mean_s, batches_per_s,
    samples_per_s, speedup, batch_speedup, final_loss, loss_delta, final_accuracy,
    accuracy_delta, is_baseline. ``None`` marks what the file does not contain.
    """
    ref_name = pick_baseline(results, baseline)
    modes = results.get("modes", {})
    ref = _get(modes, ref_name, "summary") if ref_name else None
    rows = []
    for name, mode in modes.items():
        s = mode.get("summary", {}) if isinstance(mode, dict) else {}
        batches = _num(s, "num_batches")
        row: dict[str, Any] = {
            "mode": str(name),
            "status": str(mode.get("status", "completed")) if isinstance(mode, dict) else "?",
            "num_batches": int(batches) if batches is not None else None,
            "total_time_s": _num(s, "total_time"),
            "batch_mean_s": _num(s, "batch_time", "mean"),
            "batch_std_s": _num(s, "batch_time", "std"),
            "batch_p50_s": _num(s, "batch_time", "p50"),
            "batch_p95_s": _num(s, "batch_time", "p95"),
            "data_wait_mean_s": _num(s, "data_wait", "mean"),
            "data_wait_share_pct": _num(s, "data_wait", "share_pct"),
            "step_mean_s": _num(s, "step_time", "mean"),
            "batches_per_s": _num(s, "throughput", "batches_per_s"),
            "samples_per_s": _num(s, "throughput", "samples_per_s"),
            "final_loss": _num(s, "loss", "final"),
            "final_accuracy": _num(s, "accuracy", "final"),
            "is_baseline": name == ref_name,
        }
        row["speedup"] = _ratio(_num(ref, "step_time", "mean"), row["step_mean_s"])
        row["batch_speedup"] = _ratio(_num(ref, "batch_time", "mean"), row["batch_mean_s"])
        row["loss_delta"] = _delta(row["final_loss"], _num(ref, "loss", "final"))
        row["accuracy_delta"] = _delta(row["final_accuracy"], _num(ref, "accuracy", "final"))
        rows.append(row)
    return rows
