"""References a module scan does not reach: a data set's transforms, ``functools.partial``
objects binding a patched function, rebound for the patch and put back at restore."""

from __future__ import annotations

import functools
import sys
import types
from collections.abc import Iterator
from typing import Any

import pytest

from codedag.patching import Patcher


def _scale(x: float, factor: float = 2.0) -> float:
    return x * factor


@pytest.fixture
def library() -> Iterator[types.ModuleType]:
    module = types.ModuleType("reach_fake_library")
    module.scale = _scale  # type: ignore[attr-defined]
    sys.modules[module.__name__] = module
    yield module
    del sys.modules[module.__name__]


class Compose:
    def __init__(self, steps: list[Any]) -> None:
        self.steps = steps

    def __call__(self, x: float) -> float:
        for step in self.steps:
            x = step(x)
        return x


class Dataset:
    def __init__(self, transform: Any) -> None:
        self.transform = transform
        self.paths = [f"{i}.png" for i in range(10_000)]  # data: not searched

    def __getitem__(self, i: int) -> float:
        return self.transform(float(i))


def _counting(calls: list[tuple[Any, ...]]) -> Any:
    def factory(original: Any) -> Any:
        def replacement(*args: Any, **kwargs: Any) -> Any:
            calls.append(args)
            return original(*args, **kwargs)

        return replacement

    return factory


def test_partials_in_a_data_sets_transforms_call_the_replacement_until_restore(
    library: types.ModuleType,
) -> None:
    bound = functools.partial(library.scale, factor=3.0)
    bound.note = "kept"  # type: ignore[attr-defined]
    in_tuple = functools.partial(library.scale, 0.5)
    registry = {"twice": library.scale}
    dataset = Dataset(Compose([bound]))
    dataset.extras = ((in_tuple,), registry)  # type: ignore[attr-defined]
    calls: list[tuple[Any, ...]] = []
    patcher = Patcher("test")
    patcher.patch("reach_fake_library.scale", _counting(calls))
    try:
        assert dataset[2] == 6.0 and calls == []  # the partial holds the original
        assert patcher.rebind_within([dataset]) == 3  # both partials and the dict item
        assert dataset[2] == 6.0 and calls == [(2.0,)]
        assert bound.keywords == {"factor": 3.0} and bound.note == "kept"  # type: ignore[attr-defined]
        assert registry["twice"] is not _scale
        assert in_tuple() == 1.0 and len(calls) == 2
        assert patcher.rebind_within([dataset]) == 0  # already rebound
    finally:
        patcher.restore()
    assert bound.func is _scale and in_tuple.func is _scale and registry["twice"] is _scale
    assert dataset[2] == 6.0 and len(calls) == 2


def test_a_modules_namespace_objects_and_classes_are_reached(library: types.ModuleType) -> None:
    user = types.ModuleType("reach_user_module")
    user.scale = library.scale  # type: ignore[attr-defined]  # from library import scale
    user.TRAIN = Compose([functools.partial(library.scale, factor=4.0)])  # type: ignore[attr-defined]

    class Holder:
        plain = _scale
        wrapped = staticmethod(_scale)

    Holder.__module__ = user.__name__
    user.Holder = Holder  # type: ignore[attr-defined]
    patcher = Patcher("test")
    patcher.patch("reach_fake_library.scale", _counting([]), rebind_references=False)
    try:
        assert patcher.rebind_within([user]) == 3
        assert user.scale is not _scale and user.TRAIN.steps[0].func is not _scale  # type: ignore[attr-defined]
        assert vars(Holder)["plain"] is not _scale
        assert vars(Holder)["wrapped"].__func__ is _scale  # put back, it would lose its wrapper
    finally:
        patcher.restore()
    assert user.scale is _scale and user.TRAIN.steps[0].func is _scale  # type: ignore[attr-defined]
    assert vars(Holder)["plain"] is _scale


def test_the_walk_stops_at_its_depth_and_at_big_containers(library: types.ModuleType) -> None:
    deep: Any = functools.partial(library.scale)
    for _ in range(6):
        deep = [deep]
    big = [*range(1000), functools.partial(library.scale)]
    patcher = Patcher("test")
    patcher.patch("reach_fake_library.scale", _counting([]), rebind_references=False)
    try:
        assert patcher.rebind_within([deep, big]) == 0
        assert patcher.rebind_within([deep[0][0][0]]) == 1  # four levels down from here
    finally:
        patcher.restore()


def test_the_standard_librarys_objects_are_not_walked_but_its_containers_are(
    library: types.ModuleType,
) -> None:
    import logging
    import types as builtin_types

    logger = logging.getLogger("reach-test")
    logger.odd = functools.partial(library.scale)  # type: ignore[attr-defined]
    config = builtin_types.SimpleNamespace(
        resize=functools.partial(library.scale, factor=2.0), log=logger
    )
    patcher = Patcher("test")
    patcher.patch("reach_fake_library.scale", _counting([]), rebind_references=False)
    try:
        assert patcher.rebind_within([config]) == 1  # a logger holds no transform
        assert config.resize.func is not _scale
        assert logger.odd.func is _scale  # type: ignore[attr-defined]
    finally:
        patcher.restore()
        del logger.odd  # type: ignore[attr-defined]


def test_codedags_own_objects_are_not_walked(library: types.ModuleType) -> None:
    """A script that keeps its migrator in a module global: the walk from that module must not
    point a placed call's fallback (the original it holds) at the replacement, which would then
    call itself once the call falls back."""
    from codedag.util.import_draws import ImportDraw

    held = ImportDraw(library.scale, "holds the original")  # type: ignore[arg-type]
    holder = types.SimpleNamespace(migrator=held, transform=functools.partial(library.scale))
    patcher = Patcher("test")
    patcher.patch("reach_fake_library.scale", _counting([]), rebind_references=False)
    try:
        assert patcher.rebind_within([holder]) == 1  # the partial, not the record
        assert holder.transform.func is not _scale
        assert held.module is _scale
    finally:
        patcher.restore()
