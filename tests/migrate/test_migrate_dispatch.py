"""One owner of the replaced functions and the DataLoader fetch: layers nested in one order."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest
from torch.utils.data._utils.fetch import _MapDatasetFetcher

from codedag.errors import MigrationError
from codedag.migrate.dispatch import FETCH, ITERABLE_FETCH, ORDER, Dispatch
from codedag.migrate.patched_runtime import PatchedRuntime
from codedag.patching import Patcher, active_patches

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

        return replacement

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
        # dumps, the fetch, and the iterable data sets' fetch (a data set's references)
        assert sum(name.startswith("plan:") for name in active_patches()) == 3
    finally:
        assert dispatch.restore() == 3
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
        assert part.patched_names() == sorted([FETCH, ITERABLE_FETCH, "json.dumps"])
    finally:
        assert part.restore() == 3
    assert part.patched_names() == []
    assert json.dumps([]) == "[]" and _MapDatasetFetcher.fetch is ORIGINAL_FETCH
