"""The figures of a mode's recorded steps, streamed in constant memory: moments and quantiles of
the batch times, data waits and step times, the plots' downsampled series, the samples counted,
and the warm-up steps the ``steady`` summary leaves out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from codedag.monitor.records import StepRecord
from codedag.monitor.stats import Downsampler, LogHistogram, RunningStats


def _per_second(count: float, seconds: float) -> float:
    return count / seconds if seconds > 0 else 0.0


def _share_pct(part: float, whole: float) -> float:
    return 100.0 * part / whole if whole > 0 else 0.0


class StepFigures:
    """Statistics of the steps a :class:`~codedag.monitor.timer.Timer` recorded.

    Args:
        warmup_batches: first steps left out of the ``steady`` summary.
        downsample_capacity: most points of the series kept in memory.
    """

    def __init__(self, warmup_batches: int, downsample_capacity: int) -> None:
        self.warmup_batches = warmup_batches
        self.batch_stats = RunningStats()
        self.wait_stats = RunningStats()
        self.step_stats = RunningStats()
        self.batch_hist = LogHistogram()
        self.wait_hist = LogHistogram()
        self.step_hist = LogHistogram()
        self.series = Downsampler(downsample_capacity, width=2)
        self.samples = 0
        self.warmup: list[StepRecord] = []  # the first warmup_batches steps, taken out later

    def add(
        self,
        records: list[StepRecord],
        idxs: Sequence[int],
        batch: Sequence[float],
        wait: Sequence[float],
        samples: Sequence[int],
    ) -> None:
        """Take in a block of steps: their records and, column by column, their figures."""
        step = [b + w for b, w in zip(batch, wait)]
        self.batch_stats.add_many(batch)
        self.batch_hist.add_many(batch)
        self.wait_stats.add_many(wait)
        self.wait_hist.add_many(wait)
        self.step_stats.add_many(step)
        self.step_hist.add_many(step)
        self.series.add_many(idxs, batch, wait)
        self.samples += sum(samples)
        if len(self.warmup) < self.warmup_batches:
            self.warmup.extend(r for r in records if r.step < self.warmup_batches)

    def summary(self) -> dict[str, Any]:
        """Batch time, data wait, step time and throughput of every step (seconds, percent)."""
        b, w, s = self.batch_stats, self.wait_stats, self.step_stats
        batch = {k: v for k, v in b.to_dict().items() if k not in ("count", "sum")}
        batch.update(p50=self.batch_hist.quantile(0.5), p95=self.batch_hist.quantile(0.95))
        active = s.total
        wait = {k: v for k, v in w.to_dict().items() if k not in ("count", "sum")}
        wait.update(
            p50=self.wait_hist.quantile(0.5),
            p95=self.wait_hist.quantile(0.95),
            total=w.total,
            share_pct=_share_pct(w.total, active),
        )
        return {
            "num_batches": b.count,
            "batch_time": batch,
            "data_wait": wait,
            "step_time": {"mean": s.mean if s.count else 0.0, "std": s.std, "total": active},
            "throughput": self._throughput(b.count, self.samples, active),
        }

    def steady(self) -> dict[str, Any]:
        """The steps after the first ``warmup_batches``: counts, means, spread (quartiles of the
        step time) and throughput (seconds, percent)."""
        warm = self.warmup
        batch_w = [r.batch_time_s for r in warm]
        wait_w = [r.data_wait_s for r in warm]
        step_w = [r.batch_time_s + r.data_wait_s for r in warm]
        step = self.step_stats.without(step_w)
        batch = self.batch_stats.without(batch_w)
        wait = self.wait_stats.without(wait_w)
        q = self.step_hist.without(step_w).quantile
        batch_q = self.batch_hist.without(batch_w).quantile
        samples = self.samples - sum(r.samples for r in warm)
        active = step.total if step.count else 0.0
        return {
            "warmup_batches": self.warmup_batches,
            "num_batches": step.count,
            "step_time": {
                "mean": step.mean,
                "std": step.std,
                **{f"p{round(p * 100)}": q(p) for p in (0.25, 0.5, 0.75, 0.95)},
            },
            "batch_time": {
                "mean": batch.mean,
                "std": batch.std,
                "p50": batch_q(0.5),
                "p95": batch_q(0.95),
            },
            "data_wait": {"mean": wait.mean, "share_pct": _share_pct(wait.total, active)},
            "throughput": self._throughput(step.count, samples, active),
        }

    @staticmethod
    def _throughput(batches: int, samples: int, active: float) -> dict[str, float | None]:
        return {
            "batches_per_s": _per_second(batches, active),
            "samples_per_s": samples / active if active > 0 and samples else None,
        }
