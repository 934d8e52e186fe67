"""The DataLoader fetch with deferral: torch's fetch when off, samples and collate when on."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch
from torch.utils.data._utils.collate import default_collate

import codedag.migrate.batched.fetch as fetch
import codedag.migrate.random_states as random_states


@pytest.fixture(autouse=True)
def _fresh_counters() -> Iterator[None]:
    fetch.COUNTERS.reset()
    yield
    fetch.COUNTERS.reset()


def _fetcher(dataset: Any, collate_fn: Any = default_collate, auto: bool = True) -> Any:
    return SimpleNamespace(dataset=dataset, auto_collation=auto, collate_fn=collate_fn)


def test_counters_reset_to_zero() -> None:
    fetch.COUNTERS.fetches = 3
    fetch.COUNTERS.retried = 1
    fetch.COUNTERS.reset()
    assert fetch.COUNTERS.values() == {"fetches": 0, "fetch_ns": 0, "records": 0, "retried": 0}


def test_with_deferral_off_the_original_fetch_runs() -> None:
    seen: list[Any] = []

    def original(fetcher: Any, index: Any) -> str:
        seen.append(index)
        return "original"

    replaced = fetch.make_fetch(original, lambda: False)
    assert replaced(_fetcher([1, 2]), [0, 1]) == "original"
    assert seen == [[0, 1]]
    assert fetch.COUNTERS.fetches == 0


def test_with_deferral_on_samples_are_indexed_and_collated() -> None:
    dataset = [(torch.full((2,), float(i)), i) for i in range(4)]
    replaced = fetch.make_fetch(lambda *_: pytest.fail("original called"), lambda: True)
    images, labels = replaced(_fetcher(dataset), [3, 1])
    assert torch.equal(images, torch.tensor([[3.0, 3.0], [1.0, 1.0]]))
    assert labels.tolist() == [3, 1]
    assert fetch.COUNTERS.fetches == 1 and fetch.COUNTERS.fetch_ns > 0
    assert fetch.COUNTERS.records == 0  # nothing deferred, no batch record


def test_getitems_and_a_custom_collate_are_used() -> None:
    class Batched:
        def __getitems__(self, index: list[int]) -> list[int]:
            return [i * 10 for i in index]

    replaced = fetch.make_fetch(lambda *_: None, lambda: True)
    assert replaced(_fetcher(Batched(), collate_fn=sum), [1, 2]) == 30


def test_without_auto_collation_the_index_goes_to_the_dataset_whole() -> None:
    replaced = fetch.make_fetch(lambda *_: None, lambda: True)
    fetcher = _fetcher({"a": np.arange(3)}, collate_fn=lambda x: x, auto=False)
    assert replaced(fetcher, "a").tolist() == [0, 1, 2]


def test_an_error_without_deferred_values_propagates() -> None:
    class Broken:
        def __getitem__(self, index: int) -> Any:
            raise KeyError(index)

    replaced = fetch.make_fetch(lambda *_: None, lambda: True)
    with pytest.raises(KeyError):
        replaced(_fetcher(Broken()), [0])
    assert fetch.COUNTERS.retried == 0


def test_random_state_is_restored_for_a_retry() -> None:
    np.random.seed(5)
    states = random_states.capture()
    first = (np.random.random(), torch.rand(1).item())
    random_states.restore(states)
    assert (np.random.random(), torch.rand(1).item()) == first


def test_random_states_held_by_an_outer_fetch_are_shared_until_it_releases_them() -> None:
    np.random.seed(3)
    outer, taken = random_states.hold()
    np.random.random()  # a draw inside the batch: a nested hold still gives the batch's start
    inner, inner_taken = random_states.hold()
    assert taken and not inner_taken and inner is outer
    random_states.release(inner_taken)
    assert random_states.hold()[0] is outer
    random_states.release(taken)
    fresh, fresh_taken = random_states.hold()
    random_states.release(fresh_taken)
    assert fresh_taken and fresh is not outer
    assert not np.array_equal(fresh[1][1], outer[1][1])  # taken again, after the draw
