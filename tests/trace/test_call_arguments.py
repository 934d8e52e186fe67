"""Operators computed in the arguments of a user function's call are steps made as it starts:
they produce the value its parameter holds, which its own statements read."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from trace_core import traced

from codedag.trace import trace_dataloader
from codedag.trace.records import INFO, KIND, KIND_PY, KIND_STEP, NAME, SEQ
from codedag.trace.statements import statements_of

SCALE = np.float32(0.5)


def _normalized(x: np.ndarray) -> torch.Tensor:
    y = (x - 0.5) / 0.25
    return torch.from_numpy(np.ascontiguousarray(y))


class _Images(torch.utils.data.Dataset):  # type: ignore[type-arg]
    def __len__(self) -> int:
        return 4

    def _norm(self, x: np.ndarray) -> np.ndarray:
        y = x * SCALE
        return y

    def __getitem__(self, index: int) -> tuple[torch.Tensor, np.ndarray]:
        img = np.full((4, 4, 3), index, dtype=np.uint8)
        x = np.asarray(img, dtype=np.float32)
        return _normalized(np.asarray(img, dtype=np.float32) / 255.0), self._norm(x * 2.0 - 1.0)


def _producer(dag: Any, value: int) -> str:
    (call,) = dag.predecessors(value, "produces")
    return str(dag.call(call).name)


def _inputs(dag: Any, call: int) -> list[str]:
    """Names of the calls that produced what ``call`` used."""
    return [_producer(dag, v) for v in dag.predecessors(call, "uses") if _has_producer(dag, v)]


def _has_producer(dag: Any, value: int) -> bool:
    return bool(dag.predecessors(value, "produces"))


def test_operators_in_a_helpers_arguments_feed_its_statements() -> None:
    loader = torch.utils.data.DataLoader(_Images(), batch_size=2, num_workers=0)
    tracer, _ = trace_dataloader(loader)
    dag = tracer.dag
    dag.self_check()
    calls = {c.id: c.name for c in dag.calls()}
    first = next(i for i, n in sorted(calls.items()) if n.endswith("_Images.__getitem__"))
    sample = [i for i in sorted(calls) if i > first][:20]
    by_name: dict[str, list[int]] = {}
    for i in sample:
        by_name.setdefault(calls[i].rsplit(".", 1)[-1], []).append(i)
    (div, inner_div) = by_name["truediv"][:2]
    assert _inputs(dag, div) == ["numpy.asarray"]  # / 255.0 reads the asarray value
    helper = by_name["_normalized"][0]
    assert div < helper < inner_div  # made before the helper starts, read inside it
    assert "operator.truediv" in _inputs(dag, helper)
    assert _inputs(dag, inner_div) == ["operator.truediv"]  # (x - 0.5) / 0.25 reads x
    # self._norm(x * 2.0 - 1.0): one step (named after its outermost operator) made before
    # the method starts, read by the method's y = x * SCALE
    (sub,) = by_name["sub"]
    (norm,) = by_name["_norm"]
    (mul,) = by_name["mul"]
    assert sub < norm < mul
    assert _inputs(dag, sub) == ["numpy.asarray"]
    assert _inputs(dag, norm) == _inputs(dag, mul) == ["operator.sub"]


def _helper(x: np.ndarray) -> np.ndarray:
    y = x + 1.0
    return y


def _sum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return _helper(a * 2.0)[0] + _helper(np.flip(b) / 255.0)


def _steps(session: Any) -> list[list[Any]]:
    return [r for r in session.calls if r[KIND] == KIND_STEP]


def _produced(session: Any, seq: int) -> list[int]:
    return [v for c, v in session.produces if c == seq]


def _users(session: Any, vseq: int) -> list[int]:
    return [c for v, c in session.uses if v == vseq]


def test_nested_arguments_and_two_calls_of_one_helper_in_a_statement() -> None:
    s = traced(_sum, np.ones((2, 3)), np.zeros((2, 3)), line_level=True)
    steps = {r[SEQ]: r for r in _steps(s)}
    helpers = [r for r in s.calls if r[NAME].endswith("._helper") and r[KIND] == KIND_PY]
    flip = next(r for r in s.calls if r[NAME] == "numpy.flip")
    names = [r[NAME] for r in _steps(s)]
    assert names.count("operator.mul") == 1 and names.count("operator.truediv") == 1
    for helper, op in zip(helpers, ("operator.mul", "operator.truediv")):
        step = next(r for r in steps.values() if r[NAME] == op)
        assert step[SEQ] < helper[SEQ]
        (value,) = _produced(s, step[SEQ])
        assert helper[SEQ] in _users(s, value)
        inner_add = next(
            r for r in steps.values() if r[NAME] == "operator.add" and r[SEQ] > helper[SEQ]
        )
        assert inner_add[SEQ] in _users(s, value)  # the helper's y = x + 1.0 reads it
    div = next(r for r in steps.values() if r[NAME] == "operator.truediv")
    (flipped,) = _produced(s, flip[SEQ])
    assert div[SEQ] in _users(s, flipped)  # f(g(x) / 255.0): from the library call


def test_steps_made_as_a_call_starts_share_their_statements_unit() -> None:
    s = traced(_sum, np.ones((2, 3)), np.zeros((2, 3)), line_level=True)
    frame = next(r for r in s.calls if r[NAME].endswith("._sum"))
    outer = [r for r in _steps(s) if r[INFO][0][0] == frame[SEQ]]
    assert {r[NAME] for r in outer} == {"operator.mul", "operator.truediv", "operator.add"}
    assert len({r[INFO][:2] for r in outer}) == 1  # one statement: one unit, one time to share


class _Scaler:
    def scale(self, x: np.ndarray) -> np.ndarray:
        return x * 3.0

    @staticmethod
    def shift(x: np.ndarray) -> np.ndarray:
        return x + 3.0


def _methods(x: np.ndarray) -> np.ndarray:
    s = _Scaler()
    return s.scale(x - 1.0) + _Scaler.shift(x / 2.0)


def test_arguments_of_methods_bind_after_self() -> None:
    s = traced(_methods, np.ones(3), line_level=True)
    steps = {r[NAME]: r for r in _steps(s)}
    for op, inner, method in (
        ("operator.sub", "operator.mul", "._Scaler.scale"),
        ("operator.truediv", "operator.add", "._Scaler.shift"),
    ):
        (value,) = _produced(s, steps[op][SEQ])
        call = next(r for r in s.calls if r[NAME].endswith(method))
        users = _users(s, value)
        assert call[SEQ] in users
        assert any(r[SEQ] in users and r[NAME] == inner for r in _steps(s))  # x * 3.0, x + 3.0


def _nested(i: int) -> int:
    return _helper(_helper(i))  # type: ignore[arg-type, return-value]


def test_only_calls_with_computed_arguments_are_looked_at_as_they_start() -> None:
    (returned,) = [s for s in statements_of(_sum.__code__).by_line.values() if s.kind == "return"]
    assert returned.calls == {"_helper"}
    (plain,) = [s for s in statements_of(_nested.__code__).by_line.values() if s.kind == "return"]
    assert plain.calls == frozenset()  # nested calls of plain names: nothing computed around them
