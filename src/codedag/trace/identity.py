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
        return vseq

    def use(self, obj: object, found: list[int]) -> int:
        """The value node of ``obj`` (made at version 0 when new), added to ``found`` once."""
        entry = self.lookup(obj)
        vseq = entry[1] if entry is not None else self.new_value(obj, 0)
        if vseq not in found:
            found.append(vseq)
        return vseq

    def clear(self) -> None:
        """Drop every reference (the window closed)."""
        self.live.clear()


def _supports_weakref(obj: object) -> bool:
    try:
        weakref.ref(obj)
    except TypeError:
        return False
    return True
