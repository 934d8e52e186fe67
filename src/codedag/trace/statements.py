"""Static analysis of user functions for line-level dataflow: statements and their expressions.

The tracer sees a user frame's lines run (line events) but not the operators, subscripts and
methods inside them. This module parses the function's source once per code object and describes
each statement: where it starts (its first line and the first instruction on that line), which
local names it binds, which containers it writes into (``canvas[y0:y1] = tile``), and the
expression tree of the value it computes, as :class:`Expr` nodes named like the step they become
(``operator.truediv``, ``operator.getitem``, a callee path ``np.exp``, a method ``astype``).
:mod:`codedag.trace.steps` evaluates these trees against what ran when a statement finishes.

Everything here is pure and cached: a code object without retrievable source (``exec``'d strings,
lambdas, comprehensions) gets no statements and is traced at call level only.
"""

from __future__ import annotations

import ast
import functools
import linecache
import logging
import types
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

BINARY_OPS: dict[type, str] = {
    ast.Add: "add",
    ast.Sub: "sub",
    ast.Mult: "mul",
    ast.Div: "truediv",
    ast.FloorDiv: "floordiv",
    ast.Mod: "mod",
    ast.Pow: "pow",
    ast.MatMult: "matmul",
    ast.LShift: "lshift",
    ast.RShift: "rshift",
    ast.BitAnd: "and_",
    ast.BitOr: "or_",
    ast.BitXor: "xor",
}
UNARY_OPS: dict[type, str] = {
    ast.USub: "neg",
    ast.UAdd: "pos",
    ast.Invert: "invert",
    ast.Not: "not_",
}
COMPARE_OPS: dict[type, str] = {
    ast.Lt: "lt",
    ast.LtE: "le",
    ast.Gt: "gt",
    ast.GtE: "ge",
    ast.Eq: "eq",
    ast.NotEq: "ne",
    ast.Is: "is_",
    ast.IsNot: "is_not",
    ast.In: "contains",
    ast.NotIn: "contains",
}
# Expression kinds.
NAME, CONST, OP, CALL, METHOD, ATTR, GROUP = (
    "name",
    "const",
    "op",
    "call",
    "method",
    "attr",
    "group",
)


@dataclass(frozen=True, slots=True)
class Expr:
    """One node of a statement's expression tree.

    Attributes:
        kind: ``name`` (a variable), ``const``, ``op`` (an operator or subscript, ``name`` is
            the step name such as ``operator.truediv``), ``call`` (``path`` is the callee's
            dotted path when it is a plain name or attribute chain, else empty), ``method``
            (``name`` is the attribute, ``children[0]`` the receiver), ``attr`` (attribute read,
            ``children[0]`` the owner), ``group`` (tuples, lists and expressions analysed
            only as the union of their parts).
        name: see ``kind``.
        children: operands in evaluation order (for calls: the arguments).
        labels: for calls and methods, each argument's position (int) or keyword (str).
        path: for ``call``, the callee's dotted path (``("np", "exp")``).
        value: for ``const``, the constant.
    """

    kind: str
    name: str = ""
    children: tuple[Expr, ...] = ()
    labels: tuple[int | str, ...] = ()
    path: tuple[str, ...] = ()
    value: object = None


@dataclass(slots=True)
class Statement:
    """One statement of a function, as the line-level tracer needs it.

    Attributes:
        line: the line it starts on (line events there mark its start).
        kind: ``assign``, ``augassign``, ``return``, ``expr`` (analysed) or ``header`` (a
            compound statement's header, ``pass``, ...: a boundary only).
        targets: local names it binds, each with the expression that computes it (the whole
            value, or the matching element when a tuple is unpacked from a tuple).
        mutated: ``(container name, expression)`` for subscript stores (``canvas[a:b] = x``:
            the expression is the ``operator.setitem`` op) and in-place operators on a name.
        value: the computed expression (for ``return`` and ``expr`` statements too).
        snapshot: names read by the statement whose value it may rebind or change: their
            value nodes are taken when it starts.
        active: whether finishing it can create steps (it computes something).
        calls: names of the calls in ``value`` whose arguments compute something (operators,
            subscripts, methods): when one of them is a user function, what its arguments
            computed is made steps as it starts (:mod:`codedag.trace.call_arguments`).
    """

    line: int
    kind: str
    targets: list[tuple[str, Expr]] = field(default_factory=list)
    mutated: list[tuple[str, Expr]] = field(default_factory=list)
    value: Expr | None = None
    snapshot: tuple[str, ...] = ()
    active: bool = False
    calls: frozenset[str] = frozenset()


