"""The prefix cache's store: LMDB environments that every process maps, in a RAM and a disk tier.

Why LMDB: one memory-mapped file that any number of processes read at once without copies into
their own heaps (a DataLoader worker reads a stored value straight from the shared page cache into
the one array it returns), ACID transactions with one writer at a time across processes (a worker
killed while writing leaves nothing: its transaction never committed), and a hard size cap (the
map size), so a tier can never outgrow its budget. It is a mature C library with a maintained
binding; diskcache (SQLite plus one file per large value) reads each value with a file read.

A tier is one LMDB environment in a folder with four named databases:

* ``data``: key -> the value's bytes (the array's buffer, written without a copy);
* ``info``: key -> generation, size and the value's header (type, dtype, shape, keyed tag);
* ``meta``: key -> generation and the header of an intermediate value (no data: what a deferred
  intermediate answers for ``.shape`` without computing);
* ``state``: bytes in use, the current generation and flags (chains found not to pay here).

Budgets and eviction: each tier admits values while the bytes in use stay under
:data:`FILL` of its budget (the rest is room for LMDB's pages and free lists); its map size is the
budget, so its file never grows past it. Every run (:meth:`PrefixStore.begin_run`) starts a new
generation (the ranks of one distributed launch on a machine share it); a hit on an entry of an
older generation moves it to the current one. When a value
does not fit, entries of older generations are evicted, oldest first; entries of the current run
are never evicted for another of the same run (with shuffled epochs an LRU cache smaller than the
data set misses every time; keeping what is cached hits ``budget / data`` of the time).

Failures: a tier whose folder cannot be created or written, is not this user's own and private
(:mod:`.trust`), or whose filesystem is full, is switched off with one warning (per process) and
the run goes on without it; with no tier left the cache does nothing. Each operation holds its
environment open while it runs (:mod:`.environments`): closing one, and closing them all before a
``fork`` (LMDB forbids using one across ``fork``), waits for other threads' operations to end,
so a value being read is never unmapped under its reader; they open again where they are used.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import lmdb

from codedag.errors import CodeDAGError
from codedag.store import environments, trust
from codedag.store.entry import Encoded

log = logging.getLogger(__name__)

FILL = 0.9
"""Share of a tier's budget its values may use; the rest is room for LMDB's own pages."""

_INFO = struct.Struct("<IQ")  # generation, bytes; then the header
_U64 = struct.Struct("<Q")
_USED = b"used"
_GENERATION = b"generation"
_RUN = b"run"  # the run the current generation belongs to, when its processes share one
_FLAG = b"flag:"
_DBS = (b"data", b"info", b"meta", b"state")
_MIN_MAP_BYTES = 1 << 20

T = TypeVar("T")

PutItem = tuple[bytes, Encoded, Sequence[tuple[bytes, bytes]]]
"""A value to store: its key, its encoded form and its intermediates' ``(key, header)``."""


class TierError(Exception):
    """A tier cannot be used (its folder, its filesystem or its file)."""


class NotATier(CodeDAGError):
    """A folder asked to be cleared as a tier holds something no tier writes."""


TIER_FILES = frozenset({"data.mdb", "lock.mdb", "format"})
"""What a tier's folder holds: LMDB's map and reader table, and the store's format marker."""


@dataclass(frozen=True)
class TierInfo:
    """What one tier holds.

    Attributes:
        kind: ``ram`` or ``disk``.
        path: its folder.
        budget_bytes: its budget (the map size).
        used_bytes: bytes of the values and headers it holds.
        allocated_bytes: storage its files occupy (blocks written; in RAM, the memory it holds).
        entries: values stored.
        metas: intermediate headers stored.
        generation: the current generation (runs so far).
        enabled: whether this process uses it.
        problem: why it is switched off, if it is.
    """

    kind: str
    path: str
    budget_bytes: int
    used_bytes: int
    allocated_bytes: int
    entries: int
    metas: int
    generation: int
    enabled: bool
    problem: str = ""


