"""NumPy's answers about result dtypes, asked on 0-d probes and remembered per argument types,
and the declared checks' building blocks: the remembered answer is NumPy's own for every kind of
argument, errors included, and a passing check formats no reason."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from codedag.backends.ops.numpy import _common
from codedag.backends.ops.numpy._checks import computable, probe, refuse
from codedag.backends.ops.numpy._common import numpy_answer, probe_dtype, result_type
from codedag.errors import UnsupportedOperation


class _Counting:
    """A NumPy function that counts its calls."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.calls = 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        return self.fn(*args, **kwargs)


ARGUMENTS: list[tuple[Any, ...]] = [
    (np.zeros(3, np.uint8), np.zeros(3, np.uint8)),
    (np.zeros(3, np.uint8), 1.5),
    (np.zeros(3, np.uint8), 3),
    (np.zeros(3, np.int8), np.zeros(3, np.uint8)),
    (np.zeros(3, np.float32), np.float64(2.0)),
    (np.zeros(3, np.float16), 2.5j),
    (np.zeros(3, bool), True),
    (torch.zeros(3, dtype=torch.int16), np.zeros(3, np.float32)),
    ([np.zeros(2, np.int32), np.zeros(2, np.float32)], 0),
]


@pytest.mark.parametrize("args", ARGUMENTS, ids=range(len(ARGUMENTS)))
def test_answers_are_numpys_and_are_asked_once(args: tuple[Any, ...]) -> None:
    fn = _Counting(np.stack if isinstance(args[0], list) else np.add)
    probes = [np.asarray(a.numpy()) if isinstance(a, torch.Tensor) else a for a in args]
    want = np.asarray(fn.fn(*probes)).dtype
    assert numpy_answer(fn, args, {}) == want
    assert numpy_answer(fn, args, {}) == want
    assert fn.calls == 1


def test_errors_are_remembered_with_numpys_message() -> None:
    fn = _Counting(np.add)
    small = np.zeros(2, np.uint8)
    for _ in range(2):
        with pytest.raises(UnsupportedOperation, match="out of bounds for uint8"):
            numpy_answer(fn, (small, 300), {})
    assert fn.calls == 1
    assert numpy_answer(fn, (small, 3), {}) == np.uint8  # Python ints: their value decides
    with pytest.raises(UnsupportedOperation, match="NumPy refuses these argument types"):
        probe(np.add, small, 300)
    with pytest.raises(UnsupportedOperation, match="NumPy rejects these argument types"):
        probe_dtype(np.add, torch.zeros(2, dtype=torch.uint8), 300)


def test_python_floats_are_remembered_by_type_and_other_values_by_value() -> None:
    fn = _Counting(np.multiply)
    image = np.zeros((2, 2), np.uint8)
    for gain in (0.5, 1.25, 7.0):
        assert numpy_answer(fn, (image, gain), {}) == np.float64
    assert fn.calls == 1
    assert numpy_answer(fn, (image, np.float32(0.5)), {}) == np.float32
    assert numpy_answer(fn, (image, np.float32(2.0)), {}) == np.float32
    assert fn.calls == 3


def test_keyword_arguments_and_unhashable_values() -> None:
    fn = _Counting(np.add)
    a = np.zeros(2, np.int16)
    assert numpy_answer(fn, (a, a), {"dtype": np.float32}) == np.float32
    assert numpy_answer(fn, (a, a), {}) == np.int16
    assert fn.calls == 2

    class Odd(np.ndarray):
        pass

    odd = np.zeros(2, np.float32).view(Odd)
    assert numpy_answer(fn, (odd, a), {}) == np.float32  # answered, not remembered
    assert numpy_answer(fn, (odd, a), {}) == np.float32
    assert fn.calls == 4

    class Changing:
        """Hashable, with an ``__array__`` whose dtype changes: never remembered."""

        dtype = np.int16

        def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
            return np.zeros(2, self.dtype)

    value = Changing()
    assert numpy_answer(fn, (a, value), {}) == np.int16
    value.dtype = np.float64
    assert numpy_answer(fn, (a, value), {}) == np.float64
    assert fn.calls == 6


def test_probes_of_numpy_functions_are_remembered() -> None:
    from codedag.backends.ops.numpy._common import on_one_element

    fn = _Counting(on_one_element)
    a = np.zeros(3, np.int32)
    for _ in range(3):  # numpy.mean is an array-function dispatcher, not a Python function
        assert numpy_answer(fn, (a, np.mean), {"dtype": np.float32}) == np.float32
    assert fn.calls == 1


def test_result_type_returns_the_dtype_numpy_names() -> None:
    assert result_type(torch.zeros(2, dtype=torch.bool), True) == np.bool_
    assert result_type(torch.zeros(2, dtype=torch.uint8), 2.0) == np.float64


def test_the_remembered_answers_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_common, "_ANSWERS", {})
    monkeypatch.setattr(_common, "_MAX_ANSWERS", 4)
    a = np.zeros(2, np.int64)
    for value in range(10):
        numpy_answer(np.add, (a, value), {})
        assert len(_common._ANSWERS) <= 4


def test_a_passing_check_formats_no_reason() -> None:
    class Loud:
        def __format__(self, spec: str) -> str:
            raise AssertionError("formatted")

    refuse(False, "dtype {}", Loud())
    with pytest.raises(UnsupportedOperation, match=r"^dtype float32: no$"):
        refuse(True, "dtype {}: {}", np.dtype(np.float32), "no")
    with pytest.raises(UnsupportedOperation, match=r"^a \{literal\} reason$"):
        refuse(True, "a {literal} reason")


def test_computable_dtypes() -> None:
    assert computable(np.dtype(np.float32)) and computable(np.dtype(bool))
    assert computable(np.dtype(">f4"))  # by name, as declared: the adapter refuses byte order
    assert not computable(np.dtype(np.uint16)) and not computable(np.dtype(object))
    assert not computable(np.dtype("datetime64[s]"))
