"""Steps: what a statement computed outside recorded calls becomes a step record that uses the
values it read and produces the value it made."""

from __future__ import annotations

import numpy as np
from trace_core import traced

from codedag.trace.records import INFO, KIND, KIND_STEP, NAME, PARENT, SEQ


def _pipeline(x, canvas):  # type: ignore[no-untyped-def]
    y = x * 2
    canvas[0:2] = y[0:2]
    return np.flip(y)


def _steps(session) -> dict:  # type: ignore[no-untyped-def]
    return {r[NAME]: r for r in session.calls if r[KIND] == KIND_STEP}


def _produced_by(session, seq: int) -> list[int]:  # type: ignore[no-untyped-def]
    return [v for c, v in session.produces if c == seq]


def _users_of(session, vseq: int) -> list[int]:  # type: ignore[no-untyped-def]
    return [c for v, c in session.uses if v == vseq]


def test_an_operator_becomes_a_step_from_its_input_to_the_next_call() -> None:
    x, canvas = np.ones(4), np.zeros(4)
    s = traced(_pipeline, x, canvas, line_level=True)
    frame_rec = next(r for r in s.calls if r[NAME].endswith("_pipeline"))
    mul = _steps(s)["operator.mul"]
    assert mul[PARENT] == frame_rec[SEQ]
    x_node = next(v for v, c in s.uses if c == frame_rec[SEQ])  # the frame's first argument
    assert mul[SEQ] in _users_of(s, x_node)
    (y_node,) = _produced_by(s, mul[SEQ])
    flip = next(r for r in s.calls if r[NAME] == "numpy.flip")
    assert flip[SEQ] in _users_of(s, y_node)  # y flows from the step into np.flip


def test_a_subscript_store_produces_a_new_version_of_the_container() -> None:
    canvas = np.zeros(4)
    s = traced(_pipeline, np.ones(4), canvas, line_level=True)
    store = _steps(s)["operator.setitem"]
    (new,) = _produced_by(s, store[SEQ])
    version = next(v for v in s.values if v[0] == new)
    assert version[2] == 1  # version 1 of the canvas
    statement = store[INFO][0]
    assert statement[0] == store[PARENT]  # the statement unit belongs to the frame


MEAN = np.array([0.5, 0.25])


def _normalized(x):  # type: ignore[no-untyped-def]
    y = (x / 255.0 - MEAN) / (MEAN * 2)
    z = 1.0 - np.abs(y) * 2
    w = z - MEAN * 3
    return np.flip(w)


def test_a_step_of_several_operations_names_those_on_the_way_to_its_value() -> None:
    """The operations through each one's first data operand while that is an operation, in the
    order they ran: what a chain's value meets at run time (``MEAN * 2`` is another operand's)."""
    s = traced(_normalized, np.ones((3, 2)), line_level=True)
    steps = sorted((r[SEQ], r[NAME], r[INFO][2]) for r in s.calls if r[KIND] == KIND_STEP)
    paths = [(name, path) for _, name, path in steps]
    assert paths == [
        ("operator.truediv", ("operator.truediv", "operator.sub", "operator.truediv")),
        # an unrecorded call of the statement is an operation of the step, as it is a call at
        # run time; the constant 1.0 is no operation
        ("operator.sub", ("numpy.absolute", "operator.mul", "operator.sub")),
        # the first data operand is the value itself: ``MEAN * 3`` is another operand's
        ("operator.sub", ("operator.sub",)),
    ]


def test_without_line_level_there_are_no_steps() -> None:
    s = traced(_pipeline, np.ones(4), np.zeros(4))
    assert _steps(s) == {}
    assert any(r[NAME] == "numpy.flip" for r in s.calls)
