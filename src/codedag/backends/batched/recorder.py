"""How a call on deferred values is recorded or forced, and the deferred values' common ground.

:func:`call` records a library call on deferred arguments as a new :class:`~.record.Node` (or
runs it on forced ones: outside a recording block, without an op, or where the op refuses the
arguments), :func:`start` begins a chain on a concrete value, :func:`wrap` and :func:`ready` make
the deferred value of a node. :class:`Lazy` is what :class:`~.lazy_array.LazyArray` and
:class:`~.lazy_tensor.LazyTensor` share: a value of the lazy-value core
(:mod:`codedag.backends.lazy_values`) that forces through :func:`~.record.evaluate`, counted by
reason (:mod:`.forcing`). The public face of all of it is :mod:`.deferred`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

import codedag.backends.batched.ops as _ops
from codedag.backends.batched.forcing import FORCED
from codedag.backends.batched.ops import Op, meta_of
from codedag.backends.batched.record import (
    _STACKERS,
    STATE,
    Node,
    evaluate,
    freezable,
    frozen_source,
    recording,
    snapshot,
    source,
)
from codedag.backends.lazy_values import (
    MISSING,
    PENDING,
    Args,
    Kwargs,
    LazyValue,
    forcing_inplace,
    holds,
    resolve_args,
    resolve_kwargs,
)
from codedag.errors import UnsupportedOperation

_PENDING: Any = PENDING
_ARRAYS = (np.ndarray, torch.Tensor)


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


# -- recording and forcing ----------------------------------------------------------------------


def has_lazy(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether any argument (or an item of a list/tuple argument) is deferred."""
    return holds(args, kwargs, Lazy)


def force_all(
    args: tuple[Any, ...], kwargs: dict[str, Any], reason: str, detail: str
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The arguments with every deferred value forced (counted under ``reason``)."""

    def force(value: Lazy) -> Any:
        return value._force(reason, detail)

    return resolve_args(args, force, Lazy), resolve_kwargs(kwargs, force, Lazy)


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
        return _forced_call(fallback, args, kwargs, *_refusal(op, fallback, detail))
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


def _refusal(op: Op | None, fallback: Callable[..., Any], detail: str) -> tuple[str, str]:
    """Why a call is forced, and what it is: outside a :func:`deferring` block, without an op,
    or on a list of deferred values."""
    if not STATE.active:
        return "collate" if STATE.collating else "outside", _what(op, fallback, detail)
    if op is None:
        return "unsupported", _what(op, fallback, detail)
    return "unsupported", f"{_what(op, fallback, detail)} of a list"


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
    return wrap(node)


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
    as :func:`.record.snapshot` keeps it."""
    if freezable(value) and op.slot_kind(slot, value) == _ops.DATA:
        return frozen_source(value)
    return snapshot(value)


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
    if freezable(data):
        root = frozen_source(data, entry, data_meta)
    else:
        root = source(snapshot(data), entry, data_meta)  # a copy: the same shape and dtype
    node = Node(
        op,
        tuple([root if a is data else snapshot(a) for a in args]),
        {k: (root if v is data else snapshot(v)) for k, v in kwargs.items()} if kwargs else {},
        meta,
        entry=entry,
    )
    scope = STATE.scope
    scope.created += 1
    scope.entries.add(entry)
    return wrap(node)


def wrap(node: Node) -> Lazy:
    """The deferred value of a node (:data:`KINDS`: ``LazyTensor`` for a tensor's)."""
    return KINDS["tensor" if node.meta.kind == "tensor" else "ndarray"](node)


KINDS: dict[str, type[Lazy]] = {}
"""The deferred value class of each kind (``"ndarray"``, ``"tensor"``), registered by
:mod:`.lazy_array` and :mod:`.lazy_tensor` (:mod:`.deferred` imports both)."""


def ready(value: object) -> Lazy:
    """A concrete value dressed as a deferred one (samples forced in a batch of deferred ones)."""
    return wrap(source(value))


# -- the deferred values ----------------------------------------------------------------------


_USES = {"truth": "truth_value", "attribute": "unsupported", "pickle": "conversion"}
_USES.update(inplace="write", len="number")
"""How a use of the lazy-value core is counted (:mod:`.forcing`), where the names differ."""


class Lazy(LazyValue):
    """Common ground of :class:`LazyArray` and :class:`LazyTensor`: the lazy-value core's
    :attr:`~codedag.backends.lazy_values.Impersonation.OWN_TYPE` rule."""

    __slots__ = ("__weakref__", "_node")

    def __init__(self, node: Node) -> None:
        self._node = node

    def _force(self, reason: str, detail: str = "") -> Any:
        node = self._node
        if node.done:
            return node.value
        value = evaluate(node)
        FORCED.forced(reason, detail, node.entry)
        return value

    def _rebuild(self) -> Callable[[Any], Any]:
        return ready

    def _use(self, use: str, detail: str) -> Any:
        return self._force(_USES.get(use, use), detail)

    def _attribute(self, name: str) -> Any:
        return self._node.meta.shape if name == "shape" else MISSING

    def _forced(self, function: Callable[..., Any], args: Args, kwargs: Kwargs, detail: str) -> Any:
        return _forced_call(function, args, kwargs, "unsupported", detail)

    @property
    def ndim(self) -> int:
        """Number of dimensions (no computation)."""
        return self._node.meta.ndim

    def __repr__(self) -> str:
        if not self._node.done and not recording():
            meta = self._node.meta
            return f"<deferred {meta.kind} {meta.shape} {meta.dtype}>"
        return repr(self._force("repr", "repr()"))

    def __str__(self) -> str:
        return str(self._force("repr", "str()"))

    def __format__(self, spec: str) -> str:
        return format(self._force("repr", "format()"), spec)

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


def recording_inplace(name: str, forward: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """The in-place operator of a deferred value: ``forward`` rebinds the value where no recorded
    view shares its memory, else it computes and writes into it, as NumPy does."""
    forced = forcing_inplace(name)

    def inplace(self: Any, other: Any) -> Any:
        if self._writable():
            return self._inplace(forward(self, other))
        return forced(self, other)

    return inplace
