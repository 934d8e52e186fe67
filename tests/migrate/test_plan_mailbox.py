"""DataLoader workers started before the plan was made apply it once it is posted."""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

import pytest
import torch
from migrate_support import plan_for
from prefix_support import DrawingFiles, cache_section, write_images
from torch.utils.data import DataLoader
from torch.utils.data._utils import fetch

from codedag.migrate.api import PipelineMigrator
from codedag.migrate.cache.runtime import CacheSettings
from codedag.migrate.plan_mailbox import PLAN_FILE, Mailbox, MailboxInWorker, _look, _read, _watch
from codedag.migrate.spawned_workers import WorkerPlan
from codedag.store.tiers import StoreSettings


def _loader(paths: list[str], context: str) -> DataLoader:  # type: ignore[type-arg]
    return DataLoader(
        DrawingFiles(paths),
        batch_size=2,
        num_workers=1,
        multiprocessing_context=context,
        persistent_workers=True,
        generator=torch.Generator().manual_seed(3),
    )


@pytest.mark.slow
@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_persistent_workers_apply_a_plan_posted_while_they_run_with_the_loaders_own_batches(
    tmp_path: Path, context: str
) -> None:
    """The plan is applied in this process after the first batch and posted: the worker
    computes the batches it was handed already without it, applies it before its next fetch,
    stores the rest of epoch 1 and reads it back after; every batch is the loader's own,
    its random draws included."""
    paths = write_images(tmp_path / "images", 16)
    reference = _loader(paths, "fork")
    own = [list(reference) for _ in range(3)]
    reference._iterator = None  # type: ignore[attr-defined]  # its worker ends

    store = StoreSettings(folder=tmp_path / "cache", ram_budget_bytes=16 << 20, disk_budget_bytes=0)
    plan = {**plan_for({}), "cache": cache_section()}
    loader = _loader(paths, context)
    mailbox = Mailbox()
    loader.worker_init_fn = mailbox.worker_init(None)
    iterator = iter(loader)
    loader.worker_init_fn = None
    got: list[list[Any]] = [[next(iterator)]]
    handed = iterator._send_idx - iterator._rcvd_idx  # type: ignore[attr-defined]
    with PipelineMigrator(plan, guard=False, cache=CacheSettings(store=store, judge_after=0)) as m:
        mailbox.post(m.running_worker_plan())
        got[0].extend(iterator)
        got.extend(list(loader) for _ in range(2))
        loader._iterator = None  # type: ignore[attr-defined]  # its worker ends, counts written
    mailbox.close()
    counted = m.get_stats()["cache"]
    for want, have in zip(own, got, strict=True):
        for want_batch, have_batch in zip(want, have, strict=True):
            for want_part, have_part in zip(want_batch[:3], have_batch[:3], strict=True):
                assert torch.equal(want_part, have_part)
    hits = [[int(h) for batch in epoch for h in batch[3]] for epoch in got]
    handed_out = 2 * (1 + handed)  # the first batch and those handed out with it
    stored = hits[0].count(0)  # computed and stored under the plan: a suffix of epoch 1
    assert hits[0][:2] == [-1, -1]  # the first batch came before the plan
    assert hits[0] == [-1] * (16 - stored) + [0] * stored
    assert stored >= 16 - handed_out  # every batch handed out after the post had the plan
    assert hits[1] == [0] * (16 - stored) + list(range(1, stored + 1))  # the rest stored now
    assert hits[2] == list(range(stored + 1, stored + 17))  # epoch 3 reads every sample back
    assert (counted["hits"], counted["stored"]) == (stored + 16, 16)


def test_a_worker_stops_looking_once_nothing_is_posted_and_runs_the_libraries_own(
    tmp_path: Path,
) -> None:
    classes = (fetch._MapDatasetFetcher, fetch._IterableDatasetFetcher)
    originals = [cls.__dict__["fetch"] for cls in classes]
    mailbox = Mailbox()
    try:
        assert mailbox.path.stat().st_mode & 0o077 == 0  # private to this user
        MailboxInWorker(str(mailbox.path), None)(0)  # in this process, as in a worker
        assert [cls.__dict__["fetch"] for cls in classes] != originals
        fetcher = fetch._MapDatasetFetcher([10, 20, 30], False, lambda x: x, False)
        assert fetcher.fetch(1) == 20  # nothing posted yet: the original fetch
        assert [cls.__dict__["fetch"] for cls in classes] != originals
        mailbox.post(WorkerPlan(plan_for({}), "cpu", lambda: None, None, None, False))
        assert mailbox.posted and not mailbox.delivered  # it cannot travel: nothing comes
        mailbox.post(WorkerPlan(plan_for({}), "cpu", None, None, None, False))  # once only
        assert not mailbox.delivered
        assert fetcher.fetch(2) == 30
        assert [cls.__dict__["fetch"] for cls in classes] == originals  # no longer looking
    finally:
        for cls, original in zip(classes, originals, strict=True):
            cls.fetch = original  # type: ignore[attr-defined]
        mailbox.close()
    assert not mailbox.path.exists()


def test_a_mailbox_file_that_is_not_this_users_plan_is_never_applied(tmp_path: Path) -> None:
    plan = WorkerPlan(plan_for({}), "cpu", None, None, None, False)
    path = tmp_path / PLAN_FILE
    path.write_bytes(pickle.dumps(plan))
    assert _read(path, os.stat(path)) == plan
    path.write_bytes(pickle.dumps({"not": "a plan"}))
    assert _read(path, os.stat(path)) is None
    path.write_bytes(b"\x80\x05 not a pickle")
    assert _read(path, os.stat(path)) is None
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(pickle.dumps(plan))
    path.unlink()
    path.symlink_to(elsewhere)
    assert _read(path, os.stat(path, follow_symlinks=False)) is None  # never through a link
    unwatched: list[bool] = []
    _look(path, lambda: unwatched.append(True))  # the link is passed over: nothing applied
    assert unwatched == [True]
    _look(tmp_path / "gone" / PLAN_FILE, lambda: unwatched.append(True))  # not posted yet
    assert unwatched == [True]


def test_watching_leaves_the_fetch_as_it_was_after_the_plan_is_found(tmp_path: Path) -> None:
    classes = (fetch._MapDatasetFetcher, fetch._IterableDatasetFetcher)
    originals = [cls.__dict__["fetch"] for cls in classes]
    try:
        _watch(tmp_path / PLAN_FILE)
        (tmp_path / PLAN_FILE).write_bytes(pickle.dumps(None))
        fetcher = fetch._MapDatasetFetcher([1, 2], False, lambda x: x, False)
        assert fetcher.fetch(0) == 1
        assert [cls.__dict__["fetch"] for cls in classes] == originals
    finally:
        for cls, original in zip(classes, originals, strict=True):
            cls.fetch = original  # type: ignore[attr-defined]
