"""Counters of forked child processes, summed into the process that applied the patches.

Most real pipelines run ``__getitem__`` in DataLoader workers, so without this the main process's
``get_stats()`` would report nothing migrated. A forked child inherits the patched functions and
their counters; what it counts after the fork reaches the process that created the
:class:`WorkerStats` (its *owner*) through shared memory, and reading it never blocks, whatever
happens to the children:

* The owner maps one anonymous shared region (``mmap``) of fixed slots. A slot holds one child's
  values: a header (its pid, how often it published) and one row of integers per name.
* Only the owner hands out slots, in an ``os.register_at_fork`` *before* hook, so no two
  processes ever claim the same slot; the child finds its slot number in the memory it inherited.
* A child writes only its own slot and the owner only reads it: there is no lock at all, so a
  child terminated or killed at any moment (``Pool.terminate()``, a SIGKILLed DataLoader worker)
  cannot leave one held. Every value is one aligned 8-byte word, written and read whole.
* A child publishes its values every ``publish_interval_s`` from a daemon thread, whenever
  :func:`publish_now` is called (a guard decision), and once more when it exits normally
  (multiprocessing's finalizers, or ``atexit`` after a plain ``os.fork``). A killed child keeps
  its last publication: only what it counted in its last interval is lost.
* Slots of children that have ended are folded into the owner's sums and handed out again, so a
  DataLoader forking new workers every epoch never runs out.

Counted labels travel too (``labels``: the reasons of each function's fallbacks): each slot has
a text area the child rewrites whole at each publication, between two increments of a sequence
number, so the owner never takes a half-written text (it keeps the last whole one). A text past
the area's size keeps the most frequent labels and counts the rest under ``(other reasons)``:
every count keeps a label.

Children of children are not counted (only the owner hands out slots); spawned workers do not
run the patches at all (see docs/migration.md).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import mmap
import multiprocessing.util
import os
import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence

from codedag.util import forks
from codedag.util.signals import pid_exists

log = logging.getLogger(__name__)

COUNT_FIELDS = ("migrated", "fell_back", "passed_through", "nested")
FIELDS = COUNT_FIELDS
"""The counters of :meth:`codedag.migrate.wrapper.UniversalWrapper.counts` (the default fields)."""

DEFAULT_SLOTS = 256
"""Children that can publish at once; ended children's slots are reused."""

_HEADER = 2  # pid, number of publications
LABEL_BYTES = 16_384
"""Text area of one child's labels (JSON); what does not fit is counted as OTHER."""
OTHER = "(other reasons)"
_MAX_ENDED_ROWS = 1024  # per-child rows kept of ended children (their sums are all kept)
_UNCLAIMED_GRACE_S = 60.0  # a reserved slot whose child never wrote its pid is reused after this

_INSTANCES: weakref.WeakSet[WorkerStats] = weakref.WeakSet()
_hooks_lock = threading.Lock()
_hooks_installed = False
_publisher: threading.Thread | None = None


