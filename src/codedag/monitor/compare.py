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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from codedag.errors import ConfigError
from codedag.measure import Timing, Verdict, compare
from codedag.monitor.model import ModeResults, ModeSummary, RunResults, SteadySummary
from codedag.monitor.results import load_results

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


def _timing(steady: SteadySummary | None) -> Timing | None:
    if steady is None or steady.step_time is None or steady.num_batches < 1:
        return None
    quartiles = [
        _finite(q) for q in (steady.step_time.p25, steady.step_time.p50, steady.step_time.p75)
    ]
    if any(q is None for q in quartiles):
        return None
    q25, q50, q75 = (round(q * 1e9) for q in quartiles if q is not None)
    return Timing(q50, q25, q75, steady.num_batches)


def step_ratio(reference: ModeSummary, mode: ModeSummary) -> StepRatio | None:
    """The speedup of ``mode`` over ``reference`` (two summaries), ``None`` without steady
    figures in both."""
    a, b = _timing(reference.steady), _timing(mode.steady)
    if a is None or b is None or a.median_ns <= 0 or b.median_ns <= 0:
        return None
    judged = compare(a, b)
    # a / b ± s / b: "no difference" exactly when the ratio's interval holds 1
    return StepRatio(judged.speedup, judged.spread_ns / b.median_ns, DIFFERENCE[judged.verdict])


def pick_baseline(modes: Iterable[str], baseline: str | None = None) -> str | None:
    """The reference mode among ``modes``: ``baseline`` if given, else one named "baseline",
    else the first.

    Raises:
        ConfigError: ``baseline`` is not one of ``modes``.
    """
    names = list(modes)
    if baseline is not None:
        if baseline not in names:
            raise ConfigError(f"baseline mode {baseline!r} not in the results; modes: {names}")
        return baseline
    if "baseline" in names:
        return "baseline"
    return names[0] if names else None


def _finite(value: object) -> float | None:
    """The number (int or finite float; not bool), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num is not None and den is not None and den > 0 else None


def _delta(value: float | None, ref: float | None) -> float | None:
    return value - ref if value is not None and ref is not None else None


def _figures(summary: ModeSummary) -> SteadySummary | ModeSummary:
    """Where a mode's figures come from: the steady state where the file has it."""
    return summary.steady if summary.steady is not None else summary


def _row(name: str, mode: ModeResults, ref: ModeSummary | None) -> dict[str, Any]:
    s = mode.summary
    f = _figures(s)
    batch, wait, step, rate = f.batch_time, f.data_wait, f.step_time, f.throughput
    row: dict[str, Any] = {
        "mode": name,
        "status": mode.status,
        "num_batches": s.num_batches,
        "warmup_batches": f.warmup_batches if isinstance(f, SteadySummary) else 0,
        "steady_batches": f.num_batches if isinstance(f, SteadySummary) else None,
        "total_time_s": _finite(s.total_time),
        "batch_mean_s": None if batch is None else _finite(batch.mean),
        "batch_std_s": None if batch is None else _finite(batch.std),
        "batch_p50_s": None if batch is None else _finite(batch.p50),
        "batch_p95_s": None if batch is None else _finite(batch.p95),
        "data_wait_mean_s": None if wait is None else _finite(wait.mean),
        "data_wait_share_pct": None if wait is None else _finite(wait.share_pct),
        "step_mean_s": None if step is None else _finite(step.mean),
        "step_std_s": None if step is None else _finite(step.std),
        "step_p50_s": None if step is None else _finite(step.p50),
        "batches_per_s": None if rate is None else _finite(rate.batches_per_s),
        "samples_per_s": None if rate is None else _finite(rate.samples_per_s),
        "final_loss": None if s.loss is None else _finite(s.loss.final),
        "final_accuracy": None if s.accuracy is None else _finite(s.accuracy.final),
    }
    ratio = None if ref is None else step_ratio(ref, s)
    if ratio is not None:
        row["speedup"], row["speedup_spread"] = ratio.speedup, ratio.spread
        row["difference"] = ratio.difference
    else:  # no steady figures: mean step times, without a spread
        ref_step = None if ref is None else _figures(ref).step_time
        ref_mean = None if ref_step is None else _finite(ref_step.mean)
        row["speedup"] = _ratio(ref_mean, row["step_mean_s"])
        row["speedup_spread"] = row["difference"] = None
    ref_batch = None if ref is None else _figures(ref).batch_time
    row["batch_speedup"] = _ratio(
        None if ref_batch is None else _finite(ref_batch.mean), row["batch_mean_s"]
    )
    ref_loss = None if ref is None or ref.loss is None else _finite(ref.loss.final)
    ref_acc = None if ref is None or ref.accuracy is None else _finite(ref.accuracy.final)
    row["loss_delta"] = _delta(row["final_loss"], ref_loss)
    row["accuracy_delta"] = _delta(row["final_accuracy"], ref_acc)
    return row


def compare_modes(
    results: RunResults | Mapping[str, Any], baseline: str | None = None
) -> list[dict[str, Any]]:
    """One row per mode (times in seconds, shares in percent, ratios plain).

    ``results`` is the model or its JSON dict (checked and upgraded as a file is). Keys: mode,
    status, num_batches, warmup_batches, steady_batches, total_time_s, batch_mean_s,
    batch_std_s, batch_p50_s, batch_p95_s, data_wait_mean_s, data_wait_share_pct, step_mean_s,
    step_std_s, step_p50_s, batches_per_s, samples_per_s, speedup, speedup_spread, difference,
    batch_speedup, final_loss, loss_delta, final_accuracy, accuracy_delta, is_baseline. Figures
    are the steady state where the file has it (see the module docstring); ``None`` marks what
    the file does not contain.
    """
    run = load_results(results)
    ref_name = pick_baseline(run.modes, baseline)
    ref = run.modes[ref_name].summary if ref_name is not None else None
    rows = []
    for name, mode in run.modes.items():
        row = _row(name, mode, ref)
        row["is_baseline"] = name == ref_name
        rows.append(row)
    return rows
