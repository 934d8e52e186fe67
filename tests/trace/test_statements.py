"""Static analysis of user functions: each statement's kind, targets, stores and expression
tree, found by the line it starts on."""

from __future__ import annotations

import numpy as np

from codedag.trace.statements import (
    CONST,
    METHOD,
    NAME,
    NO_STATEMENTS,
    OP,
    Expr,
    statements_of,
)


def _pipeline(x, canvas, y0):  # type: ignore[no-untyped-def]
    y = x * 2
    z = np.flip(y, axis=0)
    canvas[y0 : y0 + 2] = z
    a, b = z, y  # noqa: F841
    y += 1
    if y0:
        pass
    return z.sum()


def _by_line() -> list:
    code = _pipeline.__code__
    statements = statements_of(code)
    first = code.co_firstlineno
    return [statements.by_line.get(first + i) for i in range(1, 10)]


def test_an_assignment_binds_its_target_to_the_operators_expression() -> None:
    stmt = _by_line()[0]
    assert (stmt.kind, stmt.active) == ("assign", True)
    ((target, expr),) = stmt.targets
    assert target == "y"
    assert expr == Expr(OP, "operator.mul", (Expr(NAME, "x"), Expr(CONST, value=2)))


def test_a_call_keeps_its_callee_path_and_argument_labels() -> None:
    (_, expr) = _by_line()[1].targets[0]
    assert expr.kind == METHOD and expr.name == "flip"
    assert expr.path == ("np", "flip") and expr.labels == ("self", 0, "axis")


def test_a_subscript_store_is_a_setitem_on_its_container() -> None:
    stmt = _by_line()[2]
    ((container, expr),) = stmt.mutated
    assert container == "canvas" and expr.name == "operator.setitem"
    assert "canvas" in stmt.snapshot


def test_unpacking_a_tuple_binds_each_name_to_its_element() -> None:
    stmt = _by_line()[3]
    assert [(name, e.name) for name, e in stmt.targets] == [("a", "z"), ("b", "y")]


def test_an_augmented_assignment_rebinds_and_a_header_is_only_a_boundary() -> None:
    lines = _by_line()
    aug = lines[4]
    assert aug.kind == "augassign" and aug.targets[0][0] == "y"
    assert "y" in aug.snapshot
    assert lines[5].kind == "header" and not lines[5].active
    ret = lines[7]
    assert ret.kind == "return" and ret.value.kind == METHOD and ret.value.name == "sum"


def test_every_statement_line_has_its_first_instruction() -> None:
    statements = statements_of(_pipeline.__code__)
    assert set(statements.by_line) <= set(statements.line_start)
    starts = [statements.line_start[line] for line in sorted(statements.by_line)]
    assert starts == sorted(starts) and len(set(starts)) == len(starts)


def test_code_without_source_has_no_statements_and_results_are_cached() -> None:
    namespace: dict = {}
    exec("def made(x):\n    return x + 1\n", namespace)
    assert statements_of(namespace["made"].__code__) is NO_STATEMENTS
    assert statements_of(_pipeline.__code__) is statements_of(_pipeline.__code__)
