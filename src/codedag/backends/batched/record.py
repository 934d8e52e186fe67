"""The record of a sample: its nodes, the recording switch and the arrays its arguments read.

A deferred value (:mod:`.deferred`) holds a :class:`Node`: the recorded operation, its arguments
(other nodes, or concrete values) and the result's shape and dtype. :func:`evaluate` replays a
node's pending calls through the original CPU functions (the per-sample reference itself).

:func:`deferring` is the one switch of recording (a block per fetch and per sample, in this
thread); :func:`collating` marks a custom ``collate_fn``. Concrete arrays recorded as arguments
are copied once per outermost block (:func:`snapshot`), or, from :data:`FREEZE_BYTES` on, read in
place and made read-only until the block ends (:func:`frozen_source`, :func:`thaw`).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch

from codedag.backends.batched.ops import Meta, Op, meta_of
from codedag.backends.lazy_values import PENDING, Call


class Node(Call):
    """One recorded operation of a sample (or a concrete source value when ``op`` is None): the
    lazy-value core's :class:`~codedag.backends.lazy_values.Call` with what batching needs.

    A node keeps its call once computed (the executor and the collate read the record); its
    function is the operation's original CPU function, replayed by :func:`evaluate`.

    Attributes:
        op: the operation; ``None`` for a source.
        args, kwargs: its arguments: other nodes, or concrete values.
        meta: the result's shape and dtype.
        value: the result once computed (a source's value from the start).
        entry: the entry site that started this chain (for accounting), or ``None``.
        views: how many recorded views read this node's memory (writes then force).
    """

    __slots__ = ("__weakref__", "entry", "meta", "op", "views")

    def __init__(
        self,
        op: Op | None,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        meta: Meta,
        value: object = PENDING,
        entry: str | None = None,
    ) -> None:
        self.op = op
        self.function = None if op is None else op.original
        self.args = args
        self.kwargs = kwargs
        self.meta = meta
        self.value = value
        self.entry = entry
        self.views = 0

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
        assert current.function is not None
        args = tuple(a.value if isinstance(a, Node) else a for a in current.args)
        kwargs = {k: (v.value if isinstance(v, Node) else v) for k, v in current.kwargs.items()}
        current.value = current.function(*args, **kwargs)
    return node.value


# -- the recording switch ------------------------------------------------------------------------------


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


def freezable(value: object) -> bool:
    """A large NumPy array whose memory NumPy owns (a flag set read-only can be set back)."""
    if type(value) is not np.ndarray or value.nbytes < FREEZE_BYTES:
        return False
    base = value
    while isinstance(base.base, np.ndarray):
        base = base.base
    return base.flags.owndata


def frozen_source(value: np.ndarray, entry: str | None = None, meta: Meta | None = None) -> Node:
    """A source node reading a large NumPy array in place: the array is made read-only until the
    outermost :func:`deferring` block ends, so no write can change the record behind its back
    (a write raises; a fetch then runs the sample again eagerly, after :func:`thaw`)."""
    node = source(value, entry, meta)
    found = STATE.frozen.get(id(value))
    if found is not None and found[0] is value:
        found[1].append(node)
    elif value.flags.writeable:
        value.flags.writeable = False
        STATE.frozen[id(value)] = (value, [node])
    return node


def snapshot(value: object) -> Any:
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
