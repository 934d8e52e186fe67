"""Evaluating a finished statement's expression against what ran (see :mod:`codedag.trace.steps`).

An expression tree (:mod:`codedag.trace.statements`) is evaluated bottom-up into *sources*: a
value node (a variable holding a data value, the result of a recorded call), a plain object (a
module, a number, a constant index), a recorded C call whose result is unknown, or a pending
step (a :class:`Region`: operations outside recorded calls, merged up to the outermost one).
Calls in the tree are matched to the calls recorded while the statement ran, by callee name and
in evaluation order; only attributes and items that can be read without running code are read.
"""

from __future__ import annotations

import builtins
import operator
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from codedag.backends.lazy_values import is_metadata_member
from codedag.backends.names import canonical_name
from codedag.trace.args import kept_object
from codedag.trace.records import (
    ARG_CONTAINER,
    ARG_OBJ,
    ARG_SCALAR,
    ARG_SMALL,
    ARG_TYPE,
    ARG_VALUE,
    ARGS,
    KIND,
    KIND_C,
    KIND_PY,
    MAX_ITEMS,
    MAX_NESTING,
    NAME,
    RET,
    SEQ,
)
from codedag.trace.statements import ATTR, CALL, CONST, GROUP, METHOD, OP, Expr
from codedag.trace.statements import NAME as E_NAME


class StepRecords(Protocol):
    """The records an evaluation reads and extends (:class:`~codedag.trace.steps.StepMaker`)."""

    values: list[list[Any]]
    uses: list[tuple[int, int]]
    produces: list[tuple[int, int]]
    use: Callable[[Any, list[int]], int]
    lookup: Callable[[Any], Any]
    is_data: Callable[[type], bool]
    next_seq: Callable[[], int]
    skipped: Callable[[Any], bool]


_BUILTINS = vars(builtins)
MISSING = object()  # no such variable or attribute

# Evaluated sources: a value node, a plain object, a record's unknown result, a pending step.
S_VALUE, S_OBJECT, S_RECORD, S_REGION, S_NONE = range(5)
_DATA_SOURCES = frozenset((S_VALUE, S_RECORD, S_REGION))  # sources that carry data
_PLAIN_PAYLOAD = frozenset((bool, int, float, str, type(None)))


class Region:
    """Operations of one statement that will become one step: its name, inputs and arguments,
    and the operations on the way to it (``path``).

    ``path`` names the merged operations through each one's first data operand while that is a
    merged operation itself, in the order they run, this one last (``(img / 255.0 - MEAN) /
    STD``: ``truediv``, ``sub``, ``truediv``; ``img - MEAN * 2``: ``sub`` alone): the calls a
    value carried through the statement meets, which a chain counts at run time where the trace
    sees one step."""

    __slots__ = ("leaves", "name", "path", "raw_args", "single")

    def __init__(self, name: str) -> None:
        self.name = name
        self.leaves: list[int] = []  # value sequence numbers the operations read
        self.single = True  # one operation whose operands are all plain values or constants
        self.raw_args: list[tuple[Any, int, Any]] = []
        self.path: tuple[str, ...] = (name,) if name else ()


def _safe_attribute(obj: object, name: str) -> Any:
    """``obj.name`` when reading it runs no code (module globals, instance dicts), else MISSING."""
    if isinstance(obj, types.ModuleType):
        return vars(obj).get(name, MISSING)
    namespace = getattr(obj, "__dict__", None)
    if isinstance(namespace, dict) and name in namespace:
        return namespace[name]
    if isinstance(obj, type):
        for klass in obj.__mro__:
            if name in vars(klass):
                return vars(klass)[name]
    return MISSING


def _type_member_name(value_type: type, attr: str) -> str:
    for klass in value_type.__mro__:
        if attr in vars(klass):
            return f"{klass.__module__}.{klass.__qualname__}.{attr}"
    return f"{value_type.__module__}.{value_type.__qualname__}.{attr}"