class WorkerStats:
    """Shared per-child values of forked children, per name; see the module docstring.

    Args:
        names: names (functions), in a fixed order.
        read: ``name -> {field: value}`` of this process's values.
        fields: the integer fields of each name.
        cumulative: fields that count up (a child reports them since its fork; the owner sums
            them); the others are states reported as they are (default: all fields count).
        slots: children that can hold a slot at once.
        publish_interval_s: how often a child publishes.
        labels: ``() -> {name: {label: count}}`` counted in this process since its fork (the
            reasons of fallbacks); summed over children by :meth:`label_totals`.
    """

    def __init__(
        self,
        names: Sequence[str],
        read: Callable[[str], Mapping[str, int]],
        fields: Sequence[str] = COUNT_FIELDS,
        *,
        cumulative: Collection[str] | None = None,
        slots: int = DEFAULT_SLOTS,
        publish_interval_s: float = 0.1,
        labels: Callable[[], Mapping[str, Mapping[str, int]]] | None = None,
    ) -> None:
        self.names = list(names)
        self.labels = labels
        self.read = read
        self.fields = tuple(fields)
        self.cumulative = frozenset(self.fields if cumulative is None else cumulative)
        self.publish_interval_s = publish_interval_s
        self.parent_pid = os.getpid()
        self._row = len(self.fields)
        self._stride = _HEADER + len(self.names) * self._row
        self._slots = max(1, slots)
        self._buffer = mmap.mmap(-1, self._slots * self._stride * 8)
        self._view = memoryview(self._buffer).cast("q")
        self._texts = _LabelSlots(self._slots) if labels is not None else None
        self._ended_labels: dict[str, Counter[str]] = {}
        # Owner side (never touched in a child: a child may inherit this lock held).
        self._lock = threading.Lock()
        self._free = list(range(self._slots - 1, -1, -1))
        self._reserved: dict[int, float] = {}
        self._ended = [0] * (len(self.names) * self._row)
        self._ended_rows: list[list[int]] = []
        self._warned_full = False
        self.tracking = True
        # Handed from the before-fork hook to the child through the copied memory.
        self._child_slot: int | None = None
        # Child side.
        self._slot: int | None = None
        self._baseline: list[int] = []
        _install_hooks()
        _INSTANCES.add(self)
        multiprocessing.util.register_after_fork(self, WorkerStats._after_multiprocessing_fork)

    # -- owner side ------------------------------------------------------------------------
    def stop_tracking(self) -> None:
        """Hand no slot to children forked from now on (values already published stay)."""
        self.tracking = False

    def _reserve(self) -> int | None:
        with self._lock:
            if not self._free:
                self._reclaim()
            if not self._free:
                if not self._warned_full:
                    self._warned_full = True
                    log.warning(
                        "%d forked children are running: the counters of further children "
                        "are not reported",
                        self._slots,
                    )
                return None
            slot = self._free.pop()
            self._reserved[slot] = time.monotonic()
            return slot

    def _reclaim(self) -> None:
        """Fold the values of ended children into the owner's sums and free their slots."""
        now = time.monotonic()
        view = self._view
        for slot, since in list(self._reserved.items()):
            base = slot * self._stride
            pid = view[base]
            if pid == 0 and now - since < _UNCLAIMED_GRACE_S:
                continue
            if pid != 0 and _alive(pid):
                continue
            if view[base + 1]:
                values = list(view[base + _HEADER : base + self._stride])
                for k, value in enumerate(values):
                    self._ended[k] += value
                self._ended_rows.append([pid, *values])
                del self._ended_rows[:-_MAX_ENDED_ROWS]
                if self._texts is not None:
                    for name, counts in self._texts.read(slot).items():
                        self._ended_labels.setdefault(name, Counter()).update(counts)
            if self._texts is not None:
                self._texts.clear(slot)
            view[base : base + self._stride] = memoryview(bytes(self._stride * 8)).cast("q")
            del self._reserved[slot]
            self._free.append(slot)

    def _published(self) -> list[list[int]]:
        """``[pid, values...]`` of every child that published, running or ended."""
        with self._lock:
            view = self._view
            rows = [list(row) for row in self._ended_rows]
            for slot in self._reserved:
                base = slot * self._stride
                if view[base + 1]:
                    rows.append([view[base], *view[base + _HEADER : base + self._stride]])
            return rows

    def totals(self, name: str) -> dict[str, int]:
        """The sums over children of the cumulative fields of ``name`` (zeros if not listed)."""
        fields = [f for f in self.fields if f in self.cumulative]
        if name not in self.names or os.getpid() != self.parent_pid:
            return dict.fromkeys(fields, 0)
        offset = self.names.index(name) * self._row
        with self._lock:
            view = self._view
            sums = list(self._ended[offset : offset + self._row])
            for slot in self._reserved:
                base = slot * self._stride + _HEADER + offset
                for j in range(self._row):
                    sums[j] += view[base + j]
        return {f: sums[j] for j, f in enumerate(self.fields) if f in self.cumulative}

    def label_totals(self, name: str) -> dict[str, int]:
        """The labels of ``name`` counted by children (running and ended), summed."""
        if self._texts is None or os.getpid() != self.parent_pid:
            return {}
        with self._lock:
            total = Counter(self._ended_labels.get(name, {}))
            for slot in self._reserved:
                total.update(self._texts.read(slot).get(name, {}))
        return dict(total)

    def children(self, name: str) -> list[dict[str, int]]:
        """Each child's values of ``name`` (``pid`` included), for children that published."""
        if name not in self.names or os.getpid() != self.parent_pid:
            return []
        offset = 1 + self.names.index(name) * self._row
        return [
            {"pid": row[0], **dict(zip(self.fields, row[offset : offset + self._row]))}
            for row in self._published()
        ]

    # -- child side ------------------------------------------------------------------------
    def _values(self) -> list[int]:
        values: list[int] = []
        for name in self.names:
            row = self.read(name)
            values.extend(int(row.get(field, 0)) for field in self.fields)
        return values

    def _start_in_child(self, slot: int) -> None:
        self._slot = slot
        self._baseline = self._values()
        for index, field in enumerate(self.fields * len(self.names)):
            if field not in self.cumulative:
                self._baseline[index] = 0
        self._view[slot * self._stride] = os.getpid()

    def _after_multiprocessing_fork(self) -> None:
        # multiprocessing clears the finalizers a child inherited, then runs these callbacks.
        if self._slot is not None:
            multiprocessing.util.Finalize(self, WorkerStats.publish, args=(self,), exitpriority=10)

    def publish(self) -> None:
        """In a child that holds a slot: write its values now (a no-op elsewhere)."""
        slot = self._slot
        if slot is None or os.getpid() == self.parent_pid:
            return
        values = self._values()
        base = slot * self._stride
        view = self._view
        if self._texts is not None and self.labels is not None:
            self._texts.write(slot, self.labels())
        for index, value in enumerate(values):
            view[base + _HEADER + index] = value - self._baseline[index]
        view[base + 1] += 1


