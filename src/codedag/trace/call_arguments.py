"""Operations computed in the arguments of a user call, made steps as the call starts.

In ``normalized(np.asarray(img, dtype=np.float32) / 255.0)`` the division runs before
``normalized``'s frame starts, and that frame's statements read its result through their
parameter. When a followed statement calls a user function and one of the call's arguments
computes something (:attr:`~codedag.trace.statements.Statement.calls`), the statement's
expression is evaluated as far as that call when its frame starts (:class:`EarlyEvaluation`):
what each argument computed becomes a step (or the result of a C call recorded without it) that
produces the value the parameter holds, before the call's own record. The statement's finish
evaluates it again through what was kept (:class:`Early`), so nothing is made twice.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

from codedag.trace.evaluation import (
    MISSING,
    S_RECORD,
    S_REGION,
    Evaluation,
    StepRecords,
    _safe_attribute,
)
from codedag.trace.statements import METHOD, Expr

Source = tuple[int, Any]


class Early:
    """What the evaluations of a running statement made before its user calls started.

    Attributes:
        memo: sources of the sub-expressions evaluated so far, by ``id`` of their
            :class:`~codedag.trace.statements.Expr`.
        matched: which of the statement's recorded calls those evaluations matched.
        started: ``id`` of the user calls reached (their frames started).
        steps: the step records made (the statement's finish gives them its timing).
    """

    __slots__ = ("matched", "memo", "started", "steps")

    def __init__(self) -> None:
        self.memo: dict[int, Source] = {}
        self.matched: list[bool] = []
        self.started: set[int] = set()
        self.steps: list[list[Any]] = []


class Reached(Exception):
    """The evaluation reached the user call that is starting: its arguments and parameters.

    Attributes:
        arguments: ``(argument expression, source, parameter name)`` of each argument bound to
            a named parameter.
    """

    def __init__(self, arguments: list[tuple[Expr, Source, str]]) -> None:
        super().__init__()
        self.arguments = arguments


class EarlyEvaluation(Evaluation):
    """An evaluation that reuses (and, with ``until``, keeps) what :class:`Early` holds.

    With ``until`` (the code object of a user function whose frame is starting), evaluating
    raises :class:`Reached` at the first call of that function not reached before.
    """

    def __init__(
        self,
        maker: StepRecords,
        frame: types.FrameType,
        local: dict[str, Any],
        snap: dict[str, int],
        children: list[list[Any]],
        early: Early,
        until: types.CodeType | None = None,
    ) -> None:
        super().__init__(maker, frame, local, snap, children)
        self.early = early
        self.until = until
        # a copy while reaching: kept only when the call is reached
        self.memo = dict(early.memo) if until is not None else early.memo
        self.matched[: len(early.matched)] = early.matched

    def value(self, expr: Expr) -> Source:
        """What flows out of ``expr`` (kept while reaching a call)."""
        hit = self.memo.get(id(expr))
        if hit is not None:
            return hit
        src = super().value(expr)
        if self.until is not None:
            self.memo[id(expr)] = src
        return src

    def reach(self, expr: Expr) -> Reached | None:
        """Evaluate ``expr`` up to the starting call; what it found (None: not reached)."""
        try:
            self.value(expr)
        except Reached as reached:
            self.early.memo, self.early.matched = self.memo, self.matched
            return reached
        return None

    def _reach(
        self,
        expr: Expr,
        callee: Any,
        whole: list[Source],
        operands: list[Source],
        labels: tuple[Any, ...],
    ) -> None:
        if id(expr) in self.early.started or self.until is None:
            return
        bound = 0
        if expr.kind == METHOD:
            if len(whole) == len(operands):
                return  # a method of a data value
            callee, bound = _method(whole[0][1], expr.name, callee)
        elif isinstance(callee, types.MethodType):
            bound = 1
        function = getattr(callee, "__func__", callee)
        if isinstance(function, types.FunctionType) and function.__code__ is not self.until:
            return  # another function of the same name
        self.early.started.add(id(expr))
        exprs = expr.children[len(whole) - len(operands) :]
        raise Reached(_parameters(self.until, bound, exprs, operands, labels))


def _method(owner: Any, name: str, callee: Any) -> tuple[Any, int]:
    """The function ``owner.name`` calls and how many parameters it binds (``self``, ``cls``)."""
    if isinstance(owner, types.ModuleType):
        return callee, 0
    if callee is MISSING and not isinstance(owner, type):
        function = _safe_attribute(type(owner), name)  # defined by the class
        return function, 0 if isinstance(function, staticmethod) else 1
    if isinstance(callee, classmethod):
        return callee, 1
    return callee, 0  # a function of a class, a static method, one stored on the instance


def _parameters(
    code: types.CodeType,
    bound: int,
    exprs: tuple[Expr, ...],
    operands: list[Source],
    labels: tuple[Any, ...],
) -> list[tuple[Expr, Source, str]]:
    """Each argument with the parameter of ``code`` it is bound to (``bound`` leading ones
    are bound already)."""
    positional = code.co_varnames[: code.co_argcount]
    named = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    out = []
    for arg, src, label in zip(exprs, operands, labels):
        if isinstance(label, int):
            if label + bound < len(positional):
                out.append((arg, src, positional[label + bound]))
        elif label in named:
            out.append((arg, src, label))
    return out


def argument_values(
    reached: Reached, callee: types.FrameType, known: Callable[[Any], bool]
) -> list[tuple[Expr, Source, Any]]:
    """The arguments computed in the call that hold new data values in ``callee``'s frame:
    ``(argument expression, source, value)`` (``known``: whether a value has a node, or is not
    data)."""
    local = callee.f_locals
    out = []
    for arg, src, name in reached.arguments:
        if src[0] not in (S_REGION, S_RECORD):
            continue  # a plain value, or nothing the statement's records tell
        obj = local.get(name, MISSING)
        if obj is not MISSING and not known(obj):
            out.append((arg, src, obj))
    return out
