"""Evaluating a statement's expression against the frame: data values become value nodes,
plain numbers fold, operations on data become pending steps, and received arguments are read
back from call records."""

from __future__ import annotations

import sys

import numpy as np
from trace_core import core_session

from codedag.trace.evaluation import (
    S_NONE,
    S_OBJECT,
    S_REGION,
    S_VALUE,
    Evaluation,
    Region,
    received_values,
)
from codedag.trace.records import (
    ARG_CONTAINER,
    ARG_SCALAR,
    ARG_SMALL,
    ARG_VALUE,
    ARGS,
    KIND,
    KIND_C,
    KIND_PY,
    NFIELDS,
)
from codedag.trace.statements import ATTR, CONST, GROUP, NAME, OP, Expr


def evaluation(local: dict, snap: dict | None = None) -> Evaluation:
    s = core_session()
    return Evaluation(s.steps, sys._getframe(), local, snap or {}, [])


def test_a_name_holding_data_is_a_value_node_and_the_snapshot_wins() -> None:
    image = np.zeros(3)
    ev = evaluation({"img": image})
    kind, vseq = ev.value(Expr(NAME, "img"))
    assert kind == S_VALUE and ev.maker.lookup(image)[1] == vseq
    assert evaluation({"img": image}, {"img": 41}).value(Expr(NAME, "img")) == (S_VALUE, 41)
    assert ev.value(Expr(NAME, "no_such_name")) == (S_NONE, None)
    assert ev.value(Expr(NAME, "len")) == (S_OBJECT, len)  # builtins are found last


def test_operators_on_plain_numbers_fold_and_never_run_user_code() -> None:
    ev = evaluation({"y0": 3})
    add = Expr(OP, "operator.add", (Expr(NAME, "y0"), Expr(CONST, value=2)))
    assert ev.value(add) == (S_OBJECT, 5)
    div = Expr(OP, "operator.truediv", (Expr(CONST, value=1), Expr(CONST, value=0)))
    assert ev.value(div) == (S_NONE, None)  # 1 / 0 is not a value
    index = Expr(GROUP, "slice", (Expr(NAME, "y0"), add, Expr(CONST, value=None)))
    assert ev.value(index) == (S_OBJECT, slice(3, 5, None))


def test_an_operation_on_data_becomes_a_region_that_reads_its_input() -> None:
    image = np.ones(4)
    ev = evaluation({"img": image})
    mul = Expr(OP, "operator.mul", (Expr(NAME, "img"), Expr(CONST, value=2)))
    kind, region = ev.value(mul)
    assert kind == S_REGION and isinstance(region, Region)
    assert region.name == "operator.mul"
    assert region.leaves == [ev.maker.lookup(image)[1]]


def test_an_attribute_of_an_array_is_named_after_its_type_member() -> None:
    image = np.ones((2, 3))
    ev = evaluation({"img": image})
    kind, region = ev.value(Expr(ATTR, "T", (Expr(NAME, "img"),)))
    assert kind == S_REGION and region.name == "numpy.ndarray.T"
    module_attr = ev.value(Expr(ATTR, "pi", (Expr(NAME, "np"),)))
    assert module_attr == (S_OBJECT, np.pi)  # np is this module's global


def test_received_values_reads_positions_keywords_and_container_items() -> None:
    record: list = [None] * NFIELDS
    record[KIND] = KIND_C
    record[ARGS] = [
        (0, ARG_VALUE, 7),
        ("mask", ARG_SMALL, (8, b"\x00")),
        ("k", ARG_SCALAR, 3),
        ("pair", ARG_CONTAINER, ("list", 2, [(ARG_VALUE, 9), (ARG_SCALAR, 1)])),
    ]
    assert received_values(record) == {0: 7, "mask": 8, ("pair", 0): 9}
    record[KIND] = KIND_PY
    record[ARGS] = [("img", ARG_VALUE, 5)]
    assert received_values(record) == {"img": 5, 0: 5}  # parameters also by position