@dataclass(slots=True)
class CodeStatements:
    """The statements of one code object, by first line, and each line's first instruction."""

    by_line: dict[int, Statement]
    line_start: dict[int, int]


NO_STATEMENTS = CodeStatements({}, {})


def _path(node: ast.expr) -> tuple[str, ...]:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return tuple(reversed(parts))
    return ()


class _Builder:
    """Turns expression ASTs into :class:`Expr` trees; collects the names they load."""

    def __init__(self) -> None:
        self.loads: set[str] = set()

    def expr(self, node: ast.expr | None) -> Expr:
        if node is None:
            return Expr(CONST)
        if isinstance(node, ast.Name):
            self.loads.add(node.id)
            return Expr(NAME, node.id)
        if isinstance(node, ast.Constant):
            return Expr(CONST, value=node.value)
        if isinstance(node, ast.BinOp):
            name = BINARY_OPS.get(type(node.op), "")
            return Expr(OP, f"operator.{name}", (self.expr(node.left), self.expr(node.right)))
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.operand, ast.Constant):  # -1, -0.5
                try:
                    return Expr(CONST, value=ast.literal_eval(node))
                except ValueError:
                    return Expr(CONST, value=None)
            name = UNARY_OPS.get(type(node.op), "")
            return Expr(OP, f"operator.{name}", (self.expr(node.operand),))
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            name = COMPARE_OPS.get(type(node.ops[0]), "")
            parts = (self.expr(node.left), self.expr(node.comparators[0]))
            return Expr(OP, f"operator.{name}", parts)
        if isinstance(node, ast.Subscript):
            return Expr(OP, "operator.getitem", (self.expr(node.value), self.index(node.slice)))
        if isinstance(node, ast.Attribute):
            return Expr(ATTR, node.attr, (self.expr(node.value),), path=_path(node))
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.Slice):
            return Expr(
                GROUP, "slice", tuple(self.expr(p) for p in (node.lower, node.upper, node.step))
            )
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            return Expr(GROUP, type(node).__name__.lower(), tuple(self.expr(e) for e in node.elts))
        if isinstance(node, ast.Starred):
            return self.expr(node.value)
        # everything else (conditional expressions, comprehensions, lambdas, f-strings, dicts,
        # boolean operators): the union of the names it reads
        inner = _Loads()
        inner.visit(node)
        self.loads |= inner.names
        return Expr(GROUP, "expression", tuple(Expr(NAME, n) for n in sorted(inner.names)))

    def index(self, node: ast.expr) -> Expr:
        """A subscript's index; a constant one (``[:, 0]``, ``[::-1]``) becomes one constant,
        as evaluating it would make it."""
        return _constant_index(self.expr(node))

    def call(self, node: ast.Call) -> Expr:
        args: list[Expr] = []
        labels: list[int | str] = []
        for i, arg in enumerate(node.args):
            args.append(self.expr(arg))
            labels.append(i)
        for keyword in node.keywords:
            args.append(self.expr(keyword.value))
            labels.append(keyword.arg if keyword.arg is not None else "**")
        func = node.func
        path = _path(func)
        if path:
            self.loads.add(path[0])
            if len(path) == 1:
                return Expr(CALL, path[-1], tuple(args), tuple(labels), path)
            # a.b.c(...): a method call on a value (img.astype) or a function of a module
            # (np.exp); told apart at run time by what ``a.b`` is
            owner = self.expr(func.value)  # type: ignore[attr-defined]
            return Expr(METHOD, path[-1], (owner, *args), ("self", *labels), path)
        if isinstance(func, ast.Attribute):  # (expr).method(...)
            owner = self.expr(func.value)
            return Expr(METHOD, func.attr, (owner, *args), ("self", *labels))
        callee = self.expr(func)
        return Expr(CALL, "", (callee, *args), ("callee", *labels))


