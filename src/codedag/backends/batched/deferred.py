"""Deferred values: what the chain's calls return inside ``__getitem__`` instead of computing.

A :class:`LazyArray` (or :class:`LazyTensor`, after ``torch.from_numpy``) holds a :class:`Node`: the
recorded operation, its arguments (other nodes, or concrete values copied when recorded) and the
result's shape and dtype, known without computing. It is never an ``ndarray`` subclass (C code
would read memory that does not exist), so what it cannot answer from the record *forces* it:
:func:`evaluate` replays the recorded calls through the original CPU functions in this process
(the per-sample reference itself), the value is kept, and from then on it behaves as that array.

Recorded: the chain's library calls, NumPy operators and ufuncs (``__array_ufunc__``), the NumPy
functions of :mod:`.views` (``__array_function__``), ``astype``/``transpose``/``reshape``/
``copy``/``clip``/static indexing, conversions to torch and a set of tensor operations.
Answered without computing: ``shape``, ``dtype``, ``ndim``, ``size``, ``nbytes``, ``len``.
Everything else forces, counted by reason (:mod:`.forcing`).

Recording happens only inside a :func:`deferring` block in this thread (a DataLoader fetch of a
patched process, calibration's replay, a test): :func:`deferring` is the one switch; a deferred
value used anywhere else is forced on first use. Shapes and dtypes come from :meth:`Op.meta`,
computed once per signature, so recording a step is a few microseconds.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch

import codedag.backends.batched.ops as _ops
import codedag.backends.batched.views as _views
from codedag.backends.batched.forcing import FORCED
from codedag.backends.batched.ops import Meta, Op, meta_of
from codedag.backends.lazy_operators import in_place, install_operators
from codedag.errors import UnsupportedOperation

_PENDING: Any = object()
_ARRAYS = (np.ndarray, torch.Tensor)


class Node:
    """One recorded operation of a sample (or a concrete source value when ``op`` is None).

    Attributes:
        op: the operation; ``None`` for a source.
        args, kwargs: its arguments: other nodes, or concrete values.
        meta: the result's shape and dtype.
        value: the result once computed (a source's value from the start).
        entry: the entry site that started this chain (for accounting), or ``None``.
        views: how many recorded views read this node's memory (writes then force).
    """

    __slots__ = ("__weakref__", "args", "entry", "kwargs", "meta", "op", "value", "views")

    def __init__(
        self,
        op: Op | None,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        meta: Meta,
        value: object = _PENDING,
        entry: str | None = None,
    ) -> None:
        self.op = op
        self.args = args
        self.kwargs = kwargs
        self.meta = meta
        self.value = value
        self.entry = entry
        self.views = 0

    @property
    def done(self) -> bool:
        """Whether the value is known (a source, or computed)."""
        return self.value is not _PENDING

    def inputs(self) -> Iterator[Node]:
        """The nodes among the arguments."""
        for value in self.args:
            if isinstance(value, Node):
                yield value
        for value in self.kwargs.values():
            if isinstance(value, Node):
                yield value


def source(value: object, entry: str | None = None, meta: Meta | None = None) -> Node:
    """A node holding a concrete value (``meta``: its Meta, when the caller has it)."""
    return Node(None, (), {}, meta or meta_of(value), value, entry)


def evaluate(node: Node) -> Any:
    """The node's value: replay its pending calls through the original CPU functions."""
    if node.done:
        return node.value
    stack = [node]
    while stack:
        current = stack[-1]
        pending = [n for n in current.inputs() if not n.done]
        if pending:
            stack.extend(pending)
            continue
        stack.pop()
        if current.done:
            continue
        assert current.op is not None
        args = tuple(a.value if isinstance(a, Node) else a for a in current.args)
        kwargs = {k: (v.value if isinstance(v, Node) else v) for k, v in current.kwargs.items()}
        current.value = current.op.original(*args, **kwargs)
    return node.value


# -- recording state ------------------------------------------------------------------------------


class Scope:
    """What one :func:`deferring` block recorded (a sample, in a DataLoader fetch).

    Attributes:
        created: operations recorded in it.
        entries: entry sites that started chains in it.
    """

    __slots__ = ("created", "entries")

    def __init__(self) -> None:
        self.created = 0
        self.entries: set[str] = set()


class _State(threading.local):
    def __init__(self) -> None:
        self.active = 0  # deferring() blocks open in this thread
        self.scope = Scope()  # the innermost block's
        self.copies: dict[int, tuple[Any, Any]] = {}  # id -> (original, copy) in the outer block
        self.frozen: dict[int, tuple[np.ndarray, list[Node]]] = {}  # made read-only, their sources
        self.collating = False  # a custom collate_fn runs on deferred samples


STATE = _State()


def recording() -> bool:
    """Whether calls made now may be deferred (a :func:`deferring` block is open in this
    thread)."""
    return STATE.active > 0


@contextlib.contextmanager
def deferring(enabled: bool = True) -> Iterator[Scope]:
    """Defer in this thread for the block (``enabled=False``: run eagerly inside it): the one
    switch of recording.

    The DataLoader fetch of a patched process opens one block per fetch and one per sample inside
    it (a sample that failed with deferred values runs again in a disabled block), calibration
    one per replayed batch, tests their own. Each block counts what it records (the
    :class:`Scope` it yields); concrete arrays recorded as arguments are copied once per
    outermost block (samples sharing one array share its copy).
    """
    state = STATE
    outer, active = state.scope, state.active
    scope = state.scope = Scope()
    state.active = active + 1 if enabled else 0
    try:
        yield scope
    finally:
        state.active = active
        state.scope = outer
        outer.created += scope.created
        outer.entries |= scope.entries
        if not active:
            state.copies.clear()
            state.scope = Scope()
            thaw(copy_sources=False)


@contextlib.contextmanager
def collating() -> Iterator[None]:
    """A custom ``collate_fn`` runs on deferred samples in this block: stacking deferred values
    along a new first axis (``torch.stack``, ``np.stack``) makes a batch record, as
    ``default_collate`` does; anything else forces them (counted as ``collate``)."""
    state = STATE
    before = state.collating
    state.collating = True
    try:
        yield
    finally:
        state.collating = before


_STACKERS: list[Callable[[list[Any]], Any]] = []


def on_stack(stack: Callable[[list[Any]], Any]) -> None:
    """Let ``stack`` collate a list of deferred samples stacked in a custom ``collate_fn``
    (:mod:`.collate` registers its own when imported)."""
    if stack not in _STACKERS:
        _STACKERS.append(stack)


def _stacked(items: Any, axis: Any, fallback: Callable[..., Any], args: Any, kwargs: Any) -> Any:
    """``stack(items)`` in a custom collate: a batch record of the deferred samples."""
    if (
        STATE.collating
        and _STACKERS
        and axis in (0, None)
        and isinstance(items, list | tuple)
        and items
        and all(isinstance(v, Lazy) for v in items)
    ):
        return _STACKERS[0](list(items))
    return _forced_call(fallback, args, kwargs, "collate", getattr(fallback, "__name__", "stack"))


FREEZE_BYTES = 1 << 14
"""Data arrays from this size on are made read-only while recorded instead of copied."""


def frozen() -> bool:
    """Whether recording holds arrays read-only now (a write into one raises)."""
    return bool(STATE.frozen)


def thaw(copy_sources: bool = True) -> None:
    """Make the arrays frozen by recording writeable again; with ``copy_sources`` the records
    that read them get copies first (code is about to run eagerly and may write into them)."""
    for array, nodes in STATE.frozen.values():
        if copy_sources:
            copy = array.copy()
            for node in nodes:
                if node.value is array:
                    node.value = copy
        array.flags.writeable = True
    STATE.frozen.clear()


def _freezable(value: object) -> bool:
    """A large NumPy array whose memory NumPy owns (a flag set read-only can be set back)."""
    if type(value) is not np.ndarray or value.nbytes < FREEZE_BYTES:
        return False
    base = value
    while isinstance(base.base, np.ndarray):
        base = base.base
    return base.flags.owndata


def _frozen_source(value: np.ndarray, entry: str | None = None, meta: Meta | None = None) -> Node:
    """A source node reading a large NumPy array in place: the array is made read-only until the
    outermost :func:`deferring` block ends, so no write can change the record behind its back
    (a write raises; a fetch then runs the sample again eagerly, after :func:`thaw`)."""
    node = Node(None, (), {}, meta or meta_of(value), value, entry)
    found = STATE.frozen.get(id(value))
    if found is not None and found[0] is value:
        found[1].append(node)
    elif value.flags.writeable:
        value.flags.writeable = False
        STATE.frozen[id(value)] = (value, [node])
    return node


def _snapshot(value: object) -> Any:
    """A concrete argument as recorded: arrays copied once per outermost block (later writes by
    the user must not reach the record; samples sharing one array keep sharing the copy)."""
    if not isinstance(value, np.ndarray | torch.Tensor):
        return value
    hit = STATE.copies.get(id(value))
    if hit is not None and hit[0] is value:
        return hit[1]
    copy = value.copy() if isinstance(value, np.ndarray) else value.detach().clone()
    STATE.copies[id(value)] = (value, copy)
    return copy


# -- recording and forcing ----------------------------------------------------------------------


def has_lazy(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether any argument (or an item of a list/tuple argument) is deferred."""
    for value in (*args, *kwargs.values()) if kwargs else args:
        if isinstance(value, Lazy):
            return True
        if (type(value) is list or type(value) is tuple) and any(
            isinstance(v, Lazy) for v in value
        ):
            return True
    return False


def _concrete(value: object, reason: str, detail: str) -> Any:
    if isinstance(value, Lazy):
        return value._force(reason, detail)
    if isinstance(value, list | tuple) and any(isinstance(v, Lazy) for v in value):
        items = [v._force(reason, detail) if isinstance(v, Lazy) else v for v in value]
        return type(value)(items) if isinstance(value, list) else tuple(items)
    return value


def force_all(
    args: tuple[Any, ...], kwargs: dict[str, Any], reason: str, detail: str
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The arguments with every deferred value forced (counted under ``reason``)."""
    return (
        tuple(_concrete(a, reason, detail) for a in args),
        {k: _concrete(v, reason, detail) for k, v in kwargs.items()},
    )


def call(
    op: Op | None,
    fallback: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    detail: str = "",
) -> Any:
    """Record ``op`` on deferred arguments, or run ``fallback`` on forced ones.

    Arguments that were deferred but have been computed count as concrete. Without any pending
    deferred argument the call runs eagerly (``fallback``); outside a fetch, or when ``op`` is
    ``None`` or refuses these arguments, the deferred ones are forced first.
    """
    # One pass: what each argument is as a signature sees it (a pending deferred value by its
    # Meta, a computed one by its value) and as the node records it (the pending one's node).
    metas: list[Any] = []
    nodes: list[Any] = []
    pending = nested = computed = arrays = False
    entry = None
    for value in args:
        if isinstance(value, Lazy):
            node = value._node
            if node.value is _PENDING:
                pending = True
                metas.append(node.meta)
                nodes.append(node)
                entry = entry or node.entry
                continue
            computed = True
            value = node.value
        elif (type(value) is list or type(value) is tuple) and any(
            isinstance(v, Lazy) for v in value
        ):
            nested = True
        if isinstance(value, _ARRAYS):
            arrays = True
        metas.append(value)
        nodes.append(value)
    plain = True  # no keyword argument is deferred or an array
    if kwargs:
        kw_pending, kw_nested, kw_computed, plain = _scan(kwargs)
        pending, nested = pending or kw_pending, nested or kw_nested
        if kw_computed:
            kwargs = {k: _resolved(v) for k, v in kwargs.items()}
    if computed:  # deferred arguments computed already count as concrete
        args = tuple([_resolved(a) for a in args])
    if not (pending or nested):
        return fallback(*args, **kwargs)
    if nested or not STATE.active or op is None:
        return _refused(op, fallback, args, kwargs, detail, nested)
    return _record(op, fallback, args, kwargs, detail, (metas, nodes, entry, arrays, plain))


def _scan(kwargs: dict[str, Any]) -> tuple[bool, bool, bool, bool]:
    """Whether the keyword arguments hold pending, nested or computed deferred values, and
    whether they are plain (neither deferred nor arrays: recorded as they are)."""
    pending = nested = computed = False
    plain = True
    for value in kwargs.values():
        if isinstance(value, Lazy):
            plain = False
            if value._node.value is _PENDING:
                pending = True
            else:
                computed = True
        elif (type(value) is list or type(value) is tuple) and any(
            isinstance(v, Lazy) for v in value
        ):
            nested = True
        elif isinstance(value, _ARRAYS):
            plain = False
    return pending, nested, computed, plain


def _refused(
    op: Op | None,
    fallback: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    detail: str,
    nested: bool,
) -> Any:
    """The call forced: outside a :func:`deferring` block, without an op, or on a list of
    deferred values."""
    if not STATE.active:
        reason = "collate" if STATE.collating else "outside"
        return _forced_call(fallback, args, kwargs, reason, _what(op, fallback, detail))
    if op is None:
        return _forced_call(fallback, args, kwargs, "unsupported", _what(op, fallback, detail))
    what = _what(op, fallback, detail)
    return _forced_call(fallback, args, kwargs, "unsupported", f"{what} of a list")


def _record(
    op: Op,
    fallback: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    detail: str,
    scanned: tuple[list[Any], list[Any], str | None, bool, bool],
) -> Any:
    metas, nodes, entry, arrays, plain = scanned
    metas_t = tuple(metas)
    metas_kw = kwargs
    if not plain:
        metas_kw = {}
        for name, value in kwargs.items():
            if isinstance(value, Lazy):
                metas_kw[name] = value._node.meta
                entry = entry or value._node.entry
            else:
                metas_kw[name] = value
    try:
        meta = op.meta(metas_t, metas_kw)
        if op.checks_samples:
            refused = op.sample_refusal(metas_t, metas_kw)
            if refused is not None:
                raise UnsupportedOperation(refused)
    except UnsupportedOperation as e:
        what = _what(op, fallback, detail)
        return _forced_call(fallback, args, kwargs, "unsupported", f"{what}: {e}"[:120])
    if arrays:  # concrete arrays: recorded in place (frozen) or copied
        nodes = [_argument(op, i, v) if isinstance(v, _ARRAYS) else v for i, v in enumerate(nodes)]
    node_kwargs = dict(kwargs) if plain and kwargs else kwargs  # the record's own keywords
    if not plain:
        node_kwargs = {
            k: v._node
            if isinstance(v, Lazy)
            else _argument(op, k, v)
            if isinstance(v, _ARRAYS)
            else v
            for k, v in kwargs.items()
        }
    node = Node(op, tuple(nodes), node_kwargs, meta, _PENDING, entry)
    if op.view:
        for parent in node.inputs():
            parent.views += 1
    STATE.scope.created += 1
    return LazyTensor(node) if meta.kind == "tensor" else LazyArray(node)


def _what(op: Op | None, fallback: Callable[..., Any], detail: str) -> str:
    return detail or (op.name if op is not None else getattr(fallback, "__name__", "call"))


def _forced_call(
    fallback: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    reason: str,
    detail: str,
) -> Any:
    forced_args, forced_kwargs = force_all(args, kwargs, reason, detail)
    return fallback(*forced_args, **forced_kwargs)


def _resolved(value: object) -> Any:
    if isinstance(value, Lazy) and value._node.done:
        return value._node.value
    return value


def _argument(op: Op, slot: int | str, value: Any) -> Any:
    """A concrete argument as a node records it: large data arrays in place (frozen), the rest
    as :func:`_snapshot` keeps it."""
    if _freezable(value) and op.slot_kind(slot, value) == _ops.DATA:
        return _frozen_source(value)
    return _snapshot(value)


def start(op: Op, data: Any, args: tuple[Any, ...], kwargs: dict[str, Any], entry: str) -> Any:
    """Begin a chain: ``op`` on a concrete data value (the decoded image) becomes deferred.

    Raises:
        UnsupportedOperation: ``op`` refuses these arguments (the caller runs it eagerly).
    """
    data_meta = meta_of(data)
    metas = tuple([data_meta if a is data else a for a in args])
    metas_kw = {k: (data_meta if v is data else v) for k, v in kwargs.items()} if kwargs else {}
    meta = op.meta(metas, metas_kw)
    refusal = getattr(op, "refusal", None)
    reason = refusal(args, kwargs) if refusal is not None else None
    if reason is not None:  # what only the values tell (NaN, inf): the call runs eagerly
        raise UnsupportedOperation(reason)
    if _freezable(data):
        root = _frozen_source(data, entry, data_meta)
    else:
        root = source(_snapshot(data), entry, data_meta)  # a copy: the same shape and dtype
    node = Node(
        op,
        tuple([root if a is data else _snapshot(a) for a in args]),
        {k: (root if v is data else _snapshot(v)) for k, v in kwargs.items()} if kwargs else {},
        meta,
        entry=entry,
    )
    scope = STATE.scope
    scope.created += 1
    scope.entries.add(entry)
    return wrap(node)


def wrap(node: Node) -> Lazy:
    """The deferred value of a node."""
    return LazyTensor(node) if node.meta.kind == "tensor" else LazyArray(node)


def ready(value: object) -> Lazy:
    """A concrete value dressed as a deferred one (samples forced in a batch of deferred ones)."""
    return wrap(source(value))


# -- the deferred values ----------------------------------------------------------------------


class Lazy:
    """Common ground of :class:`LazyArray` and :class:`LazyTensor`."""

    __slots__ = ("__weakref__", "_node")
    __array_priority__ = 1000.0

    def __init__(self, node: Node) -> None:
        self._node = node

    def _force(self, reason: str, detail: str = "") -> Any:
        node = self._node
        if node.done:
            return node.value
        value = evaluate(node)
        FORCED.forced(reason, detail, node.entry)
        return value

    @property
    def ndim(self) -> int:
        """Number of dimensions (no computation)."""
        return self._node.meta.ndim

    def __len__(self) -> int:
        shape = self._node.meta.shape
        if not shape:
            raise TypeError("len() of unsized object")
        return shape[0]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        value = self._force("conversion", "__array__")
        array = value.numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
        return array if dtype is None else array.astype(dtype, copy=False)

    def __bool__(self) -> bool:
        return bool(self._force("truth_value", "bool()"))

    def __float__(self) -> float:
        return float(self._force("number", "float()"))

    def __int__(self) -> int:
        return int(self._force("number", "int()"))

    def __index__(self) -> int:
        return self._force("number", "index").__index__()

    def __complex__(self) -> complex:
        return complex(self._force("number", "complex()"))

    def __iter__(self) -> Iterator[Any]:
        return iter(self._force("iteration", "iteration"))

    def __repr__(self) -> str:
        if not self._node.done and not recording():
            meta = self._node.meta
            return f"<deferred {meta.kind} {meta.shape} {meta.dtype}>"
        return repr(self._force("repr", "repr()"))

    def __str__(self) -> str:
        return str(self._force("repr", "str()"))

    def __format__(self, spec: str) -> str:
        return format(self._force("repr", "format()"), spec)

    def __setitem__(self, key: object, value: object) -> None:
        target = self._force("write", "x[...] = v")
        if isinstance(value, Lazy):
            value = value._force("write", "x[...] = v")
        target[key] = value

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._force("unsupported", f"attribute .{name}"), name)

    def _inplace(self, result: object) -> Any:
        """Adopt ``result`` (the out-of-place operation) as this value: ``x -= m`` rebinds."""
        if isinstance(result, Lazy):
            self._node = result._node
            return self
        return result

    def _writable(self) -> bool:
        """Whether an in-place operation may rebind (no recorded view shares this memory)."""
        node = self._node
        return not node.done and node.views == 0 and not (node.op is not None and node.op.view)

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickling a deferred value outside collate (a user's cache, a queue) carries the data.
        return (ready, (self._force("conversion", "pickle"),))


_UFUNC_OPS: dict[Any, tuple[Op | None, str]] = {}


def _record_ufunc(ufunc: Any, inputs: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    found = _UFUNC_OPS.get(ufunc)
    if found is None:
        name = f"numpy.{ufunc.__name__}"
        found = _UFUNC_OPS[ufunc] = (_ops.elementwise_op(name), name)
    return call(found[0], ufunc, inputs, kwargs, found[1])


class LazyArray(Lazy):
    """A deferred NumPy array (see the module docstring)."""

    __slots__ = ()

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape (no computation)."""
        return self._node.meta.shape

    @property
    def dtype(self) -> np.dtype:
        """The dtype (no computation)."""
        return np.dtype(self._node.meta.dtype)

    @property
    def size(self) -> int:
        """Number of elements (no computation)."""
        return int(np.prod(self._node.meta.shape, dtype=np.int64))

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        """Bytes of the array."""
        return self.size * self.dtype.itemsize

    @property
    def T(self) -> Any:
        """The transpose (recorded)."""
        return call(_views.numpy_view("numpy.ndarray.T"), lambda a: a.T, (self,), {})

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if method == "__call__" and kwargs.get("out") is None:
            kwargs.pop("out", None)
            return _record_ufunc(ufunc, inputs, kwargs)
        forced, forced_kw = force_all(
            inputs, kwargs, "unsupported", f"numpy.{ufunc.__name__}.{method}"
        )
        return getattr(ufunc, method)(*forced, **forced_kw)

    def __array_function__(
        self, func: Any, types: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        if func is np.stack:
            axis = args[1] if len(args) > 1 else kwargs.get("axis", 0)
            return _stacked(args[0] if args else kwargs.get("arrays"), axis, func, args, kwargs)
        name = f"numpy.{func.__name__}" if func.__module__ == "numpy" else func.__qualname__
        op = _views.numpy_view(name) or _ops.elementwise_op(name)
        if op is None:
            forced, forced_kw = force_all(args, kwargs, "unsupported", name)
            return func(*forced, **forced_kw)
        return call(op, func, args, kwargs, name)

    def __getitem__(self, key: object) -> Any:
        op = _getitem_op()
        items = key if type(key) is tuple else (key,)
        if any(isinstance(i, _INDEX_ARRAYS) for i in items):
            target = self._force("data_dependent", "x[array]")
            index = tuple(
                i._force("data_dependent", "x[array]") if isinstance(i, Lazy) else i for i in items
            )
            return target[index if isinstance(key, tuple) else index[0]]
        return call(op, _getitem, (self, key), {}, "x[...]")

    def astype(self, *args: Any, **kwargs: Any) -> Any:
        """``ndarray.astype`` (recorded)."""
        return self._method("astype", args, kwargs)

    def copy(self, *args: Any, **kwargs: Any) -> Any:
        """``ndarray.copy`` (recorded)."""
        return self._method("copy", args, kwargs)

    def transpose(self, *args: Any, **kwargs: Any) -> Any:
        """``ndarray.transpose`` (recorded)."""
        return self._method("transpose", args, kwargs)

    def reshape(self, *args: Any, **kwargs: Any) -> Any:
        """``ndarray.reshape`` (recorded)."""
        return self._method("reshape", args, kwargs)

    def clip(self, *args: Any, **kwargs: Any) -> Any:
        """``ndarray.clip`` (recorded as ``numpy.clip``)."""
        return call(_ops.elementwise_op("numpy.clip"), np.clip, (self, *args), kwargs, "clip")

    def _method(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        op = _views.numpy_view(f"numpy.ndarray.{name}")
        return call(op, getattr(np.ndarray, name), (self, *args), kwargs, f".{name}()")

    def tolist(self) -> Any:
        """Forces."""
        return self._force("number", ".tolist()").tolist()

    def item(self, *args: Any) -> Any:
        """Forces."""
        return self._force("number", ".item()").item(*args)


_INDEX_ARRAYS = (Lazy, np.ndarray, list)
_GETITEM: list[Op] = []


def _getitem_op() -> Op:
    if not _GETITEM:
        op = _views.numpy_view("operator.getitem")
        assert op is not None
        _GETITEM.append(op)
    return _GETITEM[0]


def _getitem(target: Any, key: Any) -> Any:
    return target[key]


_UFUNCS = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "truediv": np.divide,
    "floordiv": np.floor_divide, "mod": np.remainder, "pow": np.power,
    "and_": np.bitwise_and, "or_": np.bitwise_or, "xor": np.bitwise_xor,
    "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
    "eq": np.equal, "ne": np.not_equal,
    "neg": np.negative, "pos": np.positive, "abs": np.absolute, "invert": np.invert,
}  # fmt: skip
"""The ufunc a deferred array's operator records, by the operator's name in :mod:`operator`."""

_LEFT_OUT = {
    name: "never installed on deferred arrays: `x @ y` and `x << n` raise TypeError unless the "
    "other operand is an ndarray (its reflected operator reaches __array_ufunc__); installing "
    "them would change what records"
    for name in ("matmul", "lshift", "rshift")
}


def _forward(name: str) -> Callable[[Any, Any], Any]:
    ufunc = _UFUNCS[name]
    if name == "pow":

        def power(self: LazyArray, other: Any) -> Any:
            # ndarray's ** squares for an exponent of 2 (bool ** 2 is int8, np.power gives int64)
            if type(other) is int and other == 2 and np.dtype(self._node.meta.dtype) == np.bool_:
                return _record_ufunc(np.square, (self,), {})
            return _record_ufunc(ufunc, (self, other), {})

        return power

    def forward(self: Any, other: Any) -> Any:
        return _record_ufunc(ufunc, (self, other), {})

    return forward


def _reflected(name: str) -> Callable[[Any, Any], Any]:
    ufunc = _UFUNCS[name]

    def reflected(self: Any, other: Any) -> Any:
        return _record_ufunc(ufunc, (other, self), {})

    return reflected


def _inplace_method(name: str) -> Callable[[Any, Any], Any]:
    ufunc = _UFUNCS[name]  # x **= 2 records np.power, as before: only ** squares bools
    concrete = in_place(name)

    def inplace(self: Any, other: Any) -> Any:
        if self._writable():
            return self._inplace(_record_ufunc(ufunc, (self, other), {}))
        target = self._force("write", "in-place operator")
        value = other._force("write", "in-place operator") if isinstance(other, Lazy) else other
        return concrete(target, value)

    return inplace


def _unary(name: str) -> Callable[[Any], Any]:
    ufunc = _UFUNCS[name]

    def unary(self: Any) -> Any:
        return _record_ufunc(ufunc, (self,), {})

    return unary


def _inplace_concrete(target: object, short: str, value: object) -> Any:
    import operator

    return getattr(operator, f"i{short}")(target, value)


install_operators(
    LazyArray,
    forward=_forward,
    reflected=_reflected,
    inplace=_inplace_method,
    comparison=_forward,  # records the comparison's ufunc, as a forward operator does
    unary=_unary,
    left_out=_LEFT_OUT,
)


class LazyTensor(Lazy):
    """A deferred torch tensor (after ``torch.from_numpy`` of a deferred array)."""

    __slots__ = ()

    @property
    def shape(self) -> torch.Size:
        """The shape (no computation)."""
        return torch.Size(self._node.meta.shape)

    @property
    def dtype(self) -> torch.dtype:
        """The dtype (no computation)."""
        return self._node.meta.dtype

    @property
    def device(self) -> torch.device:
        """Deferred tensors live on the CPU, as the per-sample code made them."""
        return torch.device("cpu")

    @property
    def is_cuda(self) -> bool:
        """Always False (deferred tensors are CPU tensors)."""
        return False

    @property
    def requires_grad(self) -> bool:
        """Always False."""
        return False

    def size(self, dim: int | None = None) -> Any:
        """``Tensor.size`` (no computation)."""
        return self.shape if dim is None else self.shape[dim]

    def dim(self) -> int:
        """``Tensor.dim`` (no computation)."""
        return self._node.meta.ndim

    def numel(self) -> int:
        """``Tensor.numel`` (no computation)."""
        return int(np.prod(self._node.meta.shape, dtype=np.int64))

    def element_size(self) -> int:
        """``Tensor.element_size`` (no computation)."""
        return torch.empty((), dtype=self.dtype).element_size()

    @classmethod
    def __torch_function__(
        cls, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        if func is torch.stack:
            axis = args[1] if len(args) > 1 else kwargs.get("dim", 0)
            return _stacked(args[0] if args else kwargs.get("tensors"), axis, func, args, kwargs)
        op = _views.torch_function(func)
        if op is None:
            name = getattr(func, "__name__", "torch function")
            return _forced_call(func, args, kwargs, "unsupported", f"torch.{name}")
        return call(op, func, args, kwargs, op.name)

    def __getattr__(self, name: str) -> Any:
        op = None if name.startswith("__") else _views.tensor_method(name)
        if op is None:
            return super().__getattr__(name)

        def method(*args: Any, **kwargs: Any) -> Any:
            return call(op, op.function, (self, *args), kwargs, f".{name}()")

        return method

    def __getitem__(self, key: object) -> Any:
        return self._force(
            "data_dependent" if _dynamic(key) else "unsupported", "t[...]"
        ).__getitem__(key)

    def numpy(self) -> np.ndarray:
        """Forces."""
        return self._force("conversion", ".numpy()").numpy()

    def tolist(self) -> Any:
        """Forces."""
        return self._force("number", ".tolist()").tolist()

    def item(self) -> Any:
        """Forces."""
        return self._force("number", ".item()").item()


def _dynamic(key: object) -> bool:
    items = key if isinstance(key, tuple) else (key,)
    return any(isinstance(i, Lazy | torch.Tensor | np.ndarray | list) for i in items)


def _install_tensor_operators() -> None:
    for name in _views.TORCH_OPERATORS:

        def operator_method(self: object, *others: Any, name: str = name) -> Any:
            op = _views.torch_operator(name)
            assert op is not None
            return call(op, op.function, (self, *others), {}, name)

        setattr(LazyTensor, name, operator_method)
    for short in ("add", "sub", "mul", "truediv"):

        def inplace(self: Any, other: Any, short: str = short) -> Any:
            if self._writable():
                return self._inplace(getattr(self, f"__{short}__")(other))
            target = self._force("write", "in-place operator")
            value = other._force("write", "in-place operator") if isinstance(other, Lazy) else other
            return _inplace_concrete(target, short, value)

        setattr(LazyTensor, f"__i{short}__", inplace)
    LazyTensor.__hash__ = None  # type: ignore[assignment]


_install_tensor_operators()
