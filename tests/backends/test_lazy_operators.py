"""One operator installer for the lazy values: the declared sets, the factories, what is left out."""

from __future__ import annotations

import operator
from typing import Any

import cv2
import numpy as np
import pytest

from codedag.backends.batched.deferred import LazyArray, deferring
from codedag.backends.batched.wrappers import EntryMatcher, chain_function
from codedag.backends.lazy_operators import (
    BINARY,
    COMPARISONS,
    OPERATORS,
    UNARY,
    dunder,
    in_place,
    install_operators,
)
from codedag.errors import ConfigError
from codedag.migrate.cache.prefix_values import PrefixValue
from codedag.migrate.tables.run_values import RunValue


class _Recorder:
    """Every operator answers what was asked: (kind, name, operands)."""

    def __init__(self, label: str) -> None:
        self.label = label

    def __repr__(self) -> str:
        return self.label


def _binary(kind: str) -> Any:
    def factory(name: str) -> Any:
        def method(self: Any, other: Any) -> Any:
            return (kind, name, self, other)

        return method

    return factory


def _unary(name: str) -> Any:
    def method(self: Any) -> Any:
        return ("unary", name, self)

    return method


def _install(cls: type, left_out: dict[str, str] | None = None) -> None:
    install_operators(
        cls,
        forward=_binary("forward"),
        reflected=_binary("reflected"),
        inplace=_binary("inplace"),
        comparison=_binary("comparison"),
        unary=_unary,
        left_out=left_out,
    )


def test_every_operator_runs_the_factory_method_of_its_name() -> None:
    class Value(_Recorder):
        pass

    _install(Value)
    x: Any = Value("x")
    assert x + 1 == ("forward", "add", x, 1)
    assert 1 + x == ("reflected", "add", x, 1)
    assert x & 1 == ("forward", "and_", x, 1)
    assert 1 | x == ("reflected", "or_", x, 1)
    assert x << 2 == ("forward", "lshift", x, 2)
    assert x @ 2 == ("forward", "matmul", x, 2)
    assert (x < 1) == ("comparison", "lt", x, 1)
    assert operator.lt(1, x) == ("comparison", "gt", x, 1)  # Python reflects it itself
    assert -x == ("unary", "neg", x) and ~x == ("unary", "invert", x)
    y = x
    y ^= 3
    assert y == ("inplace", "xor", x, 3)
    assert Value.__hash__ is None
    with pytest.raises(TypeError, match="unhashable"):
        hash(x)


def test_the_installed_methods_are_the_declared_sets_named_as_methods() -> None:
    class Value(_Recorder):
        pass

    _install(Value)
    expected = {dunder(n, k) for n in BINARY for k in ("", "r", "i")}
    expected |= {dunder(n) for n in (*COMPARISONS, *UNARY)}
    assert expected <= set(vars(Value))
    assert "__rlt__" not in vars(Value) and "__ilt__" not in vars(Value)
    assert vars(Value)["__iand__"].__name__ == "__iand__"
    assert vars(Value)["__radd__"].__qualname__.endswith("Value.__radd__")


def test_left_out_operators_are_not_installed() -> None:
    class Value(_Recorder):
        pass

    _install(Value, {"lshift": "not recorded", "matmul": "not recorded", "abs": "not recorded"})
    for name in ("__lshift__", "__rlshift__", "__ilshift__", "__matmul__", "__abs__"):
        assert name not in vars(Value)
    x: Any = Value("x")
    with pytest.raises(TypeError):
        x << 2
    assert (x >> 2)[:2] == ("forward", "rshift")


@pytest.mark.parametrize(
    ("left_out", "message"),
    [({"lshfit": "a typo"}, "not among"), ({"lshift": " "}, "need a reason")],
)
def test_a_left_out_name_must_be_an_operator_with_a_reason(
    left_out: dict[str, str], message: str
) -> None:
    class Value(_Recorder):
        pass

    with pytest.raises(ConfigError, match=message):
        _install(Value, left_out)


def test_in_place_is_operators_in_place_function() -> None:
    assert in_place("and_") is operator.iand and in_place("add") is operator.iadd
    assert dunder("and_", "r") == "__rand__" and dunder("pow", "i") == "__ipow__"


# -- the three lazy-value classes ---------------------------------------------------------------

_LEFT_OUT = {
    LazyArray: {"matmul", "lshift", "rshift"},
    PrefixValue: {"lshift", "rshift"},
    RunValue: set(),
}


@pytest.mark.parametrize("cls", list(_LEFT_OUT), ids=lambda c: c.__name__)
def test_each_lazy_class_has_the_declared_operators_less_its_left_out(cls: type) -> None:
    for name in sorted(OPERATORS):
        kinds = ("", "r", "i") if name in BINARY else ("",)
        for kind in kinds:
            method = dunder(name, kind)
            if name in _LEFT_OUT[cls]:
                assert method not in vars(cls), method
            else:
                assert vars(cls)[method].__qualname__ == f"{cls.__qualname__}.{method}"
    assert cls.__hash__ is None


def test_a_deferred_arrays_operators_record_what_ndarrays_give() -> None:
    resize = chain_function("cv2.resize", cv2.resize, EntryMatcher("cv2.resize", [], []))
    image = np.arange(48, dtype=np.uint8).reshape(4, 4, 3)
    plain = image[:2, :2].astype(np.float32)
    with deferring():
        x: Any = resize(image, (2, 2)).astype(np.float32)
        mask = x > 20.0
        results = {
            "x + 1.0": (x + 1.0, plain + 1.0),
            "2.0 - x": (2.0 - x, 2.0 - plain),
            "x < 9.0": (x < 9.0, plain < 9.0),
            "-x": (-x, -plain),
            "mask ** 2": (mask**2, (plain > 20.0) ** 2),  # ndarray squares bools: int8
            "mask & mask": (mask & mask, plain > 20.0),
        }
        for label, (got, want) in results.items():
            assert isinstance(got, LazyArray) and not got._node.done, label
            assert (got.shape, got.dtype) == (want.shape, want.dtype), label
        with pytest.raises(TypeError):
            x << 2  # left out: not recorded, as before the installer
    assert not isinstance(x, np.ndarray) and type(x) is LazyArray