class _Loads(ast.NodeVisitor):
    def __init__(self) -> None:
        self.names: set[str] = set()

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            self.names.add(node.id)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        return None  # its body runs later, in a frame of its own


def _constant_index(expr: Expr) -> Expr:
    """``expr``, or one constant when it is a slice or tuple of constants (nested too)."""
    if expr.kind != GROUP or expr.name not in ("slice", "tuple"):
        return expr
    children = tuple(_constant_index(child) for child in expr.children)
    if not all(child.kind == CONST for child in children):
        return expr
    values = [child.value for child in children]
    return Expr(CONST, value=slice(*values) if expr.name == "slice" else tuple(values))


def _is_active(expr: Expr | None) -> bool:
    return expr is not None and expr.kind not in (NAME, CONST)


def _statement(node: ast.stmt) -> Statement:
    builder = _Builder()
    line = node.lineno
    if isinstance(node, ast.Assign | ast.AnnAssign):
        value = builder.expr(node.value) if node.value is not None else None
        raw_targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        stmt = Statement(line, "assign", value=value)
        for target in raw_targets:
            _bind(stmt, builder, target, value)
    elif isinstance(node, ast.AugAssign):
        op = BINARY_OPS.get(type(node.op), "")
        target = node.target
        rhs = builder.expr(node.value)
        if isinstance(target, ast.Name):
            builder.loads.add(target.id)
            value = Expr(OP, f"operator.i{op}", (Expr(NAME, target.id), rhs))
            stmt = Statement(line, "augassign", value=value)
            stmt.targets.append((target.id, value))
            stmt.mutated.append((target.id, value))  # arrays change in place
        elif isinstance(target, ast.Subscript):
            current = builder.expr(target)
            value = Expr(OP, f"operator.i{op}", (current, rhs))
            stmt = Statement(line, "augassign", value=value)
            _bind(stmt, builder, target, value)
        else:
            stmt = Statement(line, "augassign", value=rhs)
    elif isinstance(node, ast.Return):
        stmt = Statement(line, "return", value=builder.expr(node.value) if node.value else None)
    elif isinstance(node, ast.Expr):
        stmt = Statement(line, "expr", value=builder.expr(node.value))
    else:
        return Statement(line, "header")
    names = {n for n, _ in stmt.targets} | {n for n, _ in stmt.mutated}
    stmt.snapshot = tuple(sorted(builder.loads & names | {n for n, _ in stmt.mutated}))
    if stmt.kind == "expr" and stmt.value is not None and _plain_call(stmt.value):
        stmt.active = False  # f(x) for its effect: nothing new to name (recorded if it is a call)
    else:
        stmt.active = bool(stmt.mutated) or (
            _is_active(stmt.value) and (bool(stmt.targets) or stmt.kind in ("return", "expr"))
        )
    if stmt.active and stmt.value is not None:
        stmt.calls = frozenset(_computing_calls(stmt.value))
    return stmt


def _computing_calls(expr: Expr) -> list[str]:
    """Names of the calls in ``expr`` with an argument that computes something."""
    out = [child_name for child in expr.children for child_name in _computing_calls(child)]
    if expr.kind in (CALL, METHOD) and expr.name:
        operands = expr.children[1:] if expr.kind == METHOD else expr.children
        if any(_computes(child) for child in operands):
            out.append(expr.name)
    return out


def _computes(expr: Expr) -> bool:
    """Whether evaluating ``expr`` may make a step: an operator, subscript or method in it (a
    call of a plain name with plain arguments, ``g(x)``, is a call of its own)."""
    if _plain(expr):
        return False
    nested = expr.kind == CALL and len(expr.path) == 1
    if nested or (expr.kind == GROUP and expr.name in ("tuple", "list")):
        return any(_computes(child) for child in expr.children)
    return True


