"""Delivery: batch records replaced by their results, and batches launched ahead."""

from __future__ import annotations

from collections import OrderedDict, namedtuple
from typing import Any

import pytest
import torch

from codedag.backends.batched.collate import BatchRecord
from codedag.backends.batched.delivery import has_records, make_next, replace_records
from codedag.backends.batched.transfer import Pending


def _record() -> BatchRecord:
    return BatchRecord(meta=None, programs=[], ready=[], payload=torch.empty(0), entries=[])  # type: ignore[arg-type]


def test_records_are_replaced_and_containers_rebuilt() -> None:
    record = _record()
    Pair = namedtuple("Pair", "image label")
    labels = torch.arange(2)
    batch = {"pair": Pair(record, labels), "list": [record, "x"], "name": "s"}
    out = replace_records(batch, lambda r: "ran")
    assert out["pair"] == Pair("ran", labels) and type(out["pair"]) is Pair
    assert out["list"] == ["ran", "x"]
    assert batch["list"][0] is record  # the original batch is not modified


def test_containers_without_records_come_back_as_they_are() -> None:
    labels = [torch.arange(2), "x"]
    batch = OrderedDict(a=(1, labels))
    assert replace_records(batch, lambda r: pytest.fail("no record")) is batch
    assert not has_records(batch)
    assert has_records({"a": [(_record(),)]})
    assert not has_records("a string")


class _Iterator:
    def __init__(self, items: list[Any]) -> None:
        self.items = list(items)
        self._sampler_iter = object()
        self.pulled = 0

    def next(self) -> Any:
        if not self.items:
            raise StopIteration
        self.pulled += 1
        return self.items.pop(0)


def _next(ahead: int, active: bool = True) -> Any:
    return make_next(
        _Iterator.next,
        lambda batch: Pending(("launched", batch)),
        lambda pending: pending.result,
        lambda: active,
        lambda _it: ahead,
    )


def test_inactive_delivery_is_torchs_own() -> None:
    iterator = _Iterator([1])
    assert _next(0, active=False)(iterator) == 1


def test_without_ahead_each_batch_is_launched_and_finished_in_turn() -> None:
    iterator = _Iterator([1, 2])
    step = _next(0)
    assert step(iterator) == ("launched", 1) and iterator.pulled == 1
    assert step(iterator) == ("launched", 2)
    with pytest.raises(StopIteration):
        step(iterator)


def test_ahead_launches_the_next_batch_before_returning_one() -> None:
    iterator = _Iterator([1, 2, 3])
    step = _next(1)
    assert step(iterator) == ("launched", 1)
    assert iterator.pulled == 2  # batch 2 already launched
    assert step(iterator) == ("launched", 2)
    assert step(iterator) == ("launched", 3)
    with pytest.raises(StopIteration):
        step(iterator)


def test_a_new_epoch_drops_a_batch_left_over() -> None:
    iterator = _Iterator([1, 2, 3, 4])
    step = _next(1)
    assert step(iterator) == ("launched", 1)  # 2 is queued
    iterator._sampler_iter = object()  # the loop broke and the epoch restarted
    assert step(iterator) == ("launched", 3)
