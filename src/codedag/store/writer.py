"""Storing values from a thread of each process, so the loading thread never waits for the store.

Writing a value into the store costs LMDB's copy of it, the new pages of the file (in shared
memory: allocated and zeroed by the kernel) and a commit: about 1.2 ms for 2.1 MB here, 13-16 %
of a letterbox sample's first epoch. The loading thread only encodes the value (its header and
checksum, no copy) and queues it; a :class:`Writer` thread of the same process stores it. LMDB
gives up Python's lock while it copies and commits, so on a machine with a free core the write
costs the loading thread nothing.

* **No copy, never a wrong value.** The queued value is the one user code received: it may write
  into it. The store checks the bytes it writes against the checksum taken on the loading thread,
  inside the transaction, and stores nothing when they differ (counted as ``changed``).
* **Small values share a transaction.** Each transaction costs its begin, its commit and the
  pages of the B-trees it rewrites: values of 49 KB cost 38 µs each stored alone and 28 µs in
  transactions of 8 (this CPU, ``/dev/shm``). LMDB keeps every value of a transaction in memory
  of its own until the commit, which doubled the cost of values of 2.1 MB stored together: the
  thread stores at most :data:`GROUP_VALUES` values of at most :data:`GROUP_BYTES` together, a
  larger value alone.
* **Woken per batch.** Waking the thread costs the loading thread a futex call and two context
  switches (the woken thread first waits for Python's lock); once per 55 KB value that was about
  0.1 ms of a 2.3 ms sample. Inside a DataLoader fetch a value is queued without waking the
  thread until the queued values reach :data:`WAKE_BYTES` or the fetch ends (:meth:`wake`);
  elsewhere, and for values that large, the thread is woken at once.
* **Bounded.** The queue holds at most ``queue_bytes`` (values user code may have dropped stay
  alive until written). A value that does not fit waits ``wait_s`` for room (the loading thread
  then runs at the store's pace), and is dropped after that, counted as ``dropped``: it is
  computed again and stored in a later epoch.
* **Read your writes.** A value still queued answers lookups in its own process (:meth:`pending`,
  :meth:`pending_meta`), so the next epoch hits it even before it reached the store.
* **Processes.** A fork waits for the queue to drain (the child then finds every value of its
  parent in the store) and for the thread to finish its transaction (the environments close
  before a fork); the child starts with an empty queue and a thread of its own on first use. A
  process that exits normally (a DataLoader worker at the end of its epoch, through
  multiprocessing's finalizers; the main process at exit) first stores what it queued. A process
  killed while writing leaves nothing: its transaction never committed.
"""

from __future__ import annotations

import logging
import multiprocessing.util
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from typing import NamedTuple

import codedag.store.environments as environments
from codedag.store.entry import Encoded
from codedag.store.tiers import PrefixStore

log = logging.getLogger(__name__)

QUEUE_BYTES = 64 << 20
"""Bytes of values a process may have queued."""
WAIT_S = 1.0
"""How long a value waits for room in a full queue before it is dropped."""
WAKE_BYTES = 1 << 20
"""Bytes queued without waking the thread (values submitted with ``wake=False``)."""
GROUP_VALUES = 8
"""Values stored in one transaction at most."""
GROUP_BYTES = 512 << 10
"""Bytes stored in one transaction at most (a value this large is stored alone)."""
EXIT_WAIT_S = 30.0
"""How long a process waits at exit (or before a fork) for its queue to be stored."""
_EXIT_PRIORITY = 20  # multiprocessing finalizers: before the worker counters' (10) are published


class _Item(NamedTuple):
    encoded: Encoded
    metas: tuple[tuple[bytes, bytes], ...]
    flag: bytes | None = None


Report = Callable[[bytes, str, int], None]
"""``(key, outcome, ns)`` of each value the thread stored (:meth:`PrefixStore.put`'s
outcomes); ``ns`` is the thread's CPU time for it (its transaction's, shared evenly among the
values stored together): LMDB lets one process write at a time, and a thread waiting for
another's transaction, or for a core, costs the loading nothing."""