def _plain_call(expr: Expr) -> bool:
    """A call whose arguments are variables and constants (nothing computed around it)."""
    if expr.kind not in (CALL, METHOD):
        return False
    operands = expr.children[1:] if expr.kind == METHOD else expr.children
    return all(_plain(child) for child in operands)


def _plain(expr: Expr) -> bool:
    if expr.kind in (NAME, CONST):
        return True
    if expr.kind == GROUP and expr.name in ("tuple", "list"):
        return all(_plain(child) for child in expr.children)
    return expr.kind == ATTR and bool(expr.path)


def _bind(stmt: Statement, builder: _Builder, target: ast.expr, value: Expr | None) -> None:
    if isinstance(target, ast.Name):
        stmt.targets.append((target.id, value or Expr(CONST)))
    elif isinstance(target, ast.Tuple | ast.List):
        elements = value.children if value is not None and value.kind == GROUP else None
        same = elements is not None and value is not None and value.name in ("tuple", "list")
        for i, element in enumerate(target.elts):
            if same and elements is not None and len(elements) == len(target.elts):
                _bind(stmt, builder, element, elements[i])
            else:
                _bind(stmt, builder, element, value)
    elif isinstance(target, ast.Subscript):
        root = target.value
        while isinstance(root, ast.Subscript):  # a[i][j] = v writes into a
            root = root.value
        if isinstance(root, ast.Name):
            builder.loads.add(root.id)
            index = builder.index(target.slice)
            container = builder.expr(target.value)
            written = Expr(OP, "operator.setitem", (container, index, value or Expr(CONST)))
            stmt.mutated.append((root.id, written))
    elif isinstance(target, ast.Starred):
        _bind(stmt, builder, target.value, value)


class _Collector:
    """Statements of one function body (not of nested functions or classes)."""

    def __init__(self) -> None:
        self.statements: list[Statement] = []

    def add(self, node: ast.stmt) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            self.statements.append(Statement(node.lineno, "header"))
            return
        self.statements.append(_statement(node))
        for body in ("body", "orelse", "finalbody", "handlers", "cases"):
            for child in getattr(node, body, ()) or ():
                if isinstance(child, ast.stmt):
                    self.add(child)
                elif isinstance(child, ast.ExceptHandler | ast.match_case):
                    for inner in child.body:
                        self.add(inner)


@functools.lru_cache(maxsize=64)
def _module_ast(filename: str, text: str) -> ast.Module | None:
    try:
        return ast.parse(text, filename)
    except (SyntaxError, ValueError):
        return None


def _function_node(code: types.CodeType) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    lines = linecache.getlines(code.co_filename)
    if not lines:
        return None
    tree = _module_ast(code.co_filename, "".join(lines))
    if tree is None:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == code.co_name:
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            if first == code.co_firstlineno or node.lineno == code.co_firstlineno:
                return node
    return None


_cache: dict[types.CodeType, CodeStatements] = {}


def statements_of(code: types.CodeType) -> CodeStatements:
    """The statements of a function's code object (empty when its source is not available)."""
    hit = _cache.get(code)
    if hit is not None:
        return hit
    result = NO_STATEMENTS
    try:
        node = _function_node(code)
        if node is not None:
            collector = _Collector()
            for stmt in node.body:
                collector.add(stmt)
            line_start: dict[int, int] = {}
            for start, _end, line in code.co_lines():
                if line is not None and (line not in line_start or start < line_start[line]):
                    line_start[line] = start
            by_line: dict[int, Statement] = {}
            for statement in collector.statements:
                if statement.line in line_start:
                    # two statements on one line (a = 1; b = 2) run as one unit: keep the first
                    by_line.setdefault(statement.line, statement)
            result = CodeStatements(by_line, line_start)
    except Exception as error:  # never let analysis break tracing: call level only
        log.debug("no line-level analysis of %s: %s", code.co_name, error)
    _cache[code] = result
    return result
