"""The lazy-value core: the recorded call, forcing once, and the one impersonation rule."""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pytest

from codedag.backends.batched.deferred import Lazy, deferring, source, wrap
from codedag.backends.batched.lazy_array import LazyArray
from codedag.backends.batched.lazy_tensor import LazyTensor
from codedag.backends.lazy_values import (
    MISSING,
    PENDING,
    Call,
    Impersonation,
    LazyValue,
    StandIn,
    holds,
    resolve_args,
    resolve_kwargs,
)
from codedag.migrate.cache.prefix_values import Lineage, PrefixValue
from codedag.migrate.tables.run_values import RunArray, RunValue
from codedag.store.meta import Meta


class _Session:
    def __init__(self) -> None:
        self.misses: list[tuple[str, str]] = []

    def miss(self, chain: str, reason: str) -> None:
        self.misses.append((chain, reason))


class _Chain:
    id = "c"
    cut_function = "never"
    cut_occurrence = 0


class _Counted(StandIn):
    """A minimal stand-in: a recorded call, computed once on first use."""

    __slots__ = ("_call", "uses")

    def __init__(self, call: Call) -> None:
        self._call = call
        self.uses: list[str] = []

    def _stands_for(self) -> type:
        return np.ndarray

    def _use(self, use: str, detail: str) -> Any:
        self.uses.append(use)
        return self._call.compute(lambda v: v._use("argument", ""))

    def _attribute(self, name: str) -> Any:
        return (2,) if name == "shape" else MISSING

    def _forced(self, function: Any, args: Any, kwargs: Any, detail: str) -> Any:
        return function(*resolve_args(args, _value), **resolve_kwargs(kwargs, _value))


def _value(value: Any) -> Any:
    return value._use("argument", "")


def test_each_value_declares_its_impersonation_and_type_stays_its_own() -> None:
    assert LazyArray.impersonation is LazyTensor.impersonation is Impersonation.OWN_TYPE
    assert PrefixValue.impersonation is RunValue.impersonation is Impersonation.STANDS_FOR
    assert RunArray.impersonation is Impersonation.SUBCLASS and issubclass(RunArray, np.ndarray)
    lazy = wrap(source(np.zeros((2, 3), np.uint8)))
    assert type(lazy) is LazyArray and not isinstance(lazy, np.ndarray)
    lineage = Lineage(_Chain(), _Session())
    deferred = PrefixValue(lineage, b"k", Meta("ndarray", (2, 3), "|u1"))
    assert type(deferred) is PrefixValue and isinstance(deferred, np.ndarray)
    assert isinstance(deferred, LazyValue) and deferred.shape == (2, 3)  # nothing computed
    assert deferred._value is PENDING


def test_a_call_computes_once_and_lets_go_of_its_arguments() -> None:
    calls: list[int] = []

    def double(x: np.ndarray) -> np.ndarray:
        calls.append(1)
        return x * 2

    value = _Counted(Call(double, (np.arange(2),), {}))
    assert len(value) == 2 and value.uses == []  # the recorded shape
    assert float(value.sum()) == 2.0
    assert np.asarray(value).tolist() == [0, 2] and calls == [1]
    assert value._call.args == () and value._call.function is None  # released
    assert value.uses == ["attribute", "conversion"]


def test_array_honours_numpy_copy_and_pickling_gives_the_value() -> None:
    value = _Counted(Call(np.ones, (2,), {}))
    forced = np.asarray(value)
    assert np.asarray(value) is forced and np.array(value) is not forced
    assert np.array(value, dtype=np.float32).dtype == np.float32
    assert pickle.loads(pickle.dumps(value)).tolist() == [1.0, 1.0]
    with pytest.raises(TypeError):
        len(_Counted(Call(np.float64, (1.0,), {}))[()])


def test_ufuncs_and_functions_without_a_record_run_on_computed_arguments() -> None:
    value = _Counted(Call(np.arange, (3,), {}))
    assert np.add(value, 1).tolist() == [1, 2, 3]
    assert np.concatenate([value, value]).tolist() == [0, 1, 2, 0, 1, 2]


def test_arguments_are_found_and_resolved_in_lists_and_keywords() -> None:
    value = _Counted(Call(np.zeros, (1,), {}))
    assert holds(([1, value],), {}, LazyValue) and holds((), {"x": value}, _Counted)
    assert not holds((np.zeros(1), [1, 2]), {"x": 3}, LazyValue)
    args = resolve_args(([value, 1],), _value)
    assert isinstance(args[0], list) and type(args[0][0]) is np.ndarray


def test_a_batched_value_forces_by_its_reasons_and_unpickles_as_a_deferred_one() -> None:
    with deferring():
        lazy = wrap(source(np.arange(4.0)))
        assert isinstance(lazy, Lazy) and len(lazy) == 4
        again = pickle.loads(pickle.dumps(lazy))
    assert isinstance(again, LazyArray) and float(again.sum()) == 6.0


def test_a_stand_in_hands_torch_functions_its_computed_value() -> None:
    torch = pytest.importorskip("torch")
    value = _Counted(Call(np.ones, (2,), {"dtype": np.float32}))
    with pytest.raises(TypeError, match=r"numpy\.ndarray"):  # torch takes tensors only
        torch.add(torch.ones(2), value)
    assert value.uses == ["argument"]
