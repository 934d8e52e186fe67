"""The run-time check of batched chains: alternating blocks in the loader, batched execution
kept only where its batches reached the training loop faster."""

from __future__ import annotations

import io
import time
from types import SimpleNamespace
from typing import Any

import cv2
import pytest
from batched_support import Augmented, images, loader, max_level_diff, plan
from rich.console import Console

import codedag.migrate.batched.check as check_module
from codedag.backends.batched.executor import BatchExecutor
from codedag.cli.migrate import batched_table
from codedag.migrate.api import PipelineMigrator
from codedag.migrate.batched.check import RunCheck
from codedag.migrate.batched.settings import BatchedSettings


class _Clock:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def _feed(check: RunCheck, clock: _Clock, batched_ms: float, per_sample_ms: float) -> None:
    """Deliver batches in the mode the check asks for, each taking its mode's time."""
    while check.checking:
        mode = check.batched_now()
        clock.now += int((batched_ms if mode else per_sample_ms) * 1e6)
        check.deliver(mode)


def test_blocks_outlast_what_the_loader_holds_in_flight_and_alternate() -> None:
    check = RunCheck()
    check.begin(SimpleNamespace(_num_workers=2, _prefetch_factor=2))
    assert check.block == 6
    modes = []
    for _ in range(18):
        modes.append(check.batched_now())
        check.deliver(modes[-1])
    assert modes == [True] * 6 + [False] * 6 + [True] * 6
    assert RunCheck().batched_now() and check_module.MIN_BLOCK == 4


@pytest.mark.parametrize(
    ("batched_ms", "per_sample_ms", "kept"), [(10.0, 20.0, True), (20.0, 10.0, False)]
)
def test_batched_execution_is_kept_only_where_its_intervals_are_shorter(
    batched_ms: float, per_sample_ms: float, kept: bool
) -> None:
    clock = _Clock()
    check = RunCheck(clock_ns=clock)
    check.begin(SimpleNamespace(_num_workers=0))
    _feed(check, clock, batched_ms, per_sample_ms)
    assert check.decided is kept
    assert len(check.intervals["batched"]) >= check_module.INTERVALS
    assert len(check.intervals["per_sample"]) >= check_module.INTERVALS
    # every interval counted is its own mode's: none straddles a change of mode
    assert set(check.intervals["batched"]) == {batched_ms / 1e3}
    assert set(check.intervals["per_sample"]) == {per_sample_ms / 1e3}
    assert check.summary()["state"] == ("kept" if kept else "stopped")
    assert ("kept: " if kept else "not faster in the loader: ") in check.reason


def test_a_tie_stops_batched_execution() -> None:
    clock = _Clock()
    check = RunCheck(clock_ns=clock)
    check.begin(SimpleNamespace(_num_workers=0))
    _feed(check, clock, 10.0, 10.0)
    assert check.decided is False


def test_no_interval_spans_two_iterators_and_too_few_intervals_stop_it() -> None:
    clock = _Clock()
    check = RunCheck(clock_ns=clock)
    while check.checking:  # every batch from a new iterator: a new epoch's workers start
        check.begin(object())
        clock.now += 10**6
        check.deliver(check.batched_now())
    assert check.intervals == {"batched": [], "per_sample": []}
    assert check.decided is False and "too few" in check.reason
    assert check.delivered == check_module.MAX_BLOCKS * check_module.MIN_BLOCK


def _auto_plan() -> dict[str, Any]:
    the_plan = plan()
    the_plan["batched"]["mode"] = "auto"  # the plan's choice: checked in the loader
    return the_plan


def _slow(function: Any, seconds: float) -> Any:
    def slow(*args: Any, **kwargs: Any) -> Any:
        time.sleep(seconds)
        return function(*args, **kwargs)

    return slow


@pytest.mark.parametrize("batched_faster", [True, False])
def test_in_the_loader_the_check_keeps_or_stops_batched_execution_by_what_it_measures(
    batched_faster: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    dataset = Augmented(images(64))
    reference = list(loader(dataset, batch_size=2))
    if batched_faster:  # the library call each sample makes per sample is slow
        monkeypatch.setattr(cv2, "warpAffine", _slow(cv2.warpAffine, 0.01))
    else:  # running a batch's records is slow
        monkeypatch.setattr(BatchExecutor, "run", _slow(BatchExecutor.run, 0.02))
    migrator = PipelineMigrator.from_plan(
        _auto_plan(), guard=False, batched=BatchedSettings(verify=0)
    )
    with migrator:
        batches = list(loader(dataset, batch_size=2))
    stats = migrator.get_stats()["batched"]
    check = stats["check"]
    assert check["state"] == ("kept" if batched_faster else "stopped"), check["reason"]
    assert stats["deferring"] is batched_faster
    assert check["batched_intervals"] >= 2 and check["per_sample_intervals"] >= 2
    assert stats["batches"] > 0  # the check's batched blocks ran batched
    for (x, _), (y, _) in zip(reference, batches, strict=True):
        assert max_level_diff(x, y) <= 1.0  # each block's batches: the pipeline's, within 1 level
    out = io.StringIO()
    Console(file=out, width=400).print(batched_table(stats))
    assert f"run-time check │ {check['state']}: " in " ".join(out.getvalue().split())


def test_a_chain_the_user_forces_is_not_checked() -> None:
    dataset = Augmented(images(8))
    migrator = PipelineMigrator.from_plan(plan(), guard=False, batched=BatchedSettings(verify=0))
    with migrator:
        list(loader(dataset, batch_size=2))
    stats = migrator.get_stats()["batched"]
    assert stats["check"] == {"state": "off"} and stats["deferring"] is True
