"""Delivery: the DataLoader iterator hands the training loop finished batches.

``_BaseDataLoaderIter.__next__`` is replaced by :func:`make_next`: each batch coming out of the
loader (from workers, or from the main process with ``num_workers=0``) has its
:class:`~.collate.BatchRecord` objects run by the executor and replaced by the tensors
``default_collate`` would have produced, on the host (``deliver="host"``) or left on the device
(``deliver="device"``); every other value is untouched. While ``deliver="auto"`` is still
deciding, a batch's results wait as :class:`Undelivered` values until the batch is handed over.

With ``ahead=1`` (the default on CUDA with workers) the next batch is taken from the loader and
launched on a side stream before the current one is returned, so its preprocessing overlaps the
training step; the training step's stream waits on the batch's event, and a batch left over when
an epoch restarts (persistent workers, a loop that broke early) is dropped.
"""

from __future__ import annotations

import collections.abc
import copy
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from codedag.backends.batched.collate import BatchRecord
from codedag.backends.batched.transfer import Pending


@dataclass
class Undelivered:
    """A record's result on the device, its delivery decided when its batch is handed over."""

    tensor: Any


class _Ahead:
    """Batches launched ahead for one iterator."""

    def __init__(self, epoch: object) -> None:
        self.epoch = epoch
        self.queue: deque[Pending] = deque()
        self.ended = False


def make_next(
    original: Callable[[Any], Any],
    launch: Callable[[Any], Pending],
    finish: Callable[[Pending], Any],
    active: Callable[[], bool],
    ahead: Callable[[Any], int],
) -> Callable[[Any], Any]:
    """The replacement of ``_BaseDataLoaderIter.__next__``.

    Args:
        original: torch's ``__next__``.
        launch: starts running a raw batch's records (returns at once on a side stream).
        finish: the delivered batch of a launched one.
        active: whether batched execution is applied (else ``original`` alone).
        ahead: batches to launch ahead for this iterator (0 or 1).
    """
    states: weakref.WeakKeyDictionary[Any, _Ahead] = weakref.WeakKeyDictionary()

    def __next__(iterator: object) -> Any:
        if not active():
            return original(iterator)
        if not ahead(iterator):
            return finish(launch(original(iterator)))
        epoch = getattr(iterator, "_sampler_iter", None)
        state = states.get(iterator)
        if state is None or state.epoch is not epoch:
            state = states[iterator] = _Ahead(epoch)
        if not state.queue:
            if state.ended:
                state.ended = False
                raise StopIteration
            state.queue.append(launch(original(iterator)))  # StopIteration propagates
        try:
            state.queue.append(launch(original(iterator)))
        except StopIteration:
            state.ended = True
        return finish(state.queue.popleft())

    return __next__


def replace_records(
    batch: object, run: Callable[[Any], Any], depth: int = 0, kind: type = BatchRecord
) -> Any:
    """``batch`` with every :class:`BatchRecord` (or ``kind``) replaced by ``run(record)``
    (containers rebuilt as ``pin_memory`` rebuilds them; untouched containers are returned as
    they are)."""
    if isinstance(batch, kind):
        return run(batch)
    if depth > 6 or isinstance(batch, str | bytes):
        return batch
    if isinstance(batch, tuple):
        items = [replace_records(b, run, depth + 1, kind) for b in batch]
        if all(a is b for a, b in zip(items, batch)):
            return batch
        return type(batch)(*items) if hasattr(batch, "_fields") else type(batch)(items)
    if isinstance(batch, list):
        items = [replace_records(b, run, depth + 1, kind) for b in batch]
        if all(a is b for a, b in zip(items, batch)):
            return batch
        return items if type(batch) is list else type(batch)(items)
    if isinstance(batch, collections.abc.Mapping):
        values = {k: replace_records(v, run, depth + 1, kind) for k, v in batch.items()}
        if all(values[k] is v for k, v in batch.items()):
            return batch
        if isinstance(batch, collections.abc.MutableMapping):
            clone = copy.copy(batch)
            clone.update(values)
            return clone
        return values
    return batch


def has_records(batch: object, depth: int = 0) -> bool:
    """Whether ``batch`` holds a :class:`BatchRecord` (tuples, lists, mappings)."""
    if isinstance(batch, BatchRecord):
        return True
    if depth > 6 or isinstance(batch, str | bytes):
        return False
    if isinstance(batch, tuple | list):
        return any(has_records(b, depth + 1) for b in batch)
    if isinstance(batch, collections.abc.Mapping):
        return any(has_records(v, depth + 1) for v in batch.values())
    return False