class _LabelSlots:
    """One text area per slot: a sequence number, a length and JSON bytes (see the module doc).

    The child writes only its own slot; the owner reads a slot only when the sequence number is
    even and unchanged across its copy, else it keeps the last whole text it read there.
    """

    _WORDS = 2  # sequence number, length

    def __init__(self, slots: int) -> None:
        self._stride = self._WORDS * 8 + LABEL_BYTES
        self._buffer = mmap.mmap(-1, slots * self._stride)
        self._last: dict[int, dict[str, dict[str, int]]] = {}

    def _words(self, slot: int) -> memoryview:
        start = slot * self._stride
        return memoryview(self._buffer)[start : start + self._WORDS * 8].cast("q")

    def write(self, slot: int, labels: Mapping[str, Mapping[str, int]]) -> None:
        data = _encode(labels)
        words = self._words(slot)
        start = slot * self._stride + self._WORDS * 8
        words[0] += 1  # odd: writing
        self._buffer[start : start + len(data)] = data
        words[1] = len(data)
        words[0] += 1  # even: whole

    def read(self, slot: int) -> dict[str, dict[str, int]]:
        words = self._words(slot)
        sequence, length = words[0], words[1]
        if sequence and sequence % 2 == 0 and 0 < length <= LABEL_BYTES:
            start = slot * self._stride + self._WORDS * 8
            data = bytes(self._buffer[start : start + length])
            if words[0] == sequence:
                with contextlib.suppress(ValueError):  # not JSON: keep the last whole text
                    self._last[slot] = json.loads(data)
        return self._last.get(slot, {})

    def clear(self, slot: int) -> None:
        self._words(slot)[0:2] = memoryview(bytes(16)).cast("q")
        self._last.pop(slot, None)


def _encode(labels: Mapping[str, Mapping[str, int]]) -> bytes:
    """JSON of ``labels`` within :data:`LABEL_BYTES`: past it, the rarer labels of each name
    are counted as :data:`OTHER` (so the counts always add up)."""
    for keep in (None, 8, 3, 0):
        shown: dict[str, dict[str, int]] = {}
        for name, counts in labels.items():
            ranked = Counter({str(k)[:200]: int(v) for k, v in counts.items() if v})
            kept = dict(ranked.most_common(keep))
            rest = sum(ranked.values()) - sum(kept.values())
            if rest:
                kept[OTHER] = kept.get(OTHER, 0) + rest
            if kept:
                shown[name] = kept
        data = json.dumps(shown, ensure_ascii=True, separators=(",", ":")).encode()
        if len(data) <= LABEL_BYTES:
            return data
    return b"{}"  # more functions than the area holds even as counts alone


def _alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (a zombie has ended: its values are final)."""
    if not pid_exists(pid):
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            state = stat.read().rsplit(")", 1)[-1].split()[:1]
    except OSError:
        return True
    return state not in (["Z"], ["X"])


def publish_now() -> None:
    """Publish every child-side :class:`WorkerStats` of this process (a no-op in an owner)."""
    for stats in list(_INSTANCES):
        stats.publish()


def _before_fork() -> None:
    pid = os.getpid()
    for stats in list(_INSTANCES):
        if stats.parent_pid == pid and stats.tracking:
            stats._child_slot = stats._reserve()


def _after_fork_in_parent() -> None:
    for stats in list(_INSTANCES):
        stats._child_slot = None


def _after_fork_in_child() -> None:
    global _publisher
    _publisher = None  # the parent's thread does not exist here
    started = False
    for stats in list(_INSTANCES):
        slot, stats._child_slot = stats._child_slot, None
        stats._slot = None
        if slot is not None:
            stats._start_in_child(slot)
            started = True
    if started:
        _start_publisher()


def _start_publisher() -> None:
    global _publisher
    if _publisher is not None:
        return
    interval = min((s.publish_interval_s for s in list(_INSTANCES)), default=0.1)
    _publisher = threading.Thread(
        target=_publish_forever, args=(interval,), name="codedag-worker-stats", daemon=True
    )
    _publisher.start()


def _publish_forever(interval_s: float) -> None:
    while True:
        time.sleep(interval_s)
        try:
            publish_now()
        except Exception:  # never let a reporting thread take a worker down
            log.debug("publishing worker counters failed", exc_info=True)


def _install_hooks() -> None:
    """Fork hooks and the exit hook, once per process (never at import). A child's counters
    start after every reset hook ran (they read the guards those hooks make usable)."""
    global _hooks_installed
    if _hooks_installed:
        return
    with _hooks_lock:
        if _hooks_installed:
            return
        forks.on_fork(
            before=_before_fork,
            after_in_parent=_after_fork_in_parent,
            after_in_child=_after_fork_in_child,
            stage=forks.REPORT,
        )
        atexit.register(publish_now)  # a plain os.fork child that exits through sys.exit
        _hooks_installed = True
