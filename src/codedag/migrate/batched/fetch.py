"""The DataLoader fetch with deferral: where samples are made and collated, in a worker or not.

``_MapDatasetFetcher.fetch`` is replaced by :func:`fetch`, which does what torch's does (indexing
the dataset, or ``__getitems__``, then the collate function) with three differences:

* the dataset's code runs with deferral on (one :func:`~.deferred.deferring` block per fetch,
  and one per sample inside it): the chain's calls return deferred values;
* ``default_collate`` collates deferred values into :class:`~.collate.BatchRecord` objects; a
  custom ``collate_fn`` receives the deferred samples: stacking them (``torch.stack``) makes a
  record too, anything else forces them, and a collate that fails on them runs again on forced
  samples;
* a sample whose code raises while deferred values exist (a function outside the plan received
  one: cv2 does not accept foreign arrays) runs again eagerly, from the random state it started
  with (Python's, NumPy's and torch's global generators), and counts as forced by ``error``.

Iterable datasets are fetched as torch fetches them (their samples are never deferred).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import Any

from torch.utils.data._utils.collate import default_collate

import codedag.migrate.random_states as random_states
from codedag.backends.batched.collate import (
    BatchRecord,
    default_collate_deferred,
    force_tree,
    has_deferred,
)
from codedag.backends.batched.deferred import collating, deferring, frozen, thaw
from codedag.backends.batched.forcing import FORCED, code_line, error_line

log = logging.getLogger(__name__)


class FetchCounters:
    """What fetches with deferral did in this process (workers publish these)."""

    def __init__(self) -> None:
        self.fetches = 0
        self.fetch_ns = 0
        self.records = 0
        self.retried = 0

    def reset(self) -> None:
        """Start counting from zero (a new runtime)."""
        self.__init__()  # type: ignore[misc]

    def values(self) -> dict[str, int]:
        """The counters as a dict."""
        return {
            "fetches": self.fetches,
            "fetch_ns": self.fetch_ns,
            "records": self.records,
            "retried": self.retried,
        }


COUNTERS = FetchCounters()


def make_fetch(original: Callable[..., Any], deferring: Callable[[], bool]) -> Callable[..., Any]:
    """The replacement of ``_MapDatasetFetcher.fetch``; ``deferring()`` says whether to defer."""

    def fetch(fetcher: Any, possibly_batched_index: Any) -> Any:
        if not deferring():
            return original(fetcher, possibly_batched_index)
        started = time.perf_counter_ns()
        batch = _fetch(fetcher, possibly_batched_index)
        elapsed = time.perf_counter_ns() - started
        COUNTERS.fetches += 1
        COUNTERS.fetch_ns += elapsed
        records = [r for r in _records(batch)]
        COUNTERS.records += len(records)
        if records:
            records[0].worker_ns = elapsed
        return batch

    return fetch


def _fetch(fetcher: Any, index: Any) -> Any:
    dataset = fetcher.dataset
    # One block for the fetch: recorded arrays are shared by its samples and stay frozen until
    # collate has packed them; the collate itself runs with deferral off.
    with deferring():
        if fetcher.auto_collation:
            if hasattr(dataset, "__getitems__") and dataset.__getitems__:
                data = sample_deferred(lambda: dataset.__getitems__(index))
            else:
                data = [sample_deferred(functools.partial(_item, dataset, idx)) for idx in index]
        else:
            data = sample_deferred(lambda: dataset[index])
        with deferring(enabled=False):
            return _collate(fetcher, data)


def _collate(fetcher: Any, data: Any) -> Any:
    collate_fn = fetcher.collate_fn
    prepare = getattr(collate_fn, "prepare_samples", None)
    if prepare is not None:  # an outer layer's (the prefix cache's) around the loader's own
        data, collate_fn = prepare(data), collate_fn.user_collate
    if fetcher.auto_collation and collate_fn is default_collate:
        return default_collate_deferred(data)
    name = getattr(collate_fn, "__qualname__", type(collate_fn).__qualname__)
    where = code_line(collate_fn)
    if has_deferred(data):
        try:
            with collating():  # its torch.stack of deferred samples makes a batch record
                return collate_fn(data)
        except Exception as error:
            detail = f"custom collate_fn {name} failed on deferred samples ({type(error).__name__})"
            log.info("%s at %s; it runs again on forced samples", detail, where)
            return collate_fn(force_tree(data, "collate", detail, where))
    return collate_fn(data)


def _item(dataset: Any, index: Any) -> Any:
    return dataset[index]


def sample_deferred(make: Callable[[], Any]) -> Any:
    """Run the dataset's code with deferral; on an error with deferred values, again eagerly.

    A sample that calls what its chain does not defer (a branch its traced batch never took,
    such as a random flip no traced sample drew) gets the library's own result this way.
    """
    snapshot = random_states.capture()
    try:
        with deferring() as scope:
            return make()
    except Exception as error:
        if not scope.created and not frozen():
            raise
        detail = f"{type(error).__name__}: {error}".splitlines()[0][:120]
        where = error_line(error)
        for entry in sorted(scope.entries) or [None]:  # type: ignore[list-item]
            FORCED.forced("error", detail, entry, where=where)
        COUNTERS.retried += 1
        log.info(
            "a sample failed with deferred values at %s (%s); it runs again eagerly", where, detail
        )
        random_states.restore(snapshot)
        thaw()  # the sample's code may write into arrays recorded in place
    with deferring(enabled=False):
        return make()


def _records(batch: Any, depth: int = 0) -> list[BatchRecord]:
    if isinstance(batch, BatchRecord):
        return [batch]
    if depth > 4:
        return []
    if isinstance(batch, tuple | list):
        return [r for item in batch for r in _records(item, depth + 1)]
    if isinstance(batch, dict):
        return [r for item in batch.values() for r in _records(item, depth + 1)]
    return []
