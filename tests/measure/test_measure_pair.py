"""The protocol: interleaved rounds, warm-up left out, adaptive sampling, samples added as taken."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from codedag.errors import ConfigError
from codedag.measure import (
    Budget,
    PairSamples,
    Stopwatch,
    Verdict,
    round_order,
    time_one,
    time_pair,
)


class FakeClock:
    """A clock only the timed calls move: each call adds its cost; costs may vary per call."""

    def __init__(self) -> None:
        self.now = 0
        self.order: list[str] = []

    def __call__(self) -> int:
        return self.now

    def call(self, name: str, costs: Callable[[int], int]) -> Callable[[], None]:
        count = [0]

        def fn() -> None:
            self.now += costs(count[0])
            count[0] += 1
            self.order.append(name)

        return fn


def test_rounds_alternate_which_way_goes_first() -> None:
    assert round_order(("a", "b"), 0) == ["a", "b"]
    assert round_order(("a", "b"), 1) == ["b", "a"]
    assert round_order(("a", "b", "c"), 3) == ["c", "b", "a"]
    clock = FakeClock()
    result = time_pair(
        clock.call("a", lambda i: 1000),
        clock.call("b", lambda i: 500),
        Stopwatch(clock=clock),
        Budget(min_samples=4, max_samples=4, target_ns=0, warmup=0),
    )
    assert clock.order == ["a", "b", "b", "a", "a", "b", "b", "a"]
    assert result.a_ns == (1000,) * 4 and result.b_ns == (500,) * 4


def test_warm_up_rounds_are_run_but_not_timed() -> None:
    clock = FakeClock()
    # the first call of each way is slow (lazy initialization): 1 s, then 1 ms and 2 ms
    result = time_pair(
        clock.call("a", lambda i: 10**9 if i == 0 else 1_000_000),
        clock.call("b", lambda i: 10**9 if i == 0 else 2_000_000),
        Stopwatch(clock=clock),
        Budget(min_samples=5, max_samples=5, target_ns=0, warmup=1),
    )
    assert clock.order[:2] == ["a", "b"] and len(clock.order) == 12
    assert max(result.a_ns) == 1_000_000 and max(result.b_ns) == 2_000_000
    assert result.a.samples == result.b.samples == 5
    assert result.comparison.verdict is Verdict.SLOWER


def test_sampling_stops_once_decided_and_at_the_budget() -> None:
    clock = FakeClock()
    decided = time_pair(
        clock.call("a", lambda i: 1000),
        clock.call("b", lambda i: 500),
        Stopwatch(clock=clock),
        Budget(min_samples=4, max_samples=50, target_ns=4000, warmup=0),
    )
    assert decided.a.samples == 4  # 4 pairs of 1500 ns reach the target; the win is clear
    clock = FakeClock()
    # equal ways: a tie that no precision decides, so sampling goes on until max_ns
    undecided = time_pair(
        clock.call("a", lambda i: 1000),
        clock.call("b", lambda i: 1000),
        Stopwatch(clock=clock),
        Budget(min_samples=4, max_samples=50, target_ns=0, max_ns=20_000, precision=0),
    )
    assert undecided.a.samples == 10 and undecided.comparison.verdict is Verdict.TIE


def test_each_sample_lies_between_two_synchronizations() -> None:
    events: list[str] = []
    ticks = iter(range(0, 10**9, 10))

    def clock() -> int:
        events.append("clock")
        return next(ticks)

    watch = Stopwatch(sync=lambda: events.append("sync"), clock=clock)
    timed = watch.timed(lambda: events.append("call") or 42)
    assert events == ["sync", "clock", "call", "sync", "clock"]
    assert timed.value == 42 and timed.elapsed_ns == 10 and timed.cpu_ns is None
    events.clear()
    assert watch(lambda: events.append("call")) == 10
    assert events == ["sync", "clock", "call", "sync", "clock"]


def test_a_cpu_clock_records_each_samples_share_of_the_cpu() -> None:
    clock = FakeClock()
    cpu = FakeClock()  # the thread computes a quarter of the wall time

    def costs(i: int) -> int:
        cpu.now += 250
        return 1000

    watch = Stopwatch(clock=clock, cpu_clock=cpu)
    result = time_pair(
        clock.call("a", costs),
        clock.call("b", costs),
        watch,
        Budget(min_samples=3, max_samples=3, target_ns=0, warmup=0),
    )
    assert result.interference.cpu_share == pytest.approx(0.25)
    assert result.interference.disturbed and "25%" in result.interference.describe()
    assert watch.timed(clock.call("a", costs)).cpu_ns == 250


def test_samples_added_as_they_come_give_the_same_result() -> None:
    samples = PairSamples()
    for a, b in [(1000, 500), (1010, 490), (990, 510)]:
        samples.add(a, b)
    assert len(samples) == 3
    result = samples.result(margin=0.1)
    assert result.a.median_ns == 1000 and result.b.median_ns == 500
    assert result.comparison.b_faster and result.comparison.margin_ns == 100
    assert result.a_ns == (1000, 1010, 990)


def test_failures_propagate_and_time_one_leaves_out_its_warm_up() -> None:
    with pytest.raises(ZeroDivisionError):
        time_pair(lambda: None, lambda: 1 / 0)
    clock = FakeClock()
    timing = time_one(
        clock.call("f", lambda i: 10**9 if i == 0 else 7), Stopwatch(clock=clock), repeats=5
    )
    assert (timing.median_ns, timing.samples) == (7, 5)
    with pytest.raises(ConfigError, match="min_samples"):
        Budget(min_samples=0)


@pytest.mark.parametrize(
    ("a_ns", "b_ns", "rounds"), [(1000, 2500, 3), (5000, 1000, 5), (1000, 1800, 5)]
)
def test_three_rounds_judge_a_candidate_far_slower(a_ns: int, b_ns: int, rounds: int) -> None:
    clock = FakeClock()
    result = time_pair(
        clock.call("a", lambda i: a_ns),
        clock.call("b", lambda i: b_ns * (1 + i % 2)),  # noisy: three rounds would judge a tie
        Stopwatch(clock=clock),
        Budget(min_samples=5, max_samples=50, target_ns=0, warmup=0),
    )
    assert result.a.samples == result.b.samples
    if rounds == 3:
        assert result.a.samples == 3 and result.comparison.verdict is Verdict.SLOWER
    else:  # far faster, or not far enough: sampled as usual
        assert result.a.samples >= rounds
    clock = FakeClock()
    never = time_pair(
        clock.call("a", lambda i: a_ns),
        clock.call("b", lambda i: b_ns),
        Stopwatch(clock=clock),
        Budget(min_samples=5, max_samples=5, target_ns=0, warmup=0, decisive=float("inf")),
    )
    assert never.a.samples == 5
    with pytest.raises(ConfigError, match="decisive"):
        Budget(decisive=0.5)
