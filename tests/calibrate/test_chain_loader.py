"""A chain's decision measured in the loader: batched against per sample in alternating blocks,
through the run-time check; the faster of the two in the loader is the plan's choice."""

from __future__ import annotations

import functools
import time
from typing import Any

import cv2
import pytest
from batched_support import Augmented, images, loader, plan

from codedag.backends.batched.executor import BatchExecutor
from codedag.calibrate.chain_loader import (
    LoaderDecision,
    _one_chain,
    apply_loader_decisions,
    decide_in_loader,
)
from codedag.plan import MigrationPlan


def _slow(function: Any, seconds: float) -> Any:
    def slow(*args: Any, **kwargs: Any) -> Any:
        time.sleep(seconds)
        return function(*args, **kwargs)

    return slow


@pytest.mark.timeout(120)
@pytest.mark.parametrize("batched_faster", [True, False])
def test_the_decision_is_the_faster_of_the_two_in_the_loader(
    batched_faster: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if batched_faster:  # each sample's own library call is slow: per sample loses
        monkeypatch.setattr(cv2, "warpAffine", _slow(cv2.warpAffine, 0.01))
    else:  # running a batch's records is slow: batched loses
        monkeypatch.setattr(BatchExecutor, "run", _slow(BatchExecutor.run, 0.02))
    the_plan = MigrationPlan.from_dict(plan())
    the_plan.batched.chains[0].batched = False  # the replay's choice, overruled
    make = functools.partial(loader, Augmented(images(24)), 0, 2)
    decision = decide_in_loader(the_plan, "chain0", make, "cpu")
    assert decision.batched is batched_faster, decision.reason
    assert decision.batched_intervals >= 2 and decision.per_sample_intervals >= 2
    section = apply_loader_decisions(the_plan.batched, {"chain0": decision})
    chain = section.chains[0]
    assert chain.batched is batched_faster and chain.basis == "measured"
    assert chain.reason.startswith("measured in the loader: ")
    assert the_plan.batched.chains[0].batched is False  # the plan given is kept


def test_a_chain_without_a_decision_keeps_the_replays_choice() -> None:
    section = MigrationPlan.from_dict(plan()).batched
    undecided = LoaderDecision("chain0", None, "the loader ended before the check decided")
    assert apply_loader_decisions(section, {"chain0": undecided}) == section
    assert apply_loader_decisions(section, {}) == section


def test_the_loader_runs_only_the_chain_decided_and_the_plan_given_is_kept() -> None:
    data = plan()
    data["batched"]["chains"].append({**data["batched"]["chains"][0], "id": "chain1"})
    data["calls"] = [{"function": "cv2.resize", "context_keys": ["f/cv2.resize#0"]}]
    given = MigrationPlan.from_dict(data)
    one = _one_chain(given, "chain1")
    assert one.batched.mode == "auto" and one.calls == []
    assert [c.batched for c in one.batched.chains] == [False, True]
    assert one.cache is None and one.tables is None
    assert given.to_dict() == MigrationPlan.from_dict(data).to_dict()
