"""Prefix values: deferred or computed calls of a cached chain, keyed, until the cut."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from prefix_support import StubChain, StubSession

import codedag.migrate.cache.prefix_values as prefix_values
from codedag.migrate.cache.prefix_values import Lineage, PrefixValue, has_prefix_value, step
from codedag.store.meta import Meta, meta_of


def _source(session: StubSession, array: np.ndarray) -> PrefixValue:
    return PrefixValue(Lineage(StubChain(), session), b"src", meta_of(array), array)


def test_a_computed_step_runs_and_keys_by_call_and_arguments() -> None:
    session = StubSession()
    source = _source(session, np.arange(6, dtype=np.int16).reshape(2, 3))  # uint8: a run
    doubled = source * 2
    assert isinstance(doubled, PrefixValue)
    assert doubled._done
    assert np.array_equal(np.asarray(doubled._value), np.arange(6).reshape(2, 3) * 2)
    again = _source(session, np.zeros((2, 3), np.int16)) * 2
    assert again._key == doubled._key  # same call, same argument, same source key
    assert (_source(session, np.zeros(1)) * 3)._key != doubled._key
    assert session.misses == []


def test_a_known_key_defers_the_call_and_the_header_answers_metadata() -> None:
    calls: list[int] = []

    def scale(array: np.ndarray) -> np.ndarray:
        calls.append(1)
        return array.astype(np.float32) / 2

    array = np.ones((4, 5), np.uint8)
    probe = step("scale", scale, (_source(StubSession(), array),), {})
    session = StubSession(known={probe._key: meta_of(np.zeros((4, 5), np.float32))})
    calls.clear()
    source = PrefixValue(
        Lineage(StubChain(), session), b"src", meta_of(array), call=(array.copy, (), {})
    )
    deferred = step("scale", scale, (source,), {})
    assert not deferred._done and calls == []
    assert deferred._call.args[0] is source  # the deferred call keeps its input, not a copy step
    assert deferred.shape == (4, 5) and deferred.ndim == 2 and len(deferred) == 4
    assert deferred.dtype == np.float32 and deferred.nbytes == 80
    assert "deferred" in repr(deferred)
    assert session.misses == []
    real = np.asarray(deferred)  # a use outside the chain: replay, then divergence
    assert calls == [1] and np.array_equal(real, np.full((4, 5), 0.5, np.float32))
    assert session.misses == [("prefix0", "conversion to an array")]


def test_the_cut_asks_the_session() -> None:
    session = StubSession()
    source = _source(session, np.ones(3))
    result = step("cut", np.negative, (source,), {})
    assert np.array_equal(result, -np.ones(3))
    assert len(session.cuts) == 1 and session.cuts[0][1] is False  # computed, not deferred


def test_values_of_two_sources_combined_diverge_both() -> None:
    session_a, session_b = StubSession(), StubSession()
    a, b = _source(session_a, np.ones(2)), _source(session_b, np.ones(2))
    total = a + b
    assert not isinstance(total, PrefixValue)
    assert np.array_equal(total, np.full(2, 2.0))
    assert session_a.misses == [("prefix0", "values of two sources combined")]
    assert session_b.misses == session_a.misses


def test_a_chain_diverges_once_and_is_computed_normally_after() -> None:
    session = StubSession()
    source = _source(session, np.array([1, 0, 2]))
    assert bool(source[0]) is True  # static index: recorded; truth test: diverges
    assert session.misses == [("prefix0", "truth value")]
    after = source + 1
    assert not isinstance(after, PrefixValue)
    assert session.misses == [("prefix0", "truth value")]


def test_indexing_with_an_array_diverges() -> None:
    session = StubSession()
    source = _source(session, np.arange(4))
    assert source[np.array([3, 0])].tolist() == [3, 0]
    assert session.misses == [("prefix0", "indexing with an array")]


def test_too_many_steps_diverge() -> None:
    session = StubSession()
    value: Any = _source(session, np.zeros(1))
    for _ in range(prefix_values.MAX_STEPS):
        value = value + 1
    assert isinstance(value, PrefixValue) and session.misses == []
    value = value + 1
    assert not isinstance(value, PrefixValue)
    assert session.misses == [("prefix0", "more calls than a chain may make before its cut")]
    assert float(value[0]) == prefix_values.MAX_STEPS + 1


def test_image_header_metadata() -> None:
    meta = Meta("pil", (10, 20, 3), "", "RGB")
    value = PrefixValue(Lineage(StubChain(), StubSession()), b"k", meta)
    assert (value.size, value.width, value.height, value.mode) == ((20, 10), 20, 10, "RGB")


def test_has_prefix_value_looks_into_lists_and_keywords() -> None:
    value = _source(StubSession(), np.zeros(1))
    assert has_prefix_value(([1, value],), {})
    assert has_prefix_value((), {"x": value})
    assert not has_prefix_value((np.zeros(1), [1, 2]), {"x": 3})
    assert prefix_values.concrete(([value, 1],))[0][1] == 1


def test_a_value_carries_the_keys_and_headers_of_its_chain_but_not_the_values() -> None:
    import gc
    import weakref

    session = StubSession()
    source = _source(session, np.arange(6, dtype=np.int16))  # uint8 would start a run
    doubled = source * 2
    ref = weakref.ref(doubled)
    halved = doubled / 2
    assert halved._lineage_metas() == (
        (halved._key, meta_of(np.zeros(6, np.float64)).to_bytes()),
        (doubled._key, meta_of(np.zeros(6, np.int16)).to_bytes()),
        (b"src", meta_of(np.zeros(6, np.int16)).to_bytes()),
    )
    assert halved._lineage_keys() == [halved._key, doubled._key, b"src"]
    del doubled
    gc.collect()
    assert ref() is None  # an intermediate user code dropped is freed


def test_the_cut_is_the_planned_occurrence_of_its_function() -> None:
    @dataclass
    class SecondAdd(StubChain):
        cut_function: str = "operator.add"
        cut_occurrence: int = 1

    session = StubSession()
    source = PrefixValue(Lineage(SecondAdd(), session), b"src", meta_of(np.zeros(2)), np.zeros(2))
    first = source + 1
    assert isinstance(first, PrefixValue) and session.cuts == []
    second = (first * 3) + 1  # the second add along this value's calls
    assert not isinstance(second, PrefixValue) and len(session.cuts) == 1
    assert np.array_equal(second, np.full(2, 4.0))
    other = source + 5  # another path from the source: its first add, no cut
    assert isinstance(other, PrefixValue) and len(session.cuts) == 1


def test_isinstance_sees_the_type_a_deferred_value_stands_for() -> None:
    from PIL import Image

    session = StubSession()
    lineage = Lineage(StubChain(), session)
    deferred = PrefixValue(lineage, b"k", Meta("ndarray", (2, 3), "|u1"))
    assert isinstance(deferred, np.ndarray) and type(deferred) is PrefixValue
    assert isinstance(deferred, PrefixValue) and not deferred._done  # nothing computed
    image = PrefixValue(lineage, b"i", Meta("pil", (4, 5, 3), "", "RGB"))
    assert isinstance(image, Image.Image) and not isinstance(image, np.ndarray)
    computed = _source(session, np.zeros((2, 2), np.float32))
    assert isinstance(computed, np.ndarray)
    assert session.misses == []


def test_a_value_nested_inside_an_argument_diverges_its_chain() -> None:
    session = StubSession()
    source = _source(session, np.zeros((2, 2), np.uint8))
    step("first", lambda items: items[0], ([source, [[source]]],), {})
    assert session.misses == [
        ("prefix0", "arguments: a value of a chain nested inside an argument")
    ]
    assert session.never == [
        ("prefix0", "first's arguments: a value of a chain nested inside an argument")
    ]  # counted towards giving the chain up


def _deferred_source(session: StubSession, array: np.ndarray) -> PrefixValue:
    lineage = Lineage(StubChain(), session)
    return PrefixValue(lineage, b"src", meta_of(array), call=(array.copy, (), {}))


def test_a_deferred_step_reads_its_header_only_when_asked_and_once() -> None:
    array = np.ones((4, 5), np.uint8)
    probe = step("scale", np.negative, (_source(StubSession(), array),), {})
    session = StubSession(known={probe._key: meta_of(np.zeros((4, 5), np.uint8))})
    source = _deferred_source(session, array)
    deferred = step("scale", np.negative, (source,), {})
    doubled = deferred * 2
    assert session.asked == [] and not deferred._done and not doubled._done
    assert deferred.shape == (4, 5) and deferred.dtype == np.uint8
    assert isinstance(deferred, np.ndarray) and "(4, 5)" in repr(deferred)
    assert session.asked == [probe._key] and not deferred._done  # read once, nothing computed
    assert doubled._lineage_keys() == [doubled._key, probe._key, b"src"]
    assert session.misses == []


def test_a_header_the_store_lacks_computes_the_value_and_the_chain_goes_on_computed() -> None:
    calls: list[int] = []

    def scale(array: np.ndarray) -> np.ndarray:
        calls.append(1)
        return array.astype(np.float32) / 2

    session = StubSession()
    source = _deferred_source(session, np.ones((2, 3), np.uint8))
    deferred = step("scale", scale, (source,), {})
    assert calls == [] and not deferred._done
    assert deferred.shape == (2, 3) and calls == [1] and deferred._done
    after = deferred + 1
    assert after._done and np.array_equal(after._value, np.full((2, 3), 1.5, np.float32))
    assert session.asked == [deferred._key] and session.misses == []
    # the headers a miss stores: every value of the chain, computed ones included
    assert [k for k, _ in after._lineage_metas()] == [after._key, deferred._key, b"src"]
    assert after._lineage_metas()[1][1] == meta_of(np.zeros((2, 3), np.float32)).to_bytes()


def test_a_deferred_value_replayed_at_the_cut_stores_every_header_of_its_chain() -> None:
    session = StubSession()
    source = _deferred_source(session, np.arange(6, dtype=np.int16))
    halved = step("halve", np.divide, (source, 2), {})
    shifted = step("shift", np.add, (halved, 1), {})
    assert session.asked == [] and shifted._lineage_metas() == (
        (b"src", meta_of(np.zeros(6, np.int16)).to_bytes()),
    )
    assert np.array_equal(prefix_values.concrete((shifted,))[0], np.arange(6) / 2 + 1)
    assert shifted._lineage_metas() == (
        (shifted._key, meta_of(np.zeros(6)).to_bytes()),
        (halved._key, meta_of(np.zeros(6)).to_bytes()),
        (b"src", meta_of(np.zeros(6, np.int16)).to_bytes()),
    )
    assert session.asked == []


def test_a_stale_header_read_when_asked_is_touched_on_a_hit() -> None:
    array = np.ones(3, np.uint8)
    probe = step("neg", np.negative, (_source(StubSession(), array),), {})
    session = StubSession(known={probe._key: meta_of(array)}, stale={probe._key})
    deferred = step("neg", np.negative, (_deferred_source(session, array),), {})
    assert deferred._lineage.stale == []
    assert deferred.ndim == 1 and deferred._lineage.stale == [probe._key]


def test_an_attribute_error_replaying_for_a_header_is_not_taken_for_a_missing_attribute() -> None:
    def broken(array: np.ndarray) -> np.ndarray:
        raise AttributeError("inside the library")

    session = StubSession()
    deferred = step("broken", broken, (_deferred_source(session, np.ones(2)),), {})
    with pytest.raises(prefix_values.HeaderError, match="inside the library"):
        hasattr(deferred, "shape")
    with pytest.raises(prefix_values.HeaderError):
        isinstance(deferred, np.ndarray)


def test_a_header_the_store_cannot_read_is_not_taken_for_a_missing_attribute() -> None:
    class Unreadable(StubSession):
        def meta(self, key: bytes) -> tuple[Meta, bool] | None:
            raise AttributeError("'list' object has no attribute 'get'")  # a header not a dict

    session = Unreadable()
    deferred = step("neg", np.negative, (_deferred_source(session, np.ones(2)),), {})
    with pytest.raises(prefix_values.HeaderError, match="no attribute 'get'"):
        hasattr(deferred, "ndim")