class Writer:
    """The thread that stores one process's values (see the module docstring).

    Args:
        store: the store.
        report: called from the thread with each value's outcome and the time it took.
        queue_bytes: the most bytes queued at once.
        wait_s: how long :meth:`submit` waits for room before dropping a value.
    """

    def __init__(
        self,
        store: PrefixStore,
        report: Report,
        queue_bytes: int = QUEUE_BYTES,
        wait_s: float = WAIT_S,
    ) -> None:
        self.store = store
        self.report = report
        self.queue_bytes = queue_bytes
        self.wait_s = wait_s
        self._reset()
        environments.on_fork(self)

    def _reset(self) -> None:
        self._cond = threading.Condition()
        self._items: dict[bytes, _Item] = {}  # in order of arrival
        self._metas: dict[bytes, bytes] = {}
        self._bytes = 0
        self._unseen = 0  # bytes queued since the thread was last woken
        self._busy = False
        self._asleep = False
        self._held = False
        self._stop = False
        self._thread: threading.Thread | None = None

    # -- the loading thread ---------------------------------------------------------------
    def submit(
        self,
        key: bytes,
        encoded: Encoded,
        metas: Iterable[tuple[bytes, bytes]],
        wake: bool = True,
        flag: bytes | None = None,
    ) -> bool:
        """Queue a value; False when it was dropped (the queue stayed full for ``wait_s``).

        ``wake=False``: the thread is woken only once :data:`WAKE_BYTES` are queued unseen, or
        by :meth:`wake` (the caller's promise to call it soon, as a DataLoader fetch's end does).
        ``flag``: a store flag set with the value (:meth:`PrefixStore.put_many`).
        """
        size = encoded.nbytes
        cond = self._cond
        with cond:
            if key in self._items:
                return True
            if not self._room(size):
                self._unseen = 0
                cond.notify_all()  # the thread makes room
                if not cond.wait_for(lambda: self._room(size), timeout=self.wait_s):
                    return False
            item = _Item(encoded, tuple(metas), flag)
            self._items[key] = item
            for meta_key, header in item.metas:
                self._metas[meta_key] = header
            self._bytes += size
            if self._thread is None:
                self._start()
            self._unseen += size
            if wake or self._unseen >= WAKE_BYTES:
                self._unseen = 0
                cond.notify_all()
        return True

    def wake(self) -> None:
        """Wake the thread for values queued without waking it."""
        if self._unseen:
            with self._cond:
                self._unseen = 0
                self._cond.notify_all()

    def _room(self, size: int) -> bool:
        return not self._items or self._bytes + size <= self.queue_bytes

    def pending(self, key: bytes) -> Encoded | None:
        """A value queued in this process and not stored yet, or None."""
        item = self._items.get(key)
        return None if item is None else item.encoded

    def pending_meta(self, key: bytes) -> bytes | None:
        """The header of an intermediate value queued in this process, or None."""
        return self._metas.get(key)

    @property
    def asleep(self) -> bool:
        """Whether the thread waits to be woken (a thread still storing takes the values queued
        meanwhile without being woken)."""
        return self._asleep

    @property
    def queued(self) -> int:
        """Values queued and not stored yet."""
        return len(self._items)

    def flush(self, timeout_s: float | None = EXIT_WAIT_S) -> bool:
        """Wait until every queued value is stored; False when ``timeout_s`` ran out first."""
        with self._cond:
            self._unseen = 0
            if self._items:  # an empty queue gives the thread nothing to wake for
                self._cond.notify_all()
            return self._cond.wait_for(
                lambda: not self._items and not self._busy, timeout=timeout_s
            )

    def close(self) -> None:
        """Store what is queued and end the thread (it starts again on the next submit)."""
        self.flush()
        with self._cond:
            thread, self._thread = self._thread, None
            self._stop = True
            self._cond.notify_all()
        if thread is not None:
            thread.join(timeout=EXIT_WAIT_S)
        with self._cond:
            self._stop = False

    # -- the thread -----------------------------------------------------------------------
    def _start(self) -> None:
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="codedag-prefix-writer", daemon=True)
        self._thread.start()
        # a DataLoader worker leaves through multiprocessing's exit, the main process through
        # atexit (which runs the same finalizers): both store what is queued first
        multiprocessing.util.Finalize(
            None, _flush_at_exit, args=(weakref.ref(self),), exitpriority=_EXIT_PRIORITY
        )

    def _run(self) -> None:
        cond = self._cond
        while True:
            with cond:
                self._asleep = True
                cond.wait_for(lambda: (self._items and not self._held) or self._stop)
                self._asleep = False
                if not self._items or self._held:  # stopped, with nothing left to store
                    return
                group = self._group()
                self._busy = True
            started = time.thread_time_ns()  # CPU, not waits for another process's write
            try:
                flags = [item.flag for _key, item in group]
                outcomes = self.store.put_many(
                    [(key, item.encoded, item.metas) for key, item in group],
                    flags if any(flags) else None,
                )
            except Exception:  # never let the writer take the process down
                log.warning("prefix cache: storing values failed", exc_info=True)
                outcomes = ["off"] * len(group)
            elapsed = (time.thread_time_ns() - started) // len(group)
            with cond:
                for key, item in group:
                    del self._items[key]
                    for meta_key, _header in item.metas:
                        self._metas.pop(meta_key, None)
                    self._bytes -= item.encoded.nbytes
                cond.notify_all()  # room for values waiting to be queued
            try:
                for (key, _item), outcome in zip(group, outcomes):
                    self.report(key, outcome, elapsed)
            finally:
                with cond:  # flush() returns once the values are stored and counted
                    self._busy = False
                    cond.notify_all()

    def _group(self) -> list[tuple[bytes, _Item]]:
        """The oldest queued values that are stored together (see the module docstring)."""
        group: list[tuple[bytes, _Item]] = []
        size = 0
        for key, item in self._items.items():
            size += item.encoded.nbytes
            if group and (size > GROUP_BYTES or len(group) >= GROUP_VALUES):
                break
            group.append((key, item))
        return group

    # -- fork -----------------------------------------------------------------------------
    def before_fork(self) -> None:
        """Store what is queued and hold the thread between transactions."""
        with self._cond:
            self._unseen = 0
            self._cond.notify_all()
            self._cond.wait_for(lambda: not self._items, timeout=EXIT_WAIT_S)
            self._held = True
            self._cond.wait_for(lambda: not self._busy)

    def after_fork_in_parent(self) -> None:
        """Let the thread go on."""
        with self._cond:
            self._held = False
            self._cond.notify_all()

    def after_fork_in_child(self) -> None:
        """An empty queue and no thread: the parent stores what it queued."""
        self._reset()


def _flush_at_exit(ref: weakref.ref[Writer]) -> None:
    writer = ref()
    if writer is not None:
        writer.flush()
