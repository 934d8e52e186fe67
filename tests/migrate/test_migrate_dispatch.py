"""One owner of the replaced functions and the DataLoader fetch: layers nested in one order."""

from __future__ import annotations

import functools
import pickle
from collections.abc import Callable, Mapping
from typing import Any

import cv2
import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, Dataset
from torch.utils.data._utils.fetch import _MapDatasetFetcher

from codedag.errors import MigrationError
from codedag.migrate.dispatch import FETCH, ITERABLE_FETCH, ITERATOR, ORDER, Dispatch
from codedag.migrate.patched_runtime import PatchedRuntime
from codedag.patching import Patcher, active_patches, like_original

ORIGINAL_FETCH = _MapDatasetFetcher.fetch


class Part(PatchedRuntime):
    """A part that records the order its layers run in."""

    def __init__(self, section: str, functions: list[str], log: list[str]) -> None:
        super().__init__()
        self.section = section
        self._functions = functions
        self.log = log
        self.events: list[str] = []

    @property
    def active(self) -> bool:
        return True

    def functions(self) -> list[str]:
        return list(self._functions)

    def hooks(self) -> list[str]:
        return [FETCH]

    def layer(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def replacement(*args: Any, **kwargs: Any) -> Any:
            self.log.append(f"{self.section}:{name.rsplit('.', 1)[-1]}")
            return original(*args, **kwargs)

        return like_original(replacement, original)  # pickled by name, as the parts' are

    def before_patching(self) -> None:
        self.events.append("before")

    def after_patching(self, failed: Mapping[str, str]) -> None:
        super().after_patching(failed)
        self.events.append(f"after {list(failed)}")

    def after_restore(self) -> None:
        super().after_restore()
        self.events.append("restored")


def test_layers_of_every_part_nest_in_the_declared_order_on_one_patch() -> None:
    import json

    log: list[str] = []
    parts = [Part(s, ["json.dumps"], log) for s in reversed(ORDER)]  # given in any order
    dispatch = Dispatch(parts)
    dispatch.apply()
    try:
        assert json.dumps([1]) == "[1]"
        assert log == [f"{section}:dumps" for section in ORDER]  # outermost first
        assert "plan:json.dumps" in active_patches()
        # dumps, the fetch, and where a data set's references are rebound: the iterable data
        # sets' fetch and where a loader makes its iterator
        assert sum(name.startswith("plan:") for name in active_patches()) == 4
    finally:
        assert dispatch.restore() == 4
    assert json.dumps([1]) == "[1]" and len(log) == len(ORDER)
    assert _MapDatasetFetcher.fetch is ORIGINAL_FETCH
    assert all(p.events == ["before", "after []", "restored"] for p in parts)


def test_a_function_absent_here_is_left_out_for_the_parts_that_want_it() -> None:
    log: list[str] = []
    cache = Part("cache", ["json.dumps", "nosuchmodule.f"], log)
    tables = Part("tables", ["json.loads"], log)
    dispatch = Dispatch([cache, tables])
    failed = dispatch.apply()
    try:
        assert list(failed) == ["cache"] and "nosuchmodule" in failed["cache"]["nosuchmodule.f"]
        assert list(cache.failed) == ["nosuchmodule.f"] and tables.failed == {}
        assert cache.counts() == {"patched": 2, "failed": 1}
    finally:
        dispatch.restore()


def test_a_hook_held_by_another_patcher_undoes_everything() -> None:
    import json

    other = Patcher("someone-else")
    other.patch(FETCH, lambda original: lambda *args: original(*args))
    try:
        part = Part("cache", ["json.dumps"], [])
        dispatch = Dispatch([part])
        with pytest.raises(MigrationError, match=r"cache section.*fetch is already replaced"):
            dispatch.apply()
        assert not dispatch.applied
        assert not any(p.startswith("plan:") for p in active_patches())
        assert json.dumps.__module__ == "json"
        assert part.events == ["before", "restored"]
    finally:
        other.restore()


def test_a_part_applied_alone_restores_alone() -> None:
    import json

    part = Part("tables", ["json.dumps"], [])
    assert part.apply() == {"patched": 2, "failed": 0}  # dumps and its fetch (names it asked)
    assert part.apply() == {"patched": 0, "failed": 0}  # a second call does nothing
    try:
        assert part.patched_names() == sorted([FETCH, ITERABLE_FETCH, ITERATOR, "json.dumps"])
    finally:
        assert part.restore() == 4
    assert part.patched_names() == []
    assert json.dumps([]) == "[]" and _MapDatasetFetcher.fetch is ORIGINAL_FETCH


class Converting(Dataset):  # type: ignore[type-arg]
    """Its transform a ``functools.partial`` of a cv2 function (cv2 gives it no module)."""

    def __init__(self) -> None:
        self.steps = [functools.partial(cv2.cvtColor, code=cv2.COLOR_BGR2RGB)]

    def __len__(self) -> int:
        return 2

    def __getitem__(self, index: int) -> torch.Tensor:
        image = np.full((4, 4, 3), (index, 2, 3), np.uint8)
        for step in self.steps:
            image = step(image)
        return torch.from_numpy(image)


def test_a_data_sets_partial_reaches_the_replacement_and_pickles_while_applied() -> None:
    log: list[str] = []
    original = cv2.cvtColor
    dataset = Converting()
    dispatch = Dispatch([Part("calls", ["cv2.cvtColor"], log)])
    dispatch.apply()
    try:
        # held where no module scan reaches, the original could not be pickled now: pickle
        # finds a function without a module by looking for it in every module
        with pytest.raises(pickle.PicklingError):
            pickle.dumps(functools.partial(original))
        loader = DataLoader(dataset, batch_size=2)
        iterator = iter(loader)  # where spawned workers would pickle the data set
        assert pickle.loads(pickle.dumps(dataset)).steps[0].keywords == {"code": cv2.COLOR_BGR2RGB}
        batch = next(iterator)
        assert log == ["calls:fetch", "calls:cvtColor", "calls:cvtColor"]
        assert batch[1, 0, 0].tolist() == [3, 2, 1]
    finally:
        dispatch.restore()
    assert dataset.steps[0].func is original is cv2.cvtColor
    pickle.dumps(dataset)


def test_the_data_sets_reached_are_not_kept_alive_by_the_plan() -> None:
    import gc
    import weakref

    dispatch = Dispatch([Part("calls", ["cv2.cvtColor"], [])])
    dispatch.apply()
    try:
        dataset = Converting()  # a script may build a new data set every epoch
        next(iter(DataLoader(dataset, batch_size=2)))
        gone = weakref.ref(dataset)
        del dataset
        gc.collect()
        assert gone() is None
    finally:
        dispatch.restore()


def test_a_data_set_is_walked_once_where_its_loader_starts_and_not_again_at_its_fetch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its loader's epoch start rebinds the data set's references; the fetch that follows (or
    the fetch of a worker forked between the two) has nothing left to rebind, and walking the
    data set and the pipeline's modules again cost each worker 5-10 ms at every epoch."""
    walks: list[int] = []
    rebind = Patcher.rebind_within

    def counted(self: Patcher, roots: Any) -> int:
        walks.append(len(list(roots)))
        return rebind(self, roots)

    monkeypatch.setattr(Patcher, "rebind_within", counted)
    dataset = Converting()
    dispatch = Dispatch([Part("calls", ["cv2.cvtColor"], [])])
    dispatch.apply()
    try:
        for _epoch in range(2):
            for _batch in DataLoader(dataset, batch_size=1):
                pass
        assert len(walks) == 1
    finally:
        dispatch.restore()
    dispatch.apply()  # applied again: walked again
    try:
        next(iter(DataLoader(dataset, batch_size=2)))
        assert len(walks) == 2
    finally:
        dispatch.restore()
