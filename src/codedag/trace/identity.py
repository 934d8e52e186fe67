"""Values by identity for one tracing window: which object is which value node.

Dataflow is tracked by object identity, and ``id()`` values are reused once an object dies. Every
tracked object is therefore held through a weak reference whose callback drops its entry when the
object dies, or by a strong reference when its type does not support weak references (tuples,
lists, dicts), so an object allocated at a dead one's address never inherits its history (never
creates a false edge).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from codedag.trace.records import Sequence, first_items
from codedag.trace.value_nodes import MAX_CONTAINER_SCAN, DataTypes, describe

# A live entry: (weak reference or the object, value sequence number, version, shape, is weak).
Entry = tuple[Any, int, int, Any, bool]

_CONTAINERS = (tuple, list, dict)
_MAX_SHARING = 8
"""The latest tracked views of one memory and shape rank an item's array is looked for among."""


class _KeyedRef(weakref.ref[Any]):
    """A weak reference that knows its table key (one shared callback, no partial per value)."""

    __slots__ = ("key",)
    key: int


class ValueTracker:
    """The value nodes of one window, by object identity.

    Args:
        values: the window's value records (``[seq, name, version, type name, shape, dtype,
            nbytes, device, strides]``), extended here.
        sequence: the window's numbering, shared with call records.
        data_types: which values become value nodes.
    """

    def __init__(self, values: list[list[Any]], sequence: Sequence, data_types: DataTypes) -> None:
        self.values = values
        self.sequence = sequence
        self.is_data: Callable[[type], bool] = data_types.is_data
        # type -> is data, as far as known: the hot paths read it before calling is_data
        self.data_cache: dict[type, bool] = data_types._cache
        self.live: dict[int, Entry] = {}
        self._weakrefable: dict[type, bool] = {}
        self._forget = self._forget_ref  # one bound method for every weak reference
        # makes the step by which an untracked view of a tracked array was taken from it
        # (``(view, base's value) -> the view's value``); set by the call recorder
        self.view_step: Callable[[object, int], int] | None = None
        # (id of the array owning a tracked NumPy view's memory, the view's dimensions) -> the
        # tracked views of it (an item's array is looked for among those of one more dimension)
        self._sharing: dict[tuple[int, int], list[weakref.ref[Any]]] = {}

    def _forget_ref(self, ref: _KeyedRef) -> None:
        """Weak reference callback: the tracked object died, its id may be reused."""
        entry = self.live.get(ref.key)
        if entry is not None and entry[0] is ref:
            del self.live[ref.key]

    def hold(self, obj: object, vseq: int, version: int, shape: object = None) -> None:
        """Make ``obj`` value ``vseq`` at ``version`` until it dies or the window closes."""
        cls = type(obj)
        weak = self._weakrefable.get(cls)
        if weak is None:
            weak = self._weakrefable[cls] = _supports_weakref(obj)
        key = id(obj)
        if weak:
            ref = _KeyedRef(obj, self._forget)
            ref.key = key
            self.live[key] = (ref, vseq, version, shape, True)
        else:
            self.live[key] = (obj, vseq, version, shape, False)

    def lookup(self, obj: object) -> Entry | None:
        """The live entry of ``obj`` (``entry[1]`` its value, ``entry[2]`` its version), or
        None when it is not tracked."""
        entry = self.live.get(id(obj))
        if entry is None:
            return None
        held = entry[0]() if entry[4] else entry[0]
        return entry if held is obj else None

    def new_value(self, obj: object, version: int) -> int:
        """Record a new value node (or a new version) for ``obj``; return its sequence number."""
        sequence = self.sequence
        vseq = sequence.next
        sequence.next = vseq + 1
        name, type_name, shape, dtype, nbytes, device, strides = describe(obj)
        if type(obj) in _CONTAINERS:
            is_data = self.is_data
            nbytes = sum(
                describe(x)[4] for x in first_items(obj, MAX_CONTAINER_SCAN) if is_data(type(x))
            )
        self.values.append([vseq, name, version, type_name, shape, dtype, nbytes, device, strides])
        self.hold(obj, vseq, version, shape)
        if self.view_step is not None:
            base = _numpy_base(obj)
            if base is not None:  # a view (``np.load``'s array of its file's flat buffer)
                key = (id(base), obj.ndim)  # type: ignore[attr-defined]
                self._sharing.setdefault(key, []).append(weakref.ref(obj))
        return vseq

    def use(self, obj: object, found: list[int]) -> int:
        """The value node of ``obj`` (made at version 0 when new), added to ``found`` once. A
        new NumPy view of a tracked array (an item of iterating over it, ``for frame in
        video``, made where no traced code sees it) is made by a step taking that array."""
        entry = self.lookup(obj)
        if entry is not None:
            vseq = entry[1]
        else:
            base = self._tracked_base(obj)
            view_step = self.view_step
            vseq = (
                view_step(obj, base)
                if base is not None and view_step is not None
                else self.new_value(obj, 0)
            )
        if vseq not in found:
            found.append(vseq)
        return vseq

    def use_tracked(self, obj: object, found: list[int]) -> bool:
        """Add the value of ``obj`` to ``found`` where it is tracked (a container a call
        returned, a number a call computed from data); whether it is."""
        entry = self.lookup(obj)
        if entry is not None and entry[1] not in found:
            found.append(entry[1])
        return entry is not None

    def _tracked_base(self, obj: object) -> int | None:
        """The value of the tracked array ``obj`` is an item of (an item of iterating over it:
        one less dimension, the rest of its shape and strides), where ``obj`` is a NumPy view
        of the memory it views."""
        base = _numpy_base(obj)
        if base is None:
            return None
        entry = self.lookup(base)
        if entry is not None and _item_of(base, obj):
            return entry[1]
        views = self._sharing.get((id(base), obj.ndim + 1), ())  # type: ignore[attr-defined]
        for ref in views[-_MAX_SHARING:]:
            held = ref()
            if held is not None and held.base is base and _item_of(held, obj):
                entry = self.lookup(held)
                if entry is not None:
                    return entry[1]
        return None

    def clear(self) -> None:
        """Drop every reference (the window closed)."""
        self.live.clear()
        self._sharing.clear()


def _numpy_base(obj: object) -> Any:
    """The array owning the memory of the NumPy view ``obj``; None for anything else."""
    cls = type(obj)
    if cls.__name__ != "ndarray" or cls.__module__ != "numpy":
        return None
    base = getattr(obj, "base", None)
    return base if type(base) is cls else None


def _item_of(array: Any, item: Any) -> bool:
    """Whether ``item`` can be an item of iterating over ``array`` (``array[k]``)."""
    return (
        array.ndim == item.ndim + 1
        and array.shape[1:] == item.shape
        and array.strides[1:] == item.strides
    )


def _supports_weakref(obj: object) -> bool:
    try:
        weakref.ref(obj)
    except TypeError:
        return False
    return True