class _Using(environments.Use):
    """An operation of a tier on its environment (sets the tier's databases)."""

    __slots__ = ("tier",)

    def __init__(self, tier: LmdbTier) -> None:
        super().__init__(tier._key, tier._make)
        self.tier = tier

    def __enter__(self) -> Any:
        env, self.tier._dbs = super().__enter__()
        return env


class LmdbTier:
    """One LMDB environment with a budget (see the module docstring).

    Args:
        kind: ``ram`` or ``disk`` (what the folder is backed by).
        path: the environment's folder (created on first use).
        budget_bytes: the most storage the tier may occupy.
    """

    def __init__(self, kind: str, path: str | os.PathLike[str], budget_bytes: int) -> None:
        self.kind = kind
        self.path = Path(path)
        self._key = str(self.path.absolute())  # its entry in the environments open here
        self.budget_bytes = max(_MIN_MAP_BYTES, int(budget_bytes))
        self.limit_bytes = int(self.budget_bytes * FILL)
        self.generation = 0
        self.problem = ""
        self.quiet = False  # problems found while opening are reported by the caller
        self.evicted = 0
        self._dbs: dict[bytes, Any] = {}
        environments.install_fork_hook()

    # -- opening ----------------------------------------------------------------------------
    @property
    def enabled(self) -> bool:
        """Whether this process uses the tier."""
        return not self.problem

    def disable(self, problem: str) -> None:
        """Stop using the tier in this process, with one warning. Its environment stays open
        until :meth:`close`: another thread may be reading from its map."""
        if not self.problem:
            self.problem = problem
            if not self.quiet:
                log.warning(
                    "prefix cache: the %s tier at %s is off: %s", self.kind, self.path, problem
                )

    def _env(self) -> _Using:
        """An operation on the environment (opened if it is not open here), as a context that
        gives it: it is not closed before the context ends (a read's views stay valid)."""
        if self.problem:
            raise TierError(self.problem)
        return _Using(self)

    def _make(self) -> environments.Opened:
        """Open the environment and its databases (switching the tier off if that fails)."""
        try:
            trust.prepare(self.path, self.kind)  # private, this user's, not cut short
            env = lmdb.open(
                str(self.path),
                map_size=self.budget_bytes,
                subdir=True,
                max_dbs=len(_DBS),
                max_readers=1024,
                sync=False,
                metasync=False,
                readahead=False,
                writemap=False,  # a full filesystem then fails a write, never SIGBUS
                meminit=False,
                mode=0o600,
            )
            return env, {name: env.open_db(name) for name in _DBS}
        except (lmdb.Error, OSError) as error:
            self.disable(_describe(error))
            raise TierError(self.problem) from error

    def close(self) -> None:
        """Close the environment in this process once no other thread reads or writes it (it
        opens again on the next use)."""
        environments.close(self._key)

    def _failed(self, error: Exception) -> TierError:
        self.disable(_describe(error))
        return TierError(self.problem)

    # -- generations ------------------------------------------------------------------------
    def begin_run(self, run: str = "") -> int:
        """Start a new generation (a new run); returns it.

        Args:
            run: what the processes of one run share (the ranks of a distributed launch on this
                machine): the first of them starts a new generation, the others join it, so none
                evicts another's values as an older run's. ``""``: a run of its own.
        """
        with self._env() as env:
            try:
                with env.begin(write=True) as txn:
                    state = self._dbs[b"state"]
                    raw = txn.get(_GENERATION, db=state)
                    generation = _U64.unpack(raw)[0] if raw else 0
                    if not run or txn.get(_RUN, db=state) != run.encode():
                        generation += 1
                        txn.put(_GENERATION, _U64.pack(generation), db=state)
                        if run:
                            txn.put(_RUN, run.encode(), db=state)
                        else:
                            txn.delete(_RUN, db=state)
            except lmdb.Error as error:
                raise self._failed(error) from error
            self.generation = generation
            return generation

    # -- reading ----------------------------------------------------------------------------
    def get(self, key: bytes, decode: Callable[[bytes, memoryview], T]) -> tuple[T, bool] | None:
        """``(decode(header, data), stale)`` for ``key``, or None; ``stale``: an older
        generation's entry (to be touched). ``decode`` runs inside the read transaction (the
        data is a view of the shared map) and must copy what it keeps."""
        with self._env() as env:
            try:
                with env.begin(buffers=True) as txn:
                    info = txn.get(key, db=self._dbs[b"info"])
                    if info is None:
                        return None
                    data = txn.get(key, db=self._dbs[b"data"])
                    if data is None:
                        return None
                    generation, _size = _INFO.unpack_from(info)
                    value = decode(bytes(info[_INFO.size :]), data)
            except lmdb.Error as error:
                raise self._failed(error) from error
            return value, generation < self.generation

    def meta(self, key: bytes) -> tuple[bytes, bool] | None:
        """``(header, stale)`` of an intermediate value, or None."""
        with self._env() as env:
            try:
                with env.begin() as txn:
                    raw = txn.get(key, db=self._dbs[b"meta"])
            except lmdb.Error as error:
                raise self._failed(error) from error
            if raw is None:
                return None
            generation, _size = _INFO.unpack_from(raw)
            return raw[_INFO.size :], generation < self.generation

    # -- writing ----------------------------------------------------------------------------
    def put(self, key: bytes, encoded: Encoded, metas: Iterable[tuple[bytes, bytes]] = ()) -> str:
        """Store a value (and the headers of its intermediates) in one transaction.

        The bytes written are checked against the tag taken when the value was encoded,
        inside the transaction: a value written to in the meantime (it may be stored from
        another thread, after user code received it) is never committed.

        Returns:
            ``stored``, ``exists`` (another process stored it first), ``full`` (it does not fit
            even after evicting older generations) or ``changed`` (its bytes no longer match
            their tag: nothing is written).
        """
        return self.put_many([(key, encoded, tuple(metas))])[0]

    def put_many(
        self, items: Sequence[PutItem], flags: Sequence[bytes | None] | None = None
    ) -> list[str]:
        """Store values as :meth:`put` does, in one transaction, with each value's outcome.

        A value that fits only once older entries are evicted is stored after the others, in
        transactions of its own (eviction frees pages LMDB reuses only once it has committed).

        Args:
            items: the values.
            flags: a flag (:meth:`set_flag`) for each value (or None), set in the transaction
                that stores it or finds it stored: a flag set is never missing while the value
                is there.
        """
        marks = flags if flags is not None else [None] * len(items)
        changed: set[int] = set()
        with self._env() as env:
            while True:
                outcomes: list[str | None] = []
                try:
                    with env.begin(write=True, buffers=True) as txn:
                        state = self._dbs[b"state"]
                        used = _used(txn, state)
                        for index, (key, encoded, metas) in enumerate(items):
                            if index in changed:
                                outcomes.append("changed")
                                continue
                            try:
                                outcome, used = self._add(txn, key, encoded, metas, used)
                            except _Changed:
                                changed.add(index)
                                raise
                            outcomes.append(outcome)
                        txn.put(_USED, _U64.pack(used), db=state)
                        _mark(txn, state, marks, outcomes)
                except _Changed:  # aborted: the others are written again without it
                    continue
                except lmdb.MapFullError:  # nothing was written: each value on its own
                    if len(items) == 1:
                        return ["full"]
                    return [self.put_many([item], [mark])[0] for item, mark in zip(items, marks)]
                except lmdb.Error as error:
                    raise self._failed(error) from error
                break
            return [
                outcome if outcome is not None else self._put_evicting(*item, flag=mark)
                for outcome, item, mark in zip(outcomes, items, marks)
            ]

    def _add(
        self,
        txn: Any,
        key: bytes,
        encoded: Encoded,
        metas: Sequence[tuple[bytes, bytes]],
        used: int,
    ) -> tuple[str | None, int]:
        """Write one value and its intermediates' headers in ``txn``: its outcome (None: it
        needs older entries evicted first; nothing was written) and the bytes then in use.

        Raises:
            _Changed: the bytes written no longer match the value's tag: ``txn`` must be
                aborted.
        """
        dbs = self._dbs
        size = encoded.nbytes
        meta_bytes = _meta_bytes(metas)  # at most
        if size + meta_bytes > self.limit_bytes:
            return "full", used
        if txn.get(key, db=dbs[b"info"]) is not None:
            return "exists", used + self._put_metas(txn, metas)
        if used + meta_bytes + size > self.limit_bytes:
            return None, used
        txn.put(key, encoded.data, db=dbs[b"data"])
        if not encoded.owned and not encoded.intact(txn.get(key, db=dbs[b"data"])):
            raise _Changed(key)
        used += self._put_metas(txn, metas) + size
        txn.put(key, _INFO.pack(self.generation, size) + encoded.header, db=dbs[b"info"])
        return "stored", used

    def _put_evicting(
        self,
        key: bytes,
        encoded: Encoded,
        metas: Sequence[tuple[bytes, bytes]],
        flag: bytes | None = None,
    ) -> str:
        """Store a value once entries of older generations have made room for it."""
        with self._env() as env:
            dbs = self._dbs
            need = encoded.nbytes + _meta_bytes(metas)
            try:
                with env.begin(write=True, buffers=True) as txn:
                    used = _used(txn, dbs[b"state"])
                    # a quarter more than needed, for LMDB's contiguous runs
                    used -= self._evict(txn, used + need - self.limit_bytes + self.limit_bytes // 4)
                    used = max(0, used)
                    txn.put(_USED, _U64.pack(used), db=dbs[b"state"])
                    if used + need > self.limit_bytes:
                        return "full"
                with env.begin(write=True) as txn:  # LMDB reuses freed pages two commits later
                    txn.put(_USED, _U64.pack(used), db=dbs[b"state"])
                with env.begin(write=True, buffers=True) as txn:
                    used = _used(txn, dbs[b"state"])
                    try:
                        outcome, used = self._add(txn, key, encoded, metas, used)
                    except _Changed:
                        txn.abort()
                        return "changed"
                    if outcome is None:
                        txn.abort()
                        return "full"
                    txn.put(_USED, _U64.pack(used), db=dbs[b"state"])
                    _mark(txn, dbs[b"state"], [flag], [outcome])
                    return outcome
            except lmdb.MapFullError:
                return "full"
            except lmdb.Error as error:
                raise self._failed(error) from error

    def _put_metas(self, txn: Any, metas: Sequence[tuple[bytes, bytes]]) -> int:
        added = 0
        db = self._dbs[b"meta"]
        for meta_key, header in metas:
            old = txn.get(meta_key, db=db)
            value = _INFO.pack(self.generation, len(header)) + header
            if old is not None:
                added -= len(meta_key) + len(old)
            txn.put(meta_key, value, db=db)
            added += len(meta_key) + len(value)
        return added

    def _evict(self, txn: Any, need: int) -> int:
        """Delete entries of older generations, oldest first, until ``need`` bytes are free."""
        dbs = self._dbs
        victims: list[tuple[int, bytes, bytes, int]] = []
        for name in (b"info", b"meta"):
            for key, raw in txn.cursor(db=dbs[name]):
                generation, size = _INFO.unpack_from(raw)
                if generation < self.generation:
                    cost = size if name == b"info" else len(key) + len(raw)
                    victims.append((generation, name, bytes(key), cost))
        victims.sort(key=lambda v: (v[0], v[1] == b"info"))  # oldest, headers before values
        freed = 0
        for _generation, name, key, cost in victims:
            if freed >= need:
                break
            txn.delete(key, db=dbs[name])
            if name == b"info":
                txn.delete(key, db=dbs[b"data"])
                self.evicted += 1
            freed += cost
        return freed

    def touch(self, keys: Iterable[bytes], metas: Iterable[bytes]) -> None:
        """Move entries and intermediate headers to the current generation (they were hit)."""
        with self._env() as env:
            try:
                with env.begin(write=True) as txn:
                    for name, group in ((b"info", keys), (b"meta", metas)):
                        db = self._dbs[name]
                        for key in group:
                            raw = txn.get(key, db=db)
                            if raw is not None:
                                _gen, size = _INFO.unpack_from(raw)
                                txn.put(
                                    key,
                                    _INFO.pack(self.generation, size) + raw[_INFO.size :],
                                    db=db,
                                )
            except lmdb.Error as error:
                raise self._failed(error) from error

    def flag(self, name: bytes) -> bool:
        """Whether :meth:`set_flag` marked ``name`` here."""
        with self._env() as env:
            try:
                with env.begin() as txn:
                    return txn.get(_FLAG + name, db=self._dbs[b"state"]) is not None
            except lmdb.Error as error:
                raise self._failed(error) from error

    def set_flag(self, name: bytes) -> bool:
        """Mark ``name`` for every process and later run (until the tier is cleared); whether
        this call marked it (``False``: it was already)."""
        with self._env() as env:
            try:
                with env.begin(write=True) as txn:
                    return bool(
                        txn.put(_FLAG + name, b"1", db=self._dbs[b"state"], overwrite=False)
                    )
            except lmdb.Error as error:
                raise self._failed(error) from error

    def delete(self, key: bytes) -> None:
        """Remove one value (a corrupt or mismatched entry)."""
        with self._env() as env:
            dbs = self._dbs
            try:
                with env.begin(write=True) as txn:
                    raw = txn.get(key, db=dbs[b"info"])
                    if raw is None:
                        return
                    _gen, size = _INFO.unpack_from(raw)
                    txn.delete(key, db=dbs[b"info"])
                    txn.delete(key, db=dbs[b"data"])
                    used = _used(txn, dbs[b"state"])
                    txn.put(_USED, _U64.pack(max(0, used - size)), db=dbs[b"state"])
            except lmdb.Error as error:
                raise self._failed(error) from error

    # -- inspection -------------------------------------------------------------------------
    def info(self) -> TierInfo:
        """What the tier holds (opening it if it exists)."""
        entries = metas = used = generation = 0
        if self.enabled and (self.path / "data.mdb").exists():
            try:
                with self._env() as env, env.begin() as txn:
                    entries = txn.stat(self._dbs[b"info"])["entries"]
                    metas = txn.stat(self._dbs[b"meta"])["entries"]
                    state = self._dbs[b"state"]
                    used = _used(txn, state)
                    generation = _U64.unpack(txn.get(_GENERATION, db=state) or _U64.pack(0))[0]
            except (TierError, lmdb.Error):
                pass
        from codedag.devices.memory import allocated_bytes

        return TierInfo(
            kind=self.kind,
            path=str(self.path),
            budget_bytes=self.budget_bytes,
            used_bytes=used,
            allocated_bytes=allocated_bytes(self.path) if self.path.exists() else 0,
            entries=entries,
            metas=metas,
            generation=generation,
            enabled=self.enabled,
            problem=self.problem,
        )

    def own_files(self, extra: frozenset[str] = frozenset()) -> list[Path]:
        """The files of the tier's folder (none when it does not exist), once checked to be a
        tier: LMDB's files (and ``extra`` names) only, regular files, ``data.mdb`` an LMDB
        environment holding the tier's four databases.

        Raises:
            NotATier: the folder is a link or a file, or holds anything else.
        """
        path = self.path
        if not os.path.lexists(path):
            return []
        where = f"{path} is no prefix cache {self.kind} tier"
        if path.is_symlink() or not path.is_dir():
            raise NotATier(f"{where}: it is a link or a file; nothing was removed")
        files = sorted(path.iterdir())
        strangers = [f.name for f in files if f.name not in TIER_FILES | extra]
        links = [f.name for f in files if f.is_symlink() or not f.is_file()]
        if strangers or links:
            names = ", ".join((strangers or links)[:3])
            raise NotATier(f"{where}: it holds {names}, which no tier writes; nothing was removed")
        opened_here = environments.opened_here(self._key)  # a tier, then
        if files and not opened_here and not _is_tier_environment(path):
            raise NotATier(
                f"{where}: its data.mdb is no LMDB store of codedag; nothing was removed"
            )
        return files

    def clear(self, extra: frozenset[str] = frozenset()) -> int:
        """Delete the tier's files (checked by :meth:`own_files` first) and its folder once
        empty; returns the bytes they occupied.

        Raises:
            NotATier: as :meth:`own_files` (nothing is deleted).
        """
        self.close()
        files = self.own_files(extra)
        freed = 0
        for file in files:
            freed += file.lstat().st_blocks * 512
            file.unlink(missing_ok=True)
        if os.path.lexists(self.path):
            with contextlib.suppress(OSError):  # a file written meanwhile stays, with its folder
                self.path.rmdir()
        return freed


def _is_tier_environment(path: Path) -> bool:
    """Whether ``path`` holds an LMDB environment with every database a tier makes (opened
    read-only, without taking its lock)."""
    if not (path / "data.mdb").is_file():
        return True  # LMDB's lock file alone: an environment never written to
    if trust.short_store(path / "data.mdb"):
        return True  # an LMDB file cut short: mapping it would end in SIGBUS
    try:
        env = lmdb.open(str(path), readonly=True, lock=False, max_dbs=len(_DBS), subdir=True)
    except lmdb.Error:
        return False
    try:
        with env.begin() as txn:
            return all(txn.get(name) is not None for name in _DBS)
    except lmdb.Error:
        return False
    finally:
        env.close()


def _describe(error: BaseException) -> str:
    code = getattr(error, "errno", None)
    if isinstance(error, trust.Refused):
        return str(error)
    if isinstance(error, lmdb.ReadonlyError) or code in (errno.EROFS, errno.EACCES, errno.EPERM):
        return f"its folder cannot be written ({error})"
    if isinstance(error, lmdb.DiskError) or code == errno.ENOSPC:
        return f"its filesystem is full ({error})"
    return f"{type(error).__name__}: {error}"


def _used(txn: Any, state: Any) -> int:
    """The bytes in use, as the ``state`` database of ``txn`` records them."""
    raw = txn.get(_USED, db=state)
    return _U64.unpack(raw)[0] if raw else 0


class _Changed(Exception):
    """A value's bytes no longer match its tag once written. The transaction that wrote them is
    aborted, never committed with the value deleted: a put and a delete of a large value in one
    transaction leave its pages counted by the meta page but never written, a file shorter than
    its pages say, which the next process to open the tier removes as cut short."""


def _mark(txn: Any, state: Any, flags: Sequence[bytes | None], outcomes: Sequence[Any]) -> None:
    """Set the flag of each value stored or found stored (once each)."""
    done: set[bytes] = set()
    for flag, outcome in zip(flags, outcomes):
        if flag is not None and flag not in done and outcome in ("stored", "exists"):
            done.add(flag)
            txn.put(_FLAG + flag, b"1", db=state)


def _meta_bytes(metas: Sequence[tuple[bytes, bytes]]) -> int:
    """The most bytes storing ``metas`` adds (each header new)."""
    return sum(len(k) + len(v) + _INFO.size for k, v in metas)