@dataclass(eq=False, repr=False)
class Evaluation:
    """Evaluates a statement's expressions against the frame and the records made meanwhile."""

    maker: StepRecords
    frame: types.FrameType
    local: dict[str, Any]
    snap: dict[str, int]
    children: list[list[Any]]
    # a user call about to start (see call_arguments)
    until: types.CodeType | None = field(default=None, init=False)
    matched: list[bool] = field(init=False)
    # operations computed in a recorded call's arguments: (region, call, value it received)
    pending: list[tuple[Region, list[Any], int | None]] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        self.matched = [False] * len(self.children)

    # ------------------------------------------------------------------ helpers
    def _lookup_name(self, name: str) -> Any:
        obj = self.local.get(name, MISSING)
        if obj is MISSING:
            obj = self.frame.f_globals.get(name, MISSING)
        if obj is MISSING:
            obj = _BUILTINS.get(name, MISSING)
        return obj

    def _from_object(self, obj: object) -> tuple[int, Any]:
        if obj is MISSING:
            return (S_NONE, None)
        maker = self.maker
        if maker.is_data(type(obj)) or (numpy_scalar(obj) and maker.lookup(obj) is not None):
            return (S_VALUE, maker.use(obj, []))
        return (S_OBJECT, obj)

    def _data(self, src: tuple[int, Any]) -> bool:
        return src[0] in _DATA_SOURCES

    def _intermediate(self, record: list[Any]) -> int:
        """A value node for what a C method returned into an expression (not observable)."""
        maker = self.maker
        vseq = maker.next_seq()
        maker.values.append([vseq, "intermediate", 0, "", None, None, 0, "cpu", None])
        maker.produces.append((record[SEQ], vseq))
        return vseq

    def _region(
        self, name: str, operands: list[tuple[int, Any]], labels: Any = None
    ) -> tuple[int, Any]:
        """Combine operands (labelled by ``labels``, else by position) into one pending step
        (operands that are steps merge into it)."""
        region = Region(name)
        leaves, raw_args = region.leaves, region.raw_args
        followed = False
        for label, src in enumerate(operands) if labels is None else zip(labels, operands):
            kind = src[0]
            if not followed and kind in _DATA_SOURCES:  # the first operand that is data: the
                followed = True  # way a value carried through the statement came, where it is
                if kind == S_REGION:  # an operation itself
                    region.path = (*src[1].path, *region.path)
            if kind == S_VALUE:
                leaves.append(src[1])
                raw_args.append((label, ARG_VALUE, src[1]))
            elif kind == S_RECORD:
                leaves.append(self._intermediate(src[1]))
                region.single = False  # an operand of unknown shape: not rebuildable
            elif kind == S_REGION:
                leaves.extend(src[1].leaves)
                region.single = False
            elif kind == S_OBJECT:
                payload = _object_payload(src[1], 0)
                if payload is None:
                    region.single = False
                else:
                    raw_args.append((label, *payload))
            else:
                region.single = False
        return (S_REGION, region)

    # ------------------------------------------------------------------ evaluation
    def value(self, expr: Expr) -> tuple[int, Any]:
        """What flows out of ``expr``: a value node, an object, a record, a pending step."""
        kind = expr.kind
        if kind == E_NAME:
            vseq = self.snap.get(expr.name)
            if vseq is not None:
                return (S_VALUE, vseq)
            return self._from_object(self._lookup_name(expr.name))
        if kind == CONST:
            return (S_OBJECT, expr.value)
        if kind == OP:
            value = self.value
            operands = [value(child) for child in expr.children]
            if expr.name == "operator.getitem" and operands[0][0] == S_OBJECT:
                return self._item(operands[0][1], operands[1])
            for src in operands:
                if src[0] in _DATA_SOURCES:
                    return self._region(expr.name, operands)
            return _fold(expr.name, operands)
        if kind == ATTR:
            owner = self.value(expr.children[0])
            if owner[0] == S_OBJECT:
                return self._from_object(_safe_attribute(owner[1], expr.name))
            if owner[0] == S_VALUE:
                name = self._member_name(owner[1], expr.name)
                if is_metadata_member(name):  # ``img.shape[1] // 2``: a number, not the data
                    return (S_NONE, None)
                return self._region(name, [owner])
            if owner[0] in (S_RECORD, S_REGION):
                return self._region(f"attribute.{expr.name}", [owner])
            return (S_NONE, None)
        if kind in (CALL, METHOD):
            return self._call(expr)
        if kind == GROUP:
            return self._group(expr)
        return (S_NONE, None)

    def _group(self, expr: Expr) -> tuple[int, Any]:
        """A tuple, list, slice or parenthesized expression."""
        value = self.value
        parts = [value(child) for child in expr.children]
        data = [src for src in parts if src[0] in _DATA_SOURCES]
        if not data:
            if expr.name in ("slice", "tuple"):
                items = []
                for kind, obj in parts:
                    if kind != S_OBJECT:
                        return (S_NONE, None)
                    items.append(obj)  # a constant index: img[:, ::-1], a[y0:y1]
                return (S_OBJECT, slice(*items) if expr.name == "slice" else tuple(items))
            return (S_NONE, None)
        if len(data) == 1 and expr.name == "expression":
            return data[0]
        region = self._region("", parts)[1]
        region.single = False
        return (S_REGION, region) if region.leaves else (S_NONE, None)

    def _item(self, container: Any, index: tuple[int, Any]) -> tuple[int, Any]:
        """``container[index]`` for plain lists, tuples and dicts (no user code runs)."""
        if type(container) in (list, tuple, dict) and index[0] == S_OBJECT:
            try:
                return self._from_object(container[index[1]])
            except (LookupError, TypeError):
                return (S_NONE, None)
        return (S_NONE, None)

    def _member_name(self, vseq: int, attr: str) -> str:
        obj = None
        for record in reversed(self.maker.values):
            if record[0] == vseq:
                obj = record
                break
        type_name = obj[3] if obj is not None else ""
        module, _, qual = type_name.rpartition(".")
        value_type = _type_by_name(module, qual)
        if value_type is None:
            return f"{type_name}.{attr}" if type_name else f"attribute.{attr}"
        return _type_member_name(value_type, attr)

    def _match(self, names: tuple[str, ...], attr: str) -> list[Any] | None:
        for i, record in enumerate(self.children):
            if self.matched[i]:
                continue
            name = record[NAME]
            if name in names or name.rsplit(".", 1)[-1] == attr:
                self.matched[i] = True
                return record
        return None

    def _call(self, expr: Expr) -> tuple[int, Any]:
        labels = expr.labels
        operands = whole = [self.value(child) for child in expr.children]
        callee: Any = MISSING
        method_on_data = False
        if expr.kind == METHOD:
            owner = operands[0]
            if owner[0] == S_OBJECT:  # np.exp, cv2.resize, self.load: a function of an object
                callee = _safe_attribute(owner[1], expr.name)
                operands, labels = operands[1:], labels[1:]
            else:
                method_on_data = self._data(owner)
        elif expr.path:
            callee = self._lookup_name(expr.path[0])
        elif operands and operands[0][0] == S_OBJECT:
            callee = operands[0][1]
            operands, labels = operands[1:], labels[1:]
        if self.until is not None and expr.name == self.until.co_name:
            self._reach(expr, callee, whole, operands, labels)
        names: tuple[str, ...] = ()
        if callee is not MISSING:
            try:
                canonical = canonical_name(callee)
                names = (canonical, f"{canonical}.__init__")
            except Exception:
                names = ()
        elif method_on_data and operands[0][0] == S_VALUE:
            names = (self._member_name(operands[0][1], expr.name),)
        record = self._match(names, expr.name)
        if record is not None:
            return self._recorded(record, operands, labels)
        if not any(src[0] in _DATA_SOURCES for src in operands):
            return (S_NONE, None)
        if callee is not MISSING and self.maker.skipped(callee):
            return (S_NONE, None)  # a call the filter skips (excluded, standard library)
        if names:
            step_name = names[0]
        elif method_on_data:
            step_name = f"attribute.{expr.name}"
        else:
            step_name = expr.name or "call"
        return self._region(step_name, operands, labels)

    def _reach(
        self,
        expr: Expr,
        callee: Any,
        whole: list[tuple[int, Any]],
        operands: list[tuple[int, Any]],
        labels: tuple[Any, ...],
    ) -> None:
        """A call named like the user function in ``until`` (see call_arguments)."""

    def _recorded(
        self, record: list[Any], operands: list[tuple[int, Any]], labels: tuple[Any, ...]
    ) -> tuple[int, Any]:
        """Link a recorded call with the statement's operands; return what it produced."""
        maker = self.maker
        received = received_values(record)
        for label, src in zip(labels, operands):
            kind = src[0]
            if kind == S_VALUE:
                if record[KIND] == KIND_C and (src[1], record[SEQ]) not in maker.uses[-8:]:
                    maker.uses.append((src[1], record[SEQ]))
                continue
            if kind not in (S_RECORD, S_REGION):
                continue
            target = received.get(label)
            if kind == S_RECORD:
                vseq = target if target is not None else self._intermediate(src[1])
                if target is None:
                    maker.uses.append((vseq, record[SEQ]))
                elif target not in received_values(src[1]).values():
                    maker.produces.append((src[1][SEQ], target))
                # else: a method that wrote into what it received and returned it (``t.sub_(m)
                # .div_(s)``): the value keeps its node, which it does not produce (no cycle)
            else:
                self._pending_argument(src[1], record, target)
        ret = record[RET]
        if ret is not None and ret[0] == ARG_VALUE:
            return (S_VALUE, ret[1])
        if record[KIND] == KIND_C:
            return (S_RECORD, record)
        if received and ret is not None and _a_number(ret):
            # a number computed from data (``img / np.max(img)``): what takes it in the
            # statement takes the call's value, as a C method's (not a constant)
            return (S_RECORD, record)
        return (S_NONE, None)

    def _pending_argument(self, region: Region, record: list[Any], target: int | None) -> None:
        """An operation computed inside a recorded call's arguments: a step made at the end."""
        self.pending.append((region, record, target))


