"""Compare the modes of one results file: timing, data-wait share, throughput, speedup, metrics.

Times, shares and throughput are the steady state: the first ``warmup_batches`` steps of each
mode (start-up: workers, caches, kernel selection) are left out, and ``warmup_batches`` says how
many. Speedup is the baseline's median *step* time (data wait + batch time) over the mode's:
moving preprocessing to the GPU shortens the wait for data, which the batch time alone never
shows. Its spread is the half-width of a 95 % interval from the steps' quartiles, and
``difference`` judges it by the one rule of :mod:`codedag.measure` (``faster``, ``slower``, or
``no difference`` when the ratio lies within the spread). ``batch_speedup`` is the ratio of mean
batch times alone, for the compute part. Files without a steady-state summary (older ones) give
the figures over every step, without a spread.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from codedag.errors import ConfigError
from codedag.measure import Timing, Verdict, compare

DIFFERENCE = {Verdict.FASTER: "faster", Verdict.SLOWER: "slower", Verdict.TIE: "no difference"}


@dataclass(frozen=True)
class StepRatio:
    """The reference's median step time over a mode's, with its spread and the verdict.

    Attributes:
        speedup: reference median / mode median (above 1: the mode is faster).
        spread: half-width of the 95 % interval of ``speedup`` (the saving's interval over the
            mode's median), so ``no difference`` is exactly an interval that holds 1.
        difference: ``faster``, ``slower`` or ``no difference``.
    """

    speedup: float
    spread: float
    difference: str

    def describe(self) -> str:
        """``1.31x ± 0.04 faster``, or ``no difference (1.02x ± 0.06)``."""
        text = f"{self.speedup:.2f}x ± {self.spread:.2f}"
        return f"no difference ({text})" if self.difference == "no difference" else (
            f"{text} {self.difference}"
        )  # fmt: skip


def _timing(steady: object) -> Timing | None:
    step = steady.get("step_time") if isinstance(steady, dict) else None
    count = steady.get("num_batches") if isinstance(steady, dict) else None
    if not isinstance(step, dict) or not isinstance(count, int) or count < 1:
        return None
    quartiles = [step.get(k) for k in ("p25", "p50", "p75")]
    if not all(isinstance(q, int | float) and math.isfinite(q) for q in quartiles):
        return None
    q25, q50, q75 = (round(float(q) * 1e9) for q in quartiles)  # type: ignore[arg-type]
    return Timing(q50, q25, q75, count)


def step_ratio(reference: dict[str, Any], mode: dict[str, Any]) -> StepRatio | None:
    """The speedup of ``mode`` over ``reference`` (two summaries), ``None`` without steady
    figures in both."""
    a, b = _timing(reference.get("steady")), _timing(mode.get("steady"))
    if a is None or b is None or a.median_ns <= 0 or b.median_ns <= 0:
        return None
    judged = compare(a, b)
    # a / b ± s / b: "no difference" exactly when the ratio's interval holds 1
    return StepRatio(judged.speedup, judged.spread_ns / b.median_ns, DIFFERENCE[judged.verdict])


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


def _get(d: object, *keys: str) -> Any:
    for key in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(key)
    return d


def _num(d: object, *keys: str) -> float | None:
    """The number at ``keys`` (int or finite float; not bool), else None."""
    value = _get(d, *keys)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _ratio(num: object, den: object) -> float | None:
    if isinstance(num, int | float) and isinstance(den, int | float) and den > 0:
        return float(num) / float(den)
    return None


def _delta(value: object, ref: object) -> float | None:
    if isinstance(value, int | float) and isinstance(ref, int | float):
        return float(value) - float(ref)
    return None


def compare_modes(results: dict[str, Any], baseline: str | None = None) -> list[dict[str, Any]]:
    """One row per mode (times in seconds, shares in percent, ratios plain).

    Keys: mode, status, num_batches, warmup_batches, steady_batches, total_time_s, batch_mean_s,
    batch_std_s, batch_p50_s, batch_p95_s, data_wait_mean_s, data_wait_share_pct, step_mean_s,
    step_std_s, step_p50_s, batches_per_s, samples_per_s, speedup, speedup_spread, difference,
    batch_speedup, final_loss, loss_delta, final_accuracy, accuracy_delta, is_baseline. Figures
    are the steady state where the file has it (see the module docstring); ``None`` marks what
    the file does not contain.
    """
    ref_name = pick_baseline(results, baseline)
    modes = results.get("modes", {})
    ref = _get(modes, ref_name, "summary") if ref_name else None
    ref_steady = _get(ref, "steady") or ref
    rows = []
    for name, mode in modes.items():
        s = mode.get("summary", {}) if isinstance(mode, dict) else {}
        steady = _get(s, "steady")
        f = steady if isinstance(steady, dict) else s  # where the figures come from
        batches = _num(s, "num_batches")
        row: dict[str, Any] = {
            "mode": str(name),
            "status": str(mode.get("status", "completed")) if isinstance(mode, dict) else "?",
            "num_batches": int(batches) if batches is not None else None,
            "warmup_batches": int(_num(f, "warmup_batches") or 0),
            "steady_batches": int(_num(f, "num_batches") or 0) if f is steady else None,
            "total_time_s": _num(s, "total_time"),
            "batch_mean_s": _num(f, "batch_time", "mean"),
            "batch_std_s": _num(f, "batch_time", "std"),
            "batch_p50_s": _num(f, "batch_time", "p50"),
            "batch_p95_s": _num(f, "batch_time", "p95"),
            "data_wait_mean_s": _num(f, "data_wait", "mean"),
            "data_wait_share_pct": _num(f, "data_wait", "share_pct"),
            "step_mean_s": _num(f, "step_time", "mean"),
            "step_std_s": _num(f, "step_time", "std"),
            "step_p50_s": _num(f, "step_time", "p50"),
            "batches_per_s": _num(f, "throughput", "batches_per_s"),
            "samples_per_s": _num(f, "throughput", "samples_per_s"),
            "final_loss": _num(s, "loss", "final"),
            "final_accuracy": _num(s, "accuracy", "final"),
            "is_baseline": name == ref_name,
        }
        ratio = step_ratio(ref, s) if isinstance(ref, dict) and isinstance(s, dict) else None
        if ratio is not None:
            row["speedup"], row["speedup_spread"] = ratio.speedup, ratio.spread
            row["difference"] = ratio.difference
        else:  # no steady figures: mean step times, without a spread
            row["speedup"] = _ratio(_num(ref_steady, "step_time", "mean"), row["step_mean_s"])
            row["speedup_spread"] = row["difference"] = None
        row["batch_speedup"] = _ratio(_num(ref_steady, "batch_time", "mean"), row["batch_mean_s"])
        row["loss_delta"] = _delta(row["final_loss"], _num(ref, "loss", "final"))
        row["accuracy_delta"] = _delta(row["final_accuracy"], _num(ref, "accuracy", "final"))
        rows.append(row)
    return rows
