"""Deciding a batched chain in the loader itself: batched against per sample, in alternating
blocks, through the run-time check.

A replay of the chain in the main process (:mod:`.chains`) misses what only the loader shows:
recording in ``__getitem__``, collating deferred samples, the copy back, and whether the training
step hides the loading anyway. :func:`decide_in_loader` applies one chain of a plan with
``mode: auto``, so that :class:`codedag.migrate.batched.check.RunCheck` (the same check a
migrated run makes) times the intervals between delivered batches in alternating blocks, batched
and per sample, and runs the loader, epoch after epoch, until the check has decided.
:func:`apply_loader_decisions` writes those decisions into the plan's ``batched`` section.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from codedag.plan.model import BatchedInfo, MigrationPlan

log = logging.getLogger(__name__)

MAX_EPOCHS = 4
"""Epochs of the loader after which a check still undecided gives no decision."""


@dataclass
class LoaderDecision:
    """What the run-time check decided for one chain in the loader.

    Attributes:
        chain: the chain's id in the plan.
        batched: whether batched batches reached the loop faster (``None``: undecided).
        reason: the check's reason, with both medians.
        delivered: batches delivered while it checked.
        batched_intervals: intervals timed batched.
        per_sample_intervals: intervals timed per sample.
    """

    chain: str
    batched: bool | None
    reason: str
    delivered: int = 0
    batched_intervals: int = 0
    per_sample_intervals: int = 0

    def to_dict(self) -> dict[str, Any]:
        """Plain data."""
        return dict(self.__dict__)


def _one_chain(plan: MigrationPlan, chain_id: str) -> MigrationPlan:
    """``plan`` with only ``chain_id`` batched, decided by the run-time check, and no per-call
    placements, prefix cache or tables (they would change both modes alike)."""
    chains = [c.model_copy(update={"batched": c.id == chain_id}) for c in plan.batched.chains]
    batched = plan.batched.model_copy(update={"mode": "auto", "chains": chains})
    return plan.model_copy(update={"batched": batched, "calls": [], "cache": None, "tables": None})


def decide_in_loader(
    plan: MigrationPlan,
    chain_id: str,
    make_loader: Callable[[], Iterable[Any]],
    device: str,
    consume: Callable[[Any], None] | None = None,
    max_epochs: int = MAX_EPOCHS,
) -> LoaderDecision:
    """Run ``make_loader()`` with ``chain_id`` under the run-time check until it decides.

    Args:
        plan: a plan whose ``batched`` section names the chain.
        chain_id: the chain to decide.
        make_loader: a fresh DataLoader of the traced pipeline (called once per epoch).
        device: where batched execution runs.
        consume: what the training step does with a batch (default: nothing).
        max_epochs: epochs after which an undecided check gives ``batched=None``.
    """
    from codedag.migrate.api import PipelineMigrator
    from codedag.migrate.batched.settings import BatchedSettings

    settings = BatchedSettings(deliver="host", verify=1)
    migrator = PipelineMigrator.from_plan(
        _one_chain(plan, chain_id),
        default_device=device,
        guard=False,
        batched=settings,
        cache=False,
        tables=False,
    )
    check: dict[str, Any] = {}
    with migrator:
        for _ in range(max_epochs):
            for batch in make_loader():
                if consume is not None:
                    consume(batch)
                check = migrator.get_stats()["batched"]["check"]
                if check.get("state") != "checking":
                    break
            if check.get("state") != "checking":
                break
    state = check.get("state", "off")
    decided = {"kept": True, "stopped": False}.get(state)
    reason = check.get("reason") or f"the loader ended before the check decided ({state})"
    log.info("batched %s in the loader: %s", chain_id, reason)
    return LoaderDecision(
        chain_id,
        decided,
        reason,
        int(check.get("delivered", 0)),
        int(check.get("batched_intervals", 0)),
        int(check.get("per_sample_intervals", 0)),
    )


def apply_loader_decisions(
    section: BatchedInfo, decisions: Mapping[str, LoaderDecision]
) -> BatchedInfo:
    """The plan's ``batched`` section with each decided chain's choice taken from the loader
    (chains without a decision keep the replay's)."""
    chains = []
    for chain in section.chains:
        decision = decisions.get(chain.id)
        if decision is not None and decision.batched is not None:
            chain = chain.model_copy(
                update={
                    "batched": decision.batched,
                    "basis": "measured",
                    "reason": f"measured in the loader: {decision.reason}",
                }
            )
        chains.append(chain)
    return section.model_copy(update={"chains": chains})
