"""Noticing that something else ran while a call was timed, and saying so.

Repeated identical calls take nearly the same time on a quiet machine. Two signs that they did
not get the machine to themselves:

* **spread**: the interquartile range of one way's samples is more than :data:`NOISY_SPREAD` of
  their median (another process took the CPU for some samples and not others, a frequency change,
  a thread pool oversubscribed by a busy machine);
* **waiting**: with a CPU clock, the calling thread ran on a CPU for less than
  :data:`MIN_CPU_SHARE` of the wall time (it was descheduled, or its threads waited for each
  other). This holds for calls that compute on the calling thread; a call that waits for a device
  or a file has a low share by nature, so the CPU clock is given only where calls compute.

The figures are still reported; the result carries the warning next to them.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from codedag.measure.summary import Timing

NOISY_SPREAD = 0.5
"""Interquartile range over the median above which one way's samples count as disturbed."""

MIN_CPU_SHARE = 0.5
"""Share of the wall time on a CPU below which a computing call counts as disturbed."""


@dataclass(frozen=True)
class Interference:
    """Signs of other work during a measurement.

    Attributes:
        a_spread: interquartile range over the median of A's samples.
        b_spread: the same of B's.
        cpu_share: median over samples of the calling thread's CPU time over the wall time
            (``None``: not measured).
        reasons: each sign found, in words (empty: none).
    """

    a_spread: float
    b_spread: float
    cpu_share: float | None
    reasons: tuple[str, ...]

    @property
    def disturbed(self) -> bool:
        """Whether any sign of interference was found."""
        return bool(self.reasons)

    def describe(self) -> str:
        """The reasons in one line (empty when undisturbed)."""
        return "; ".join(self.reasons)


def spread_reason(whose: str, timing: Timing) -> str | None:
    """Why ``timing``'s samples look disturbed (their spread), or ``None``.

    Args:
        whose: how to name the samples' owner in the reason ("A's", "the baseline's").
        timing: the samples' summary.
    """
    if timing.relative_spread <= NOISY_SPREAD:
        return None
    return (
        f"{whose} {timing.samples} samples spread by {timing.relative_spread:.0%} of their "
        f"median ({timing.q25_ns / 1e6:.4g} to {timing.q75_ns / 1e6:.4g} ms)"
    )


def detect(
    a: Timing, b: Timing, cpu_shares: Sequence[float] = (), names: tuple[str, str] = ("A", "B")
) -> Interference:
    """Look for interference in two ways' timings and, optionally, their samples' CPU shares.

    Args:
        a: A's timing.
        b: B's timing.
        cpu_shares: CPU time over wall time of each sample (both ways), when measured.
        names: what to call A and B in the reasons ("the library", "the backend").
    """
    reasons = [
        reason
        for reason in (spread_reason(f"{names[0]}'s", a), spread_reason(f"{names[1]}'s", b))
        if reason is not None
    ]
    share = statistics.median(cpu_shares) if cpu_shares else None
    if share is not None and share < MIN_CPU_SHARE:
        reasons.append(
            f"the timed thread ran on a CPU for {share:.0%} of the wall time: other work took "
            "the CPU, or its threads waited for each other"
        )
    return Interference(a.relative_spread, b.relative_spread, share, tuple(reasons))
