"""The run-time check of batched chains: the first batches both ways, inside the loader.

A plan places a chain for batched execution from a calibration that replays the chain's calls
on one batch in the main process. Inside the DataLoader the batched path costs more than that
replay: recording in ``__getitem__``, collating deferred samples, copying the batch back. On
a GPU it once chose batched for a pipeline that then loaded 0.84x as fast. So, where the plan
chose (``mode: auto``; ``always`` is the user's choice and is not checked), the first batches
are delivered in alternating blocks, batched and per sample, and the interval between the
training loop's batches is timed in each block (what the loop waits for, its own step
included, the same for both).

A block is longer than what the loader holds in flight (workers x ``prefetch_factor``): a batch
keeps the mode it was fetched with, so each delivered batch is classed by its own mode, and an
interval is counted only between two batches of the same mode, not right after a change of mode,
and not across iterators (a new epoch's workers start). Once both modes have :data:`INTERVALS`
intervals (or after :data:`MAX_BLOCKS` blocks), batched execution is kept only where its median
interval is shorter than per-sample's beyond the spread of the difference (the rule of
:func:`codedag.measure.statistic.compare`); otherwise it stops, for good, with the reason.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from codedag.measure.statistic import compare
from codedag.measure.summary import Timing

INTERVALS = 6
"""Intervals of each mode the decision needs."""
MAX_BLOCKS = 8
"""Blocks after which the check decides with what it has (too few intervals: it stops)."""
MIN_BLOCK = 4
"""Delivered batches per block at least."""


@dataclass
class RunCheck:
    """Alternating blocks of batched and per-sample batches, and the decision (see the module
    docstring).

    Args:
        clock_ns: the clock; tests inject a fake one.
    """

    clock_ns: Callable[[], int] = time.perf_counter_ns
    intervals: dict[str, list[float]] = field(
        default_factory=lambda: {"batched": [], "per_sample": []}
    )
    block: int = 0
    delivered: int = 0
    decided: bool | None = None
    reason: str = ""
    _iterator: Any = None
    _previous: tuple[int, bool] | None = None  # time and mode of the last delivered batch
    _settling: bool = False

    @property
    def checking(self) -> bool:
        """Whether the check still runs."""
        return self.decided is None

    def begin(self, iterator: Any) -> None:
        """A ``__next__`` of ``iterator`` starts (its first sets the block length)."""
        if iterator is not self._iterator:
            self._iterator = iterator
            self._previous = None
            if not self.block:
                inflight = getattr(iterator, "_num_workers", 0) * (
                    getattr(iterator, "_prefetch_factor", None) or 2
                )
                self.block = max(MIN_BLOCK, inflight + 2)

    @property
    def _length(self) -> int:
        """Delivered batches per block (before the first iterator is seen: the least)."""
        return self.block or MIN_BLOCK

    def batched_now(self) -> bool:
        """Whether batches fetched from now on should be batched (the block's mode)."""
        return (self.delivered // self._length) % 2 == 0

    def deliver(self, batched: bool) -> None:
        """A batch of that mode reached the training loop."""
        now = self.clock_ns()
        previous, self._previous = self._previous, (now, batched)
        self.delivered += 1
        if previous is None or previous[1] != batched:
            self._settling = True  # a change of mode: the next interval is still mixed
        elif self._settling:
            self._settling = False
        else:
            mode = "batched" if batched else "per_sample"
            self.intervals[mode].append((now - previous[0]) / 1e9)
        self._decide_if_done()

    def _decide_if_done(self) -> None:
        batched, per_sample = self.intervals["batched"], self.intervals["per_sample"]
        enough = len(batched) >= INTERVALS and len(per_sample) >= INTERVALS
        if not enough and self.delivered < MAX_BLOCKS * self._length:
            return
        if min(len(batched), len(per_sample)) < 2:
            self.decided = False
            self.reason = (
                f"{self.delivered} batches gave {len(batched)} batched and {len(per_sample)} "
                "per-sample intervals: too few to show batched execution faster"
            )
            return
        judged = compare(Timing.of_seconds(per_sample), Timing.of_seconds(batched))
        figures = (
            f"{judged.b.median_ns / 1e6:.1f} ms per batch batched against "
            f"{judged.a.median_ns / 1e6:.1f} ms per sample (medians of {len(batched)} and "
            f"{len(per_sample)} intervals, spread {judged.spread_ns / 1e6:.1f} ms)"
        )
        self.decided = judged.b_faster
        if self.decided:
            self.reason = f"kept: {figures}"
        else:
            self.reason = f"not faster in the loader: {figures}"

    def summary(self) -> dict[str, Any]:
        """What ``get_stats()["batched"]["check"]`` shows."""
        state = "checking" if self.decided is None else "kept" if self.decided else "stopped"
        return {
            "state": state,
            "delivered": self.delivered,
            "block": self.block,
            "batched_intervals": len(self.intervals["batched"]),
            "per_sample_intervals": len(self.intervals["per_sample"]),
            "reason": self.reason,
        }
