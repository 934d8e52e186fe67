"""Interference: noisy repeated measurements and a thread that waited are reported, not hidden."""

from __future__ import annotations

import random

from codedag.measure import NOISY_SPREAD, PairSamples, Timing, detect


def test_quiet_timings_are_not_flagged() -> None:
    rng = random.Random(0)
    samples = PairSamples()
    for _ in range(30):
        samples.add(int(1e6 * rng.uniform(0.95, 1.05)), int(5e5 * rng.uniform(0.95, 1.05)))
    result = samples.result()
    assert not result.interference.disturbed and result.interference.describe() == ""
    assert result.interference.a_spread < 0.1 and result.interference.cpu_share is None


def test_noisy_injected_timings_are_flagged_with_their_spread() -> None:
    """Half the samples of B ran while another process held the CPU: 10x slower."""
    rng = random.Random(1)
    samples = PairSamples()
    for i in range(20):
        slow = 10 if i % 2 else 1
        samples.add(int(1e6 * rng.uniform(0.95, 1.05)), int(5e5 * slow * rng.uniform(0.95, 1.05)))
    result = samples.result(names=("the original", "the backend"))
    interference = result.interference
    assert interference.disturbed and interference.b_spread > NOISY_SPREAD
    assert interference.a_spread < NOISY_SPREAD
    assert interference.describe().startswith("the backend's 20 samples spread by")
    assert detect(result.a, result.b).reasons[0].startswith("B's 20 samples")
    assert result.b.samples == 20  # the figures are still there, next to the warning


def test_a_thread_that_waited_for_the_cpu_is_flagged() -> None:
    steady = Timing.of([1000] * 10)
    assert detect(steady, steady, [0.98, 0.99, 1.0]).reasons == ()
    waited = detect(steady, steady, [0.2, 0.3, 0.25])
    assert waited.disturbed and waited.cpu_share == 0.25 and "25%" in waited.describe()
    samples = PairSamples()
    samples.add(1000, 1000, a_cpu_ns=100, b_cpu_ns=200)
    assert samples.cpu_shares == [0.1, 0.2]