_PLAIN = (bool, int, float, str, type(None))


def numpy_scalar(obj: object) -> bool:
    """Whether ``obj`` is a NumPy scalar (``img.max()``'s ``np.float32``): a number the trace
    follows where a call computed it from data and a name holds it (``mean = img.mean()``)."""
    cls = type(obj)
    return cls.__module__ == "numpy" and cls.__name__ != "ndarray" and getattr(obj, "ndim", 1) == 0


def _a_number(ret: tuple[Any, Any]) -> bool:
    """Whether a recorded call's result is a number: a Python one, or a NumPy scalar (which
    the tracer keeps by its type)."""
    if ret[0] == ARG_SCALAR:
        return type(ret[1]) in (int, float, complex)
    return ret[0] == ARG_TYPE and isinstance(ret[1], type) and ret[1].__module__ == "numpy"


def _fold(name: str, operands: list[tuple[int, Any]]) -> tuple[int, Any]:
    """The value of an operator on plain numbers (``y0 + size`` in a slice), else nothing.

    Only built-in numbers and strings are combined, so no user code runs.
    """
    if not all(src[0] == S_OBJECT and type(src[1]) in _PLAIN for src in operands):
        return (S_NONE, None)
    function = getattr(operator, name.rpartition(".")[2], None)
    if function is None or name.endswith(("setitem", "contains")):
        return (S_NONE, None)
    try:
        return (S_OBJECT, function(*(src[1] for src in operands)))
    except Exception:  # 1 / 0, "a" - 1: not a value
        return (S_NONE, None)


