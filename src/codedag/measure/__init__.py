"""One protocol for timing A against B, and the one statistic its results are judged by.

**Protocol** (:mod:`.pair`). A (the reference: the original library call, your DataLoader
settings) and B (the candidate: the torch backend, a batched chain, tuned settings) run in
interleaved rounds, A first on even rounds and B first on odd ones (A B, B A, A B, ...), after
untimed warm-up rounds. Each call is timed by a :class:`~.clock.Stopwatch` between two calls of
an injected device synchronization (none by default; the caller passes its device's), on an
injected clock. Calls are measured with the torch thread count they will run with
(:func:`~.threads.torch_threads`: one inside DataLoader workers).

**Statistic** (:mod:`.statistic`). Each way's samples are summarized by their median and
quartiles (:class:`~.summary.Timing`); B's saving is ``median(A) - median(B)``, and its spread the
half-width of a 95 % interval: Student's t (Welch-Satterthwaite degrees of freedom) times the
standard error of the difference, each median's standard error estimated from its interquartile
range (``1.2533 * IQR / 1.349 / sqrt(n)``). Medians, because one disturbed sample must not move
a figure.

**Rule** (:func:`~.statistic.verdict`). B is *faster* only when its saving exceeds both the
spread and the margin (the smallest gain worth a change, a fraction of A's median); *slower*
when its loss exceeds the spread; otherwise a *tie*, and a tie keeps A. Every decision that
compares two timings uses it: calibration's adaptive stop, placement of calls and batched chains,
the run-time guard, and the DataLoader tuner's early stop, choice and confirmation.

**Interference** (:mod:`.interference`). A measurement whose repeated identical samples spread
widely, or whose calling thread got little CPU time, says so in its result.

**Launches** (:mod:`.launches`). What a piece of torch code asks of a device: its aten ops and the
data-dependent host synchronizations among them, counted while it runs.

This package imports nothing of codedag but :mod:`codedag.errors` and :mod:`codedag.util`, and
torch only inside :func:`~.threads.torch_threads` and in :mod:`.launches` (imported by name).
"""

from __future__ import annotations

from codedag.measure.clock import Clock, Stopwatch, Sync, Timed, no_sync
from codedag.measure.interference import (
    MIN_CPU_SHARE,
    NOISY_SPREAD,
    Interference,
    detect,
    spread_reason,
)
from codedag.measure.pair import Budget, PairResult, PairSamples, round_order, time_one, time_pair
from codedag.measure.statistic import (
    Comparison,
    Verdict,
    compare,
    compare_samples,
    difference_spread_ns,
    t_critical,
    verdict,
    welch_df,
)
from codedag.measure.summary import Timing
from codedag.measure.threads import torch_threads

__all__ = [
    "MIN_CPU_SHARE",
    "NOISY_SPREAD",
    "Budget",
    "Clock",
    "Comparison",
    "Interference",
    "PairResult",
    "PairSamples",
    "Stopwatch",
    "Sync",
    "Timed",
    "Timing",
    "Verdict",
    "compare",
    "compare_samples",
    "detect",
    "difference_spread_ns",
    "no_sync",
    "round_order",
    "spread_reason",
    "t_critical",
    "time_one",
    "time_pair",
    "torch_threads",
    "verdict",
    "welch_df",
]
