"""What a recorded call received: its arguments in the raw form of call records.

Arguments become ``(label, kind, payload)`` entries (``ARG_*`` kinds in
:mod:`codedag.trace.records`); the data values among them become value nodes and are collected
in ``found`` (the call uses them). User-code frames keep scalars and types only; library calls
keep enough to rebuild the call (small arrays' bytes, small containers' items, descriptive
objects), see :mod:`codedag.trace.args`.
"""

from __future__ import annotations

from typing import Any

from codedag.trace.args import kept_object, small_bytes
from codedag.trace.identity import ValueTracker
from codedag.trace.records import (
    ARG_CONTAINER,
    ARG_OBJ,
    ARG_SCALAR,
    ARG_SMALL,
    ARG_TYPE,
    ARG_VALUE,
    MAX_ITEMS,
    MAX_NESTING,
)
from codedag.trace.value_nodes import MAX_CONTAINER_SCAN, SCALARS

SCALAR_TYPES = frozenset(SCALARS)


class ArgumentCapture:
    """Turns arguments into call-record entries, tracking the data values among them."""

    def __init__(self, tracker: ValueTracker) -> None:
        self.tracker = tracker
        self.is_data = tracker.is_data
        self.data_cache = tracker.data_cache

    def user_arg(self, label: Any, obj: Any, out: list[Any], found: list[int]) -> None:
        """An argument of a user-code frame: scalars, values, containers' values, types."""
        cls = type(obj)
        if cls in SCALAR_TYPES:
            out.append((label, ARG_SCALAR, obj))
        elif self.data_cache.get(cls) or self.is_data(cls):
            out.append((label, ARG_VALUE, self.tracker.use(obj, found)))
        elif cls is tuple or cls is list or cls is dict:
            if not self.tracker.use_tracked(obj, found) and len(obj) <= MAX_CONTAINER_SCAN:
                self._items(obj, found)
            out.append((label, ARG_CONTAINER, (cls.__name__, len(obj), None)))
        else:
            self.tracker.use_tracked(obj, found)  # a number a call computed from data
            out.append((label, ARG_TYPE, cls))

    def library_arg(self, label: object, obj: object, out: list[Any], found: list[int]) -> None:
        """An argument of a library call, kept whole enough to rebuild the call."""
        if type(obj) in SCALAR_TYPES:
            out.append((label, ARG_SCALAR, obj))
        else:
            kind, payload = self._payload(obj, found, 0)
            out.append((label, kind, payload))

    def receiver(self, owner: object, out: list[Any], found: list[int]) -> None:
        """The ``self`` of a C method of a data value (``img.astype``): the call reads it."""
        out.append(("self", ARG_VALUE, self.tracker.use(owner, found)))

    def _payload(self, obj: Any, found: list[int], depth: int) -> tuple[int, Any]:
        cls = type(obj)
        if cls in SCALAR_TYPES:
            return ARG_SCALAR, obj
        if self.data_cache.get(cls) or self.is_data(cls):
            vseq = self.tracker.use(obj, found)
            data = small_bytes(obj)
            return (ARG_VALUE, vseq) if data is None else (ARG_SMALL, (vseq, data))
        if cls is tuple or cls is list or cls is dict:
            self.tracker.use_tracked(obj, found)
            n = len(obj)
            if n > MAX_ITEMS or depth >= MAX_NESTING:
                if n <= MAX_CONTAINER_SCAN:
                    self._items(obj, found)
                return ARG_CONTAINER, (cls.__name__, n, None)
            items: list[tuple[Any, ...]]
            if cls is dict:
                items = [(k, *self._payload(v, found, depth + 1)) for k, v in obj.items()]
            else:
                items = []
                for item in obj:  # mostly scalars: sizes, kernels, colors
                    if type(item) in SCALAR_TYPES:
                        items.append((ARG_SCALAR, item))
                    else:
                        items.append(self._payload(item, found, depth + 1))
            return ARG_CONTAINER, (cls.__name__, n, items)
        # a number a call computed from data: ``np.clip(x, lo, hi)`` reads ``lo = x.min()``
        self.tracker.use_tracked(obj, found)
        if kept_object(obj):
            return ARG_OBJ, obj
        return ARG_TYPE, cls

    def _items(self, obj: Any, found: list[int]) -> None:
        """The data values (and tracked objects) a container holds, one level down."""
        tracker = self.tracker
        is_data, lookup = self.is_data, tracker.lookup
        for item in obj.values() if type(obj) is dict else obj:
            if is_data(type(item)) or lookup(item) is not None:
                tracker.use(item, found)
