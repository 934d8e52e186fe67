"""The protocol: A against B in interleaved rounds, after warm-up, each call timed between
device synchronizations.

Round ``i`` runs both ways, A first on even rounds and B first on odd ones (A B, B A, A B, ...),
so drift of the machine (clock frequency, caches, other processes) reaches both alike. Warm-up
rounds run first and are not timed (allocations, caches, lazy initialization, compilation).
:func:`time_pair` drives the calls itself and samples adaptively (:class:`Budget`); code that
times calls as they come (a guard around a program's own calls) adds each round to
:class:`PairSamples`. Both end in a :class:`PairResult`: each way's :class:`~.summary.Timing`,
the :class:`~.statistic.Comparison` and the :class:`~.interference.Interference` seen.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from codedag.errors import ConfigError
from codedag.measure.clock import Stopwatch
from codedag.measure.interference import Interference, detect
from codedag.measure.statistic import Comparison, Verdict, compare
from codedag.measure.summary import Timing

T = TypeVar("T")


def round_order(ways: Sequence[T], round_index: int) -> list[T]:
    """The order of ``ways`` in round ``round_index``: as given on even rounds, reversed on odd
    ones (two ways: A B, B A, A B, ...)."""
    return list(ways) if round_index % 2 == 0 else list(reversed(ways))


DECISIVE_ROUNDS = 3
"""Rounds after which a candidate far slower stops (:attr:`Budget.decisive`)."""


@dataclass(frozen=True)
class Budget:
    """How long to time one pair.

    Sampling goes on until both ways have ``min_samples`` and together took ``target_ns``; then
    it stops as soon as the comparison is decided (the verdict is not a tie, or the spread is
    below ``precision`` of A's median), at ``max_ns`` or ``max_samples`` at the latest. A
    candidate that :data:`DECISIVE_ROUNDS` rounds show far slower (B's fastest sample
    ``decisive`` times A's slowest) stops then, judged slower: a placement needs it faster, and
    for B to be faster every one of its samples would have to be slowed twice as much as every
    interleaved sample of A; sampling it on would take the most time for the least doubt (a
    resize 3.5 times slower through torch took 150 ms of calibration per input size). (A
    candidate far faster is sampled as usual: three samples give too wide an interval to judge
    the saving it is placed for.)

    Attributes:
        min_samples: samples of each way, at least.
        max_samples: samples of each way, at most.
        target_ns: time spent before the first check.
        max_ns: time spent at most (an undecided pair is reported with its spread).
        precision: spread relative to A's median that counts as decided.
        warmup: untimed rounds first.
        decisive: how many times slower than A the first :data:`DECISIVE_ROUNDS` rounds must
            show B to judge it slower (``inf``: never).
    """

    min_samples: int = 5
    max_samples: int = 201
    target_ns: int = 150_000_000
    max_ns: int = 2_000_000_000
    precision: float = 0.02
    warmup: int = 2
    decisive: float = 2.0

    def __post_init__(self) -> None:
        if not 1 <= self.min_samples <= self.max_samples:
            raise ConfigError(
                f"budget needs 1 <= min_samples <= max_samples, got {self.min_samples} and "
                f"{self.max_samples}"
            )
        if self.warmup < 0 or self.target_ns < 0 or self.max_ns < 0 or self.precision < 0:
            raise ConfigError(f"budget values must not be negative, got {self!r}")
        if not self.decisive >= 1:
            raise ConfigError(f"budget's decisive ratio must be at least 1, got {self.decisive}")


@dataclass(frozen=True)
class PairResult:
    """A against B, measured.

    Attributes:
        a: A's timing.
        b: B's timing.
        comparison: B judged against A.
        interference: signs that other work disturbed the measurement.
        a_ns: A's samples in the order taken.
        b_ns: B's samples in the order taken.
    """

    a: Timing
    b: Timing
    comparison: Comparison
    interference: Interference
    a_ns: tuple[int, ...]
    b_ns: tuple[int, ...]


@dataclass
class PairSamples:
    """Samples of interleaved rounds, added as they are taken.

    Attributes:
        a_ns: A's samples.
        b_ns: B's samples.
        cpu_shares: CPU time over wall time of the samples whose CPU time was measured.
    """

    a_ns: list[int] = field(default_factory=list)
    b_ns: list[int] = field(default_factory=list)
    cpu_shares: list[float] = field(default_factory=list)

    def __len__(self) -> int:
        return min(len(self.a_ns), len(self.b_ns))

    def add(
        self, a_ns: int, b_ns: int, a_cpu_ns: int | None = None, b_cpu_ns: int | None = None
    ) -> None:
        """Add one round: both ways' wall times and, when measured, their CPU times."""
        self.a_ns.append(a_ns)
        self.b_ns.append(b_ns)
        for wall, cpu in ((a_ns, a_cpu_ns), (b_ns, b_cpu_ns)):
            if cpu is not None and wall > 0:
                self.cpu_shares.append(cpu / wall)

    def timings(self) -> tuple[Timing, Timing]:
        """Both ways' timings (at least one round must have been added)."""
        return Timing.of(self.a_ns), Timing.of(self.b_ns)

    def result(self, margin: float = 0.0, names: tuple[str, str] = ("A", "B")) -> PairResult:
        """The rounds so far, summarized and judged.

        Args:
            margin: the smallest relative saving that counts (:func:`~.statistic.compare`).
            names: what to call A and B where interference is reported.
        """
        a, b = self.timings()
        return PairResult(
            a,
            b,
            compare(a, b, margin),
            detect(a, b, self.cpu_shares, names),
            tuple(self.a_ns),
            tuple(self.b_ns),
        )


def _sample(watch: Stopwatch, fn: Callable[[], Any]) -> tuple[int, int | None]:
    """Wall nanoseconds of one call through ``watch``, and the thread's CPU nanoseconds when
    the stopwatch has a CPU clock."""
    cpu_clock = getattr(watch, "cpu_clock", None)
    if cpu_clock is None:
        return watch(fn), None
    c0 = cpu_clock()
    wall = watch(fn)
    return wall, cpu_clock() - c0


def _decided(samples: PairSamples, precision: float) -> bool:
    a, b = samples.timings()
    judged = compare(a, b)
    return judged.verdict is not Verdict.TIE or judged.spread_ns < precision * max(1, a.median_ns)


def _far_slower(samples: PairSamples, ratio: float) -> bool:
    """Whether B's fastest sample is ``ratio`` times A's slowest."""
    return min(samples.b_ns) > ratio * max(samples.a_ns)


def time_pair(
    a: Callable[[], Any],
    b: Callable[[], Any],
    stopwatch: Stopwatch | None = None,
    budget: Budget | None = None,
    margin: float = 0.0,
    names: tuple[str, str] = ("A", "B"),
) -> PairResult:
    """Time ``a`` and ``b`` in interleaved rounds after warm-up, sampling within ``budget``.

    Args:
        a: the reference (the original).
        b: the candidate.
        stopwatch: times one call (its clock and device synchronization).
        budget: how long to sample.
        margin: the smallest relative saving the comparison counts.
        names: what to call A and B where interference is reported.

    Exceptions of either call propagate (a call that cannot run has no time).
    """
    watch = stopwatch or Stopwatch()
    plan = budget or Budget()
    ways = (a, b)
    for index in range(plan.warmup):
        for fn in round_order(ways, index):
            fn()
    samples = PairSamples()
    spent = 0
    for index in range(plan.max_samples):
        taken: dict[int, tuple[int, int | None]] = {}
        for way in round_order((0, 1), index):
            taken[way] = _sample(watch, ways[way])
        (a_ns, a_cpu), (b_ns, b_cpu) = taken[0], taken[1]
        samples.add(a_ns, b_ns, a_cpu, b_cpu)
        spent += a_ns + b_ns
        if index + 1 >= DECISIVE_ROUNDS and _far_slower(samples, plan.decisive):
            result = samples.result(margin, names)
            return replace(result, comparison=replace(result.comparison, verdict=Verdict.SLOWER))
        if index + 1 < plan.min_samples or spent < plan.target_ns:
            continue
        if spent >= plan.max_ns or _decided(samples, plan.precision):
            break
    return samples.result(margin, names)


def time_one(
    fn: Callable[[], Any], stopwatch: Stopwatch | None = None, repeats: int = 7, warmup: int = 1
) -> Timing:
    """Time ``fn`` alone: ``warmup`` untimed calls, then ``repeats`` timed ones."""
    watch = stopwatch or Stopwatch()
    for _ in range(warmup):
        fn()
    return Timing.of([watch(fn) for _ in range(max(1, repeats))])