def _object_payload(obj: Any, depth: int) -> tuple[int, Any] | None:
    """A non-data operand as the recorder keeps arguments (scalars, slices, small tuples)."""
    cls = type(obj)
    if cls in _PLAIN_PAYLOAD:
        return (ARG_SCALAR, obj)
    if cls is slice or obj is Ellipsis or kept_object(obj):
        return (ARG_OBJ, obj)
    if (cls is tuple or cls is list) and len(obj) <= MAX_ITEMS and depth < MAX_NESTING:
        items = []
        for item in obj:
            payload = _object_payload(item, depth + 1)
            if payload is None:
                return None
            items.append(payload)
        return (ARG_CONTAINER, (cls.__name__, len(obj), items))
    return None


def received_values(record: list[Any]) -> dict[Any, int]:
    """Value sequence numbers a recorded call received, by position/keyword (and parameter)."""
    out: dict[Any, int] = {}
    args = record[ARGS] or ()
    for i, (label, kind, payload) in enumerate(args):
        if kind == ARG_VALUE:
            vseq = payload
        elif kind == ARG_SMALL:
            vseq = payload[0]
        else:
            continue
        out[label] = vseq
        if record[KIND] == KIND_PY:
            out[i] = vseq  # Python frames list parameters in order: position i is parameter i
    for label, kind, payload in args:
        if kind == ARG_CONTAINER and payload[2] is not None:
            for j, item in enumerate(payload[2]):
                if len(item) == 2 and item[0] in (ARG_VALUE, ARG_SMALL):
                    out[(label, j)] = item[1] if item[0] == ARG_VALUE else item[1][0]
    return out


_TYPES: dict[tuple[str, str], type | None] = {}


def _type_by_name(module: str, qualname: str) -> type | None:
    key = (module, qualname)
    if key not in _TYPES:
        import sys

        obj: Any = sys.modules.get(module)
        for part in qualname.split("."):
            obj = getattr(obj, part, None) if obj is not None else None
        _TYPES[key] = obj if isinstance(obj, type) else None
    return _TYPES[key]
