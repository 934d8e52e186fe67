"""One process's side of the prefix cache: starting chains, answering cuts, counting.

:class:`Session` holds the store and the counters of this process (DataLoader workers each have
their own, forked with the patches; their counters reach the main process through
:class:`codedag.migrate.workerstats.WorkerStats`). Its :meth:`Session.source` starts a chain at a
planned source call, and :meth:`Session.cut` answers the cut: the stored value on a hit (checked
bit for bit against a recomputation for the first ``verify`` hits), else the computed value,
queued with the headers of its intermediates for :class:`~codedag.store.writer.Writer`, which
stores it from a thread of its own.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from statistics import median
from typing import Any

import codedag.backends.lazy_values as lazy_values
import codedag.migrate.cache.keys as keys
import codedag.migrate.tables.lookup as lookup
from codedag.backends.facts import FileSource
from codedag.backends.sources import argument_value, file_source
from codedag.migrate.cache.prefix_values import (
    PENDING,
    Lineage,
    PrefixValue,
    computed_call,
    concrete,
    concrete_kwargs,
)
from codedag.migrate.cache.reasons import MISS_REASONS
from codedag.store.entry import CorruptEntry, Encoded, decode, encode, same, value_nbytes
from codedag.store.meta import Meta, meta_of
from codedag.store.tiers import PrefixStore
from codedag.store.writer import Writer

log = logging.getLogger(__name__)

REASONS: tuple[str, ...] = tuple(MISS_REASONS)
"""Why a chain was computed without the cache (:data:`.reasons.MISS_REASONS` says each)."""
_MISS_FIELDS = {reason: f"miss_{reason}" for reason in REASONS}
"""The counter of each reason's misses."""
FIELDS: tuple[str, ...] = (
    "hits",
    "stored",
    "queued",  # values handed to the writer thread (stored soon, read back by this process now)
    "full",
    "exists",
    "changed",  # written to between the cut and the store: not stored
    "dropped",  # the write queue stayed full: not stored
    "later",  # not queued: storing it now would pass the process's storing share
    "queue_ns",  # the loading thread's share of storing: encoding and queueing
    "unpaid",  # chains this process found not to pay for storing (and stopped caching)
    "verified",
    "verify_mismatches",
    "evicted",
    "corrupt",
    "read_ns",
    "write_ns",
    "hit_bytes",
    "lookup_gathered",  # element-wise runs gathered through a table (:mod:`.lookup`)
    "lookup_computed",  # runs computed by their calls (on trial, or where a table did not pay)
    "lookup_mismatches",  # trials where a table differed from the calls (never used then)
    *_MISS_FIELDS.values(),
)
NEVER_CACHED_AFTER = 16
"""Samples of a chain in one process that no epoch can cache (a source without a stable
identity, an argument without a stable value, a value the store cannot keep), none of the
chain's values stored or read back, after which the chain is given up in that process."""
GIVE_UP_AFTER = 3
"""DataLoader fetches holding values of one chain that fail in a row, after which the chain is not
cached in this process."""

JUDGE_AFTER = 8
"""Values of a chain stored by a process, after which it compares what storing and reading one
back cost with what computing it did (medians): a chain where storing does not pay for itself by
the second epoch is not cached any more, by any process, in this run or later ones."""

WRITE_NS_PER_BYTE = 0.7
"""What storing a byte costs until the process measured its own writes (LMDB into new pages of
``/dev/shm``: 0.35 ms per 0.5 MB value here, ``benchmarks/store_write_floor.py``)."""

UNFOUND_AFTER = 16
"""Values of a chain whose source the store knows (an earlier epoch stored its lineage) but whose
cut value it never finds, with no hit, after which the process gives the chain up and flags it
for every process: its value changes from epoch to epoch (a random draw the trace did not see
reaches the prefix), so storing it only costs."""
_MAX_CUTS_NOTED = 1 << 20
"""Sources whose cut keys a thread notes per fetcher (:meth:`Session._shares_source`); past
that the notes start again."""


@dataclass(frozen=True)
class ChainSpec:
    """What the runtime needs of a cached chain.

    Attributes:
        id: the chain's name.
        source_function: the call that starts it.
        source_slot: the argument holding the source (``"0"``, or a keyword).
        callers: functions whose calls of ``source_function`` start the chain (empty: every
            call made inside a DataLoader fetch).
        lines: the lines of ``callers``' code whose calls start it (empty: any line).
        functions: library functions patched for it.
        cut_function: the call whose result is stored.
        cut_occurrence: which call of that name (0: the first).
        guards: other functions of its libraries, which take its values as computed arrays.
        methods: the methods of arrays, images and tensors among its traced calls (None: any
            is recorded): another method on its values is a path the trace did not take, and
            computes the chain there.
    """

    id: str
    source_function: str
    source_slot: str
    callers: tuple[str, ...]
    functions: tuple[str, ...]
    cut_function: str
    cut_occurrence: int
    guards: tuple[str, ...] = ()
    lines: tuple[int, ...] = ()
    methods: frozenset[str] | None = None

    def identity(self) -> bytes:
        """The chain as the same bytes in every process and run (the repr of a set of strings
        follows the process's string hashing, which differs from run to run and in a spawned
        worker)."""
        fields = asdict(self)
        if self.methods is not None:
            fields["methods"] = sorted(self.methods)
        return repr(sorted(fields.items())).encode()


COLD_SEEN_BYTES = 1 << 18
"""Bytes of the bitmap of sources met in a cold chain's epoch (:meth:`Session.skips_lookup`): 2M
bits, one per source key's low bits (a source met again, or sharing its bits with one met, is
looked up)."""


class _Local(threading.local):
    def __init__(self) -> None:
        self.suspended = 0
        self.fetching = 0
        self.lineages: list[Lineage] = []
        self.fetcher: weakref.ref[Any] | None = None  # the DataLoader fetcher of this thread
        self.cold: dict[str, bool] = {}  # chain: the store held none of its values (this fetcher)
        self.found: set[str] = set()  # chains with a hit in this fetcher
        self.seen: bytearray | None = None  # sources met while cold (:data:`COLD_SEEN_BYTES`)
        self.cuts: dict[bytes, bytes] = {}  # source key: its last sample's cut key (this fetcher)
        self.fetch_started_ns = 0  # the current DataLoader fetch's start


class _Suspended:
    """``with``: no chain starts in this thread inside (cheaper than a generator context)."""

    __slots__ = ("local",)

    def __init__(self, local: _Local) -> None:
        self.local = local

    def __enter__(self) -> None:
        self.local.suspended += 1

    def __exit__(self, *exc: object) -> None:
        self.local.suspended -= 1


class Session:
    """The cache in this process (see the module docstring).

    Args:
        store: the store.
        verify: hits (the first ones, in each process) recomputed and compared bit for bit.
        judge_after: values of a chain stored here before it is judged (:data:`JUDGE_AFTER`;
            0: chains are never given up for their cost, and flags of other processes are
            ignored).
        store_share: the share of the loading time storing may take until a chain has a hit in
            the epoch (:data:`~codedag.plan.cache.STORE_SHARE`; 0, the default, or ``judge_after`` 0: every value
            is stored in the epoch that computes it).
    """

    def __init__(
        self,
        store: PrefixStore,
        verify: int = 0,
        judge_after: int = JUDGE_AFTER,
        store_share: float = 0.0,
    ) -> None:
        self.store = store
        self.judge_after = judge_after
        self.store_share = store_share if judge_after else 0.0
        self._budget = _StoreBudget()
        self.writer = Writer(store, self._stored)
        self.verify_left = verify
        self.counts: Counter[str] = Counter()
        self.details: Counter[str] = Counter()
        self.mismatches: list[str] = []
        self.failures: Counter[str] = Counter()
        self.given_up: set[str] = set()
        self.local = _Local()
        self._suspended = _Suspended(self.local)  # reentrant: its count is the thread's own
        self._touch: dict[int, tuple[Any, list[bytes], list[bytes]]] = {}
        self._lock = threading.Lock()
        self._checked: set[str] = set()  # chains whose flag in the store was read here
        self._judging: dict[bytes, tuple[ChainSpec, int, int]] = {}  # key: chain, compute, queue
        self._judged: dict[str, list[tuple[int, int]]] = {}  # chain: (compute, store + read)
        self._claimed: Counter[str] = Counter()  # chain: values judged or waiting to be
        self._found: Counter[str] = Counter()  # chain: hits at its cut in this process
        self._unfound: Counter[str] = Counter()  # chain: known sources whose cut was not found
        # chains whose samples share sources (:meth:`_shares_source`)
        self._shared: set[str] = set()
        self._queued_chains: set[str] = set()  # chains of which this process queued values
        self._queued_by: dict[bytes, str] = {}  # key: the chain of a value queued, not stored
        self._copied: set[str] = set()  # chains whose values the sample writes into after the cut
        self._never: Counter[str] = Counter()  # chain: samples no epoch can cache
        self._value_flags: dict[str, bytes] = {}  # chain: its flag (:func:`_values_flag`)
        self.cold_skips = 0  # source lookups skipped: the store held none of the chain's values
        self._lookups_before = lookup.counts()  # the process's counts are since its start

    # -- state ----------------------------------------------------------------------------
    @property
    def active(self) -> bool:
        """Whether chains start here now."""
        return not self.local.suspended and self.store.enabled

    @property
    def fetching(self) -> bool:
        """Whether a DataLoader fetch runs in this thread."""
        return self.local.fetching > 0

    def suspended(self) -> _Suspended:
        """Run without the cache in this thread (a sample computed normally), as a context."""
        return self._suspended

    def values(self) -> dict[str, int]:
        """This process's counters (:data:`FIELDS`)."""
        out = {field: int(self.counts.get(field, 0)) for field in FIELDS}
        out["evicted"] = self.store.evicted
        out["corrupt"] = self.store.corrupt
        for name, count in lookup.counts().items():
            if f"lookup_{name}" in out:
                out[f"lookup_{name}"] = count - self._lookups_before[name]
        return out

    def miss(self, chain: str, reason: str) -> None:
        """Count a chain computed normally, for ``reason`` (free text or one of
        :data:`REASONS`)."""
        bucket = reason if reason in REASONS else "diverged"
        if reason.startswith("arguments"):
            bucket = "arguments"
        with self._lock:
            self.counts[_MISS_FIELDS[bucket]] += 1
            if bucket != reason:
                self.details[f"{chain}: {reason}"[:160]] += 1

    # -- the chain ------------------------------------------------------------------------
    def source(
        self,
        chain: ChainSpec,
        original: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        """A planned source call: the first prefix value of a chain."""
        if self.judge_after and chain.id not in self._checked and self._found_unpaid(chain):
            return original(*args, **kwargs)
        if self._left_for_later(chain):
            return original(*args, **kwargs)
        where = _source_place(chain.source_slot, args, kwargs)
        given = data = args[where] if isinstance(where, int) else kwargs.get(where or "")
        declared = file_source(chain.source_function)
        if declared is not None and declared.opened_from:
            data = _opened_file(given, declared.opened_from)
        keying = time.perf_counter_ns()
        try:
            key = keys.source_key(chain.id, chain.source_function, data)
        except keys.Unkeyable as error:
            self.miss(chain.id, "source")
            self.details[f"{chain.id}: {error}"[:160]] += 1
            self.never_cached(chain, str(error))
            return original(*args, **kwargs)
        try:  # the call's other arguments (cv2.imread's flags, librosa.load's sr=)
            key = keys.step_key([key, *_other_arguments(where, args, kwargs)])
        except keys.Unkeyable as error:
            self.miss(chain.id, f"arguments: {error}")
            self.never_cached(chain, f"an argument of its source: {error}")
            return original(*args, **kwargs)
        item = declared.item if declared is not None else None
        echoes = _echoes(declared, original, args, kwargs) if declared is not None else {}
        lineage = Lineage(chain, self, time.perf_counter_ns() - keying, key)
        self.local.lineages.append(lineage)
        cuts = int(chain.cut_function == chain.source_function)
        call = original if item is None else _item_of(original, item)
        at_source = bool(cuts) and chain.cut_occurrence == 0  # looked up at once, never waits
        now = not at_source and declared is not None and _reads_now(declared, given, data)
        if item is None and now:  # its handle may be closed before the cut: it runs now
            value = original(*args, **kwargs)
            lineage.ran = not self.skips_lookup(chain, key)  # a cold store: nothing to skip
            return PrefixValue(lineage, key, meta_of(value), value, cuts=cuts)
        if item is not None and (echoes is None or now):  # the other items need the call
            result = original(*args, **kwargs)
            if at_source:
                lineage.done = True  # nothing to read back in place of the call
                self.miss(chain.id, f"{chain.source_function}'s other results come from the call")
                return result
            value = result[item]
            lineage.ran = not self.skips_lookup(chain, key)  # a cold store: nothing to skip
            head = PrefixValue(lineage, key, meta_of(value), value, cuts=cuts)
            return (*result[:item], head, *result[item + 1 :])
        skip = self.skips_lookup(chain, key)
        if at_source:
            head = PrefixValue(lineage, key, meta_of(None), cuts=cuts)
            cut_key = keys.step_key([b"source", key])
            value = self.cut(head, cut_key, not skip, call, args, kwargs)
            return value if item is None else _assembled(value, item, echoes or {})
        if skip:  # a cold store: computed, no header asked for
            lineage.known = False
            value = call(*args, **kwargs)
            head = PrefixValue(lineage, key, meta_of(value), value, cuts=cuts)
        else:  # deferred: its header is read where user code asks, the cut's value at the cut
            if declared is not None and declared.reopen is not None and isinstance(data, str):
                call = _reopening(call, declared, where, data)
            head = PrefixValue(lineage, key, None, call=(call, args, kwargs), cuts=cuts)
        return head if item is None else _assembled(head, item, echoes or {})

    def _known(self, lineage: Lineage) -> bool:
        """Whether the store holds the header of ``lineage``'s source from this run (an earlier
        epoch stored the lineage: a chain whose key changes every epoch shows there; an earlier
        run's header may be another plan's, the code edited), read once."""
        if lineage.known is None:
            found = self.meta(lineage.source_key) if lineage.source_key else None
            lineage.known = found is not None and not found[1]
        return lineage.known

    def _left_for_later(self, chain: ChainSpec) -> bool:
        """Whether a source of ``chain`` runs as the library's own call, without the cache's
        work (its key, stand-ins, headers): in a paced epoch, where the chain is cold in this
        fetcher (its value can only be a miss) and storing has spent its share of the loading
        time (the value would not be stored). It is counted as a miss left for later."""
        local = self.local
        if not self.store_share or not local.fetching or not local.cold.get(chain.id):
            return False
        if chain.id in local.found:  # a source met again in the epoch hit: stores everything
            return False
        loading_ns = time.perf_counter_ns() - local.fetch_started_ns
        with self._lock:
            if self._budget.affords(loading_ns, self.store_share):
                return False
            self.counts["later"] += 1
            self.counts[_MISS_FIELDS["new"]] += 1
        return True

    def skips_lookup(self, chain: ChainSpec, key: bytes) -> bool:
        """Whether the source ``key`` of ``chain`` is computed without asking the store.

        Inside a DataLoader fetch, the first source of a chain in each fetcher (an epoch: the
        DataLoader makes one per iterator, a worker one per epoch) reads whether the store holds
        any value of the chain (a flag set with its first value, :func:`_values_flag`) unless
        this process queued one. Where none is held, the chain is *cold* for the fetcher's life:
        its sources are computed without a lookup (a first epoch's samples are all misses),
        except a source met before in the same fetcher, whose value may be queued or stored by
        now. A skipped lookup can only compute a value the store holds, never serve one.
        """
        local = self.local
        if local.fetcher is None or not local.fetching:
            return False
        cold = local.cold.get(chain.id)
        if cold is None:
            cold = local.cold[chain.id] = not self._holds_values(chain)
        if not cold:
            return False
        seen = local.seen
        if seen is None:
            seen = local.seen = bytearray(COLD_SEEN_BYTES)
        bit = int.from_bytes(key[:4], "little") % (COLD_SEEN_BYTES * 8)
        mask = 1 << (bit & 7)
        if seen[bit >> 3] & mask:  # met before (or another source sharing its bit)
            return False
        seen[bit >> 3] |= mask
        self.cold_skips += 1
        return True

    def _holds_values(self, chain: ChainSpec) -> bool:
        """Whether this process queued a value of ``chain`` or the store holds one."""
        if chain.id in self._queued_chains:
            return True
        with self.suspended():
            return self.store.flag(self._values_flag(chain))

    def _values_flag(self, chain: ChainSpec) -> bytes:
        flag = self._value_flags.get(chain.id)
        if flag is None:
            flag = self._value_flags[chain.id] = _values_flag(chain)
        return flag

    def meta(self, key: bytes) -> Any:
        """The stored (or queued) header of an intermediate value, or None."""
        queued = self.writer.pending_meta(key)
        if queued is not None:
            return Meta.from_bytes(queued), False
        with self.suspended():
            return self.store.meta(key)

    def _lookup(self, key: bytes) -> tuple[Any, Any, bool] | None:
        """``(value, tier, stale)`` of a value queued here or stored (``tier`` None: queued)."""
        queued = self.writer.pending(key)
        if queued is not None:
            try:
                return decode(queued.header, queued.data, self.store.secret, key), None, False
            except CorruptEntry:  # written to since it was queued: it will not be stored
                pass
        return self.store.get(key)

    def _stored(self, key: bytes, outcome: str, elapsed_ns: int) -> None:
        """The writer stored a value (its thread)."""
        with self._lock:
            self.counts["write_ns"] += elapsed_ns
            self._budget.written(key, elapsed_ns)
            if outcome in ("stored", "full", "exists", "changed"):
                self.counts[outcome] += 1
            chain_id = self._queued_by.pop(key, None)
            if outcome == "changed" and chain_id is not None:
                # the sample wrote into the value after the cut (drew a box on it, set its
                # border) before the writer stored it: its next values are copied at the cut
                self._copied.add(chain_id)
            judging = self._judging.pop(key, None)
        if judging is None:
            return
        chain, compute_ns, queue_ns = judging
        started = time.thread_time_ns()  # the writer's thread: CPU time, as its write's
        if outcome == "stored":
            with self.suspended():
                found = self.store.get(key) is not None
            if found:
                read_ns = time.thread_time_ns() - started
                self.judge(chain, compute_ns, queue_ns + elapsed_ns + read_ns)
                return
        with self._lock:  # not judged: another value may take its place
            self._claimed[chain.id] -= 1

    def _judge_later(self, chain: ChainSpec, key: bytes, compute_ns: int, queue_ns: int) -> None:
        """Keep what computing a stored value cost until the writer has stored it (at most
        ``judge_after`` values of a chain, judged or waiting)."""
        if self._claimed.get(chain.id, 0) >= self.judge_after:  # judged (or never judged)
            return
        with self._lock:
            if self._claimed[chain.id] >= self.judge_after:
                return
            self._claimed[chain.id] += 1
            self._judging[key] = (chain, compute_ns, queue_ns)

    def judge(self, chain: ChainSpec, compute_ns: int, store_ns: int) -> bool | None:
        """Count what computing one value of ``chain`` cost and what keying its source, storing
        it and reading it back did; after ``judge_after`` values, whether storing pays (None before). A chain where
        it does not is given up here and flagged in the store for every process."""
        with self._lock:
            samples = self._judged.setdefault(chain.id, [])
            if len(samples) >= self.judge_after:
                return None
            samples.append((compute_ns, store_ns))
            if len(samples) < self.judge_after:
                return None
            compute = median(c for c, _ in samples)
            store = median(s for _, s in samples)
            if store <= compute:
                return True
            self.given_up.add(chain.id)
            self.counts["unpaid"] += 1
        self._flag_unpaid(
            chain,
            "prefix cache: keying, storing and reading back a value of %s costs %.3g ms, more "
            "than the "
            "%.3g ms computing it does; it is not cached any more",
            chain.id,
            store / 1e6,
            compute / 1e6,
        )
        return False

    def _shares_source(self, lineage: Lineage, key: bytes) -> None:
        """Note the cut ``key`` of ``lineage``'s source in this fetcher: a source another
        sample of the epoch cut at another key (two crops of one image, the rows of one file)
        marks the chain as one whose sources are shared, where a known source whose value is
        not found says nothing of keys changing between epochs (:meth:`_not_found`)."""
        source = lineage.source_key
        if not source or lineage.chain.id in self._shared:
            return
        cuts = self.local.cuts
        earlier = cuts.get(source)
        if earlier is not None and earlier != key:
            with self._lock:
                self._shared.add(lineage.chain.id)
            return
        if len(cuts) >= _MAX_CUTS_NOTED:
            cuts.clear()
        cuts[source] = key

    def _not_found(self, chain: ChainSpec) -> None:
        """A known source's cut value was not found (its key changed after the source, or the
        value was not stored): after :data:`UNFOUND_AFTER` of them and no hit, the chain is
        given up here and flagged in the store for every process. Not for a chain whose
        sources samples share (:meth:`_shares_source`): another sample stored the source, in
        this epoch as likely as in an earlier one."""
        if chain.id in self._shared:
            return
        with self._lock:
            self._unfound[chain.id] += 1
            if (
                self._found[chain.id]
                or self._unfound[chain.id] != UNFOUND_AFTER
                or chain.id in self.given_up
            ):
                return
            self.given_up.add(chain.id)
            self.counts["unpaid"] += 1
        self._flag_unpaid(
            chain,
            "prefix cache: %s: %d samples whose source was stored before did not find their "
            "value at the cut, and none did: it changes from epoch to epoch (a random draw the "
            "trace did not see reaches it), so it is not cached any more",
            chain.id,
            UNFOUND_AFTER,
        )

    def unpaid(self, chain: ChainSpec) -> bool:
        """Whether ``chain`` is given up here or flagged in the store as not paying (by any
        process: a worker of this run, or an earlier run)."""
        if chain.id in self.given_up:
            return True
        with self.suspended():
            return bool(self.store.flag(_unpaid_flag(chain)))

    def _found_unpaid(self, chain: ChainSpec) -> bool:
        """Whether a process found ``chain`` not to pay (read once per process)."""
        self._checked.add(chain.id)
        unpaid = self.unpaid(chain)
        if unpaid:
            self.given_up.add(chain.id)
        return unpaid

    def cut(
        self,
        first: PrefixValue,
        key: bytes,
        deferred: bool,
        function: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        joined: tuple[PrefixValue, ...] = (),
    ) -> Any:
        """The cut: the stored value on a hit, else the computed one (stored); ``joined``: the
        call's other inputs of the chain, whose earlier values' headers are stored too."""
        lineage = first._lineage
        self._shares_source(lineage, key)
        reason = "new"
        if deferred:
            started = time.perf_counter_ns()
            with self.suspended():  # the store's own NumPy calls never start chains
                found = self._lookup(key)
            if found is not None:
                value, tier, stale = found
                elapsed = time.perf_counter_ns() - started
                if self.verify_left > 0:
                    return self._verified(lineage, key, value, function, args, kwargs)
                lineage.done = True
                if self.store_share:
                    self.local.found.add(lineage.chain.id)
                with self._lock:
                    self._found[lineage.chain.id] += 1
                    self.counts["hits"] += 1
                    self.counts["read_ns"] += elapsed
                    self.counts["hit_bytes"] += value_nbytes(value)
                if tier is not None and (stale or lineage.stale):
                    self._queue_touch(tier, key, first._lineage_keys(joined))
                return value
            # seen before (not_stored) where the store holds the header of the cut's input: read
            # from it with a deferred input (its call kept); an input computed here (a source
            # call that ran for its other items, ``soundfile.read``'s rate) has its header from
            # its value, and a source that is its own cut none, so the store is asked
            read = first._meta is not None and first._value is PENDING and first._call is not None
            seen = read or self.meta(first._key) is not None
            reason = "not_stored" if seen else "new"
        if self._known(lineage):
            self._not_found(lineage.chain)
        value = computed_call(function, args, kwargs)
        if lineage.done:
            return value
        lineage.done = True
        # a table run's value (the cut ends an element-wise run): stored, and served, computed,
        # its time counted as computing's, not storing's
        value = lazy_values.value_of(value, "the prefix cache's cut")
        started = time.perf_counter_ns()
        compute_ns = started - lineage.started_ns
        if not self._affords_storing(lineage.chain.id, started):
            with self._lock:
                self.counts["later"] += 1
                self.counts[_MISS_FIELDS[reason]] += 1
            return value
        encoded, queued = self._queue(first, key, value, joined)
        queue_ns = time.perf_counter_ns() - started
        with self._lock:  # the counts of a miss and of its queueing at once
            if queued and self.store_share:
                self._budget.queued(key, encoded.nbytes, queue_ns)  # type: ignore[union-attr]
            counts = self.counts
            counts["queue_ns"] += queue_ns
            counts[_MISS_FIELDS["unstorable" if encoded is None else reason]] += 1
            if queued:
                counts["queued"] += 1
            elif encoded is not None:
                counts["dropped"] += 1
        if queued:
            self._judge_later(lineage.chain, key, compute_ns, queue_ns + lineage.key_ns)
        elif encoded is None:
            self.never_cached(lineage.chain, f"the store cannot keep {_described(value)}")
        return value

    def _queue(
        self, first: PrefixValue, key: bytes, value: Any, joined: tuple[PrefixValue, ...] = ()
    ) -> tuple[Encoded | None, bool]:
        """Encode the cut's ``value`` and queue it for the writer: the encoding (None: the store
        cannot keep it) and whether it was queued."""
        chain = first._lineage.chain
        with self.suspended():
            encoded = encode(value, self.store.secret, key, copy=chain.id in self._copied)
            tracked = encoded is not None and not encoded.owned  # the sample may write into it
            if tracked:  # before the writer may report it
                with self._lock:
                    self._queued_by[key] = chain.id
            queued = encoded is not None and self.writer.submit(
                key,
                encoded,
                first._lineage_metas(joined) if first._key else (),
                wake=not self.local.fetching,  # a fetch wakes the writer at its end
                flag=self._values_flag(chain),
            )
        if queued:
            self._queued_chains.add(chain.id)
        elif tracked:
            with self._lock:
                self._queued_by.pop(key, None)
        return encoded, queued

    def never_cached(self, chain: ChainSpec, why: str) -> None:
        """A sample of ``chain`` that no epoch can cache (``why``): after
        :data:`NEVER_CACHED_AFTER` of them, none of the chain's values stored or read back in
        this process, the chain is given up here and flagged in the store for every process
        (the next epoch's DataLoader workers skip it from their start), with one warning from
        the process that flagged it: its prefix values would only cost, and its plan's saving
        is not there to have."""
        name = chain.id
        with self._lock:
            self._never[name] += 1
            if (
                self._never[name] != NEVER_CACHED_AFTER
                or self._found[name]
                or name in self._queued_chains
                or name in self.given_up
            ):
                return
            self.given_up.add(name)
        self._flag_unpaid(
            chain,
            "prefix cache: %s: none of its first %d samples can be cached (%s); it is not cached "
            "any more, and the saving its plan expected is forgone",
            name,
            NEVER_CACHED_AFTER,
            why[:160],
        )

    def _flag_unpaid(self, chain: ChainSpec, message: str, *args: object) -> None:
        """Flag ``chain``, given up here, in the store for every process, and say why once: the
        process that set the flag warns (DataLoader workers give a chain up alike)."""
        with self.suspended():
            first = self.store.set_flag(_unpaid_flag(chain))
        if first:
            log.warning(message, *args)

    def _affords_storing(self, chain: str, now_ns: int) -> bool:
        """Whether a computed value of ``chain`` is stored now: always outside a DataLoader fetch
        and once the chain had a hit in this fetcher (an epoch's), else while what storing cost
        this process stays within ``store_share`` of its loading time."""
        local = self.local
        if not self.store_share or not local.fetching or chain in local.found:
            return True
        loading_ns = now_ns - local.fetch_started_ns
        with self._lock:
            return self._budget.affords(loading_ns, self.store_share)

    def end_fetch(self) -> None:
        """A DataLoader fetch of this thread ended: its time counts as loading time (for the
        storing share; nothing is counted without one)."""
        if not self.store_share:
            return
        elapsed = time.perf_counter_ns() - self.local.fetch_started_ns
        with self._lock:
            self._budget.loading_ns += elapsed

    def _verified(
        self,
        lineage: Lineage,
        key: bytes,
        stored: Any,
        function: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        self.verify_left -= 1
        value = function(*concrete(args), **concrete_kwargs(kwargs))
        lineage.done = True
        with self._lock, self.suspended():
            self.counts["verified"] += 1
            if same(value, stored):
                self.counts["hits"] += 1
                return stored
            self.counts["verify_mismatches"] += 1
            self.mismatches.append(
                f"{lineage.chain.id}: stored value differs from its recomputation"
            )
        self.miss(lineage.chain.id, "verify")
        with self.suspended():
            self.store.delete(key)
        log.warning(
            "prefix cache: a stored value of %s differed from its recomputation; it was "
            "removed and the computed value used",
            lineage.chain.id,
        )
        return value

    def _queue_touch(self, tier: Any, key: bytes, keys: list[bytes]) -> None:
        """Queue the generation update of a hit entry and of its chain's headers (``keys``)."""
        metas = [k for k in keys if k]
        with self._lock:
            entry = self._touch.setdefault(id(tier), (tier, [], []))
            entry[1].append(key)
            entry[2].extend(metas)
            pending = sum(len(e[1]) for e in self._touch.values())
        if pending >= 64:
            self.flush()

    def flush(self) -> None:
        """Write pending generation updates of hit entries."""
        with self._lock:
            pending, self._touch = self._touch, {}
        with self.suspended():
            for tier, hit_keys, metas in pending.values():
                self.store.touch(tier, hit_keys, metas)

    # -- samples ------------------------------------------------------------------------
    def begin_sample(self, fetcher: Any = None) -> None:
        """Forget the chains of the previous fetch in this thread; ``fetcher``: the DataLoader
        fetcher of the fetch (a new one forgets which chains were cold, :meth:`skips_lookup`;
        None: every source is looked up)."""
        local = self.local
        local.lineages = []
        local.fetch_started_ns = time.perf_counter_ns()
        known = local.fetcher
        if fetcher is None or known is None or known() is not fetcher:
            try:
                local.fetcher = None if fetcher is None else weakref.ref(fetcher)
            except TypeError:  # no weak reference to it: every source is looked up
                local.fetcher = None
            local.cold = {}
            local.found = set()
            local.seen = None
            local.cuts = {}

    def failed_sample(self) -> None:
        """The fetch failed with prefix values: its open chains count as ``error``, and each of
        its chains has one more failed fetch in a row (however many of its values the fetch
        held: a batch of mosaics holds dozens)."""
        for lineage in self.local.lineages:
            lineage.pending.clear()  # the sample runs again without the cache: nothing to settle
            if not lineage.done:
                lineage.diverge("error")
        for chain in sorted({lineage.chain.id for lineage in self.local.lineages}):
            self.failures[chain] += 1
            if self.failures[chain] >= GIVE_UP_AFTER and chain not in self.given_up:
                self.given_up.add(chain)
                log.warning(
                    "prefix cache: samples of %s keep failing with cached values; it is not "
                    "cached in this process any more",
                    chain,
                )
        self.local.lineages = []

    def failed_for_good(self, error: BaseException) -> None:
        """A fetch that cannot run again (an iterable data set's) failed with prefix values:
        its chains are given up in this process, with one warning naming the error."""
        chains = sorted({lineage.chain.id for lineage in self.local.lineages} - self.given_up)
        for lineage in self.local.lineages:
            lineage.pending.clear()
            if not lineage.done:
                lineage.diverge("error")
        if not chains:
            return
        self.given_up.update(chains)
        log.warning(
            "prefix cache: a batch of an iterable data set failed with cached values of %s "
            "(%s: %s); its samples cannot be fetched again, so the error goes on to the program "
            "and these chains are not cached in this process any more",
            ", ".join(chains),
            type(error).__name__,
            str(error).splitlines()[0][:120] if str(error) else "",
        )

    def succeeded_sample(self) -> None:
        """The fetch went through: the failure streaks of its chains end."""
        for lineage in self.local.lineages:
            self.failures.pop(lineage.chain.id, None)

    @property
    def created(self) -> bool:
        """Whether the current fetch started chains in this thread."""
        return bool(self.local.lineages)


class _StoreBudget:
    """What storing has cost a process and the loading time it may take a share of
    (:data:`~codedag.plan.cache.STORE_SHARE`); the session's lock guards it.

    Spent: each queued value's share on the loading thread (checksum, queueing) and its write,
    estimated from its bytes (at the rate this process's writes measured, :data:`WRITE_NS_PER_BYTE`
    before the first) until the writer reports the CPU time it took.
    """

    def __init__(self) -> None:
        self.loading_ns = 0
        self.spent_ns = 0
        self.written_ns = 0
        self.written_bytes = 0
        self.estimates: dict[bytes, tuple[int, int]] = {}  # queued key: bytes, estimated ns

    def affords(self, fetching_ns: int, share: float) -> bool:
        """Whether what storing spent is within ``share`` of the loading time (``fetching_ns``:
        the current fetch's so far)."""
        return self.spent_ns <= share * (self.loading_ns + fetching_ns)

    def queued(self, key: bytes, nbytes: int, queue_ns: int) -> None:
        per_byte = self.written_ns / self.written_bytes if self.written_bytes else WRITE_NS_PER_BYTE
        estimate = int(nbytes * per_byte)
        self.estimates[key] = (nbytes, estimate)
        self.spent_ns += queue_ns + estimate

    def written(self, key: bytes, elapsed_ns: int) -> None:
        queued = self.estimates.pop(key, None)
        if queued is not None:
            nbytes, estimate = queued
            self.spent_ns += elapsed_ns - estimate
            self.written_ns += elapsed_ns
            self.written_bytes += nbytes


def _described(value: Any) -> str:
    """A value the store cannot keep, in words: ``a PIL image of mode P``, ``a dict``."""
    mode = getattr(value, "mode", None)
    if isinstance(mode, str) and hasattr(value, "getbands"):
        return f"a PIL image of mode {mode}"
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def _unpaid_flag(chain: ChainSpec) -> bytes:
    """The store's flag of a chain found not to pay on this machine, with these versions."""
    return keys.step_key([b"unpaid", chain.identity(), keys.versions()])


def _values_flag(chain: ChainSpec) -> bytes:
    """The store's flag of a chain of which a value was stored (the chain's name and the
    versions: what its source keys begin with)."""
    return keys.step_key([b"values", chain.id.encode(), keys.versions()])


def _reads_now(declared: FileSource, given: Any, file: Any) -> bool:
    """Whether a source call runs at once rather than when its chain's cut misses: its file
    is a handle (an open file, an archive opened from one) that user code may close before the
    cut (``with np.load(path) as z: img = z["image"]``) and that cannot be opened again from
    ``file``, its path (``reopen``), and the call reads it whole (a PIL image reads its file
    later: ``reads_later``)."""
    if declared.reads_later:
        return False
    if declared.opened_from:
        return declared.reopen is None or not isinstance(file, str)
    return not isinstance(given, str | bytes | bytearray | memoryview | os.PathLike) and callable(
        getattr(given, "read", None)
    )


def _reopening(
    call: Callable[..., Any], declared: FileSource, where: int | str | None, path: str
) -> Callable[..., Any]:
    """``call``, reading its handle (``where``) opened again from ``path`` where user code
    closed it before a miss ran the read (the handle's ``opened_from`` attribute is gone)."""
    reopen = declared.reopen
    assert reopen is not None and where is not None

    def read(*args: Any, **kwargs: Any) -> Any:
        handle = args[where] if isinstance(where, int) else kwargs[where]
        if getattr(handle, declared.opened_from, None) is not None:
            return call(*args, **kwargs)
        fresh = reopen(handle, path)
        try:
            if isinstance(where, int):
                return call(*args[:where], fresh, *args[where + 1 :], **kwargs)
            return call(*args, **{**kwargs, where: fresh})
        finally:
            fresh.close()

    return read


def _opened_file(handle: Any, attribute: str) -> Any:
    """The path of the file ``handle`` was opened from (its ``attribute``: an open file, as an
    ``NpzFile``'s ``fid``), or ``handle`` itself where it holds none (opened from bytes): that
    has no identity to key, and the call runs as it is."""
    name = getattr(getattr(handle, attribute, None), "name", None)
    return name if isinstance(name, str) else handle


def _source_place(slot: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int | str | None:
    """Where the source call's source is: a position, a keyword, or ``None`` (no argument)."""
    if slot.isdigit() and int(slot) < len(args):
        return int(slot)
    if slot in kwargs:
        return slot
    if args:
        return 0
    return next(iter(kwargs), None)


def _other_arguments(
    where: int | str | None, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> list[bytes]:
    """The source call's arguments besides its source, encoded.

    Raises:
        keys.Unkeyable: an argument has no stable value.
    """
    out: list[bytes] = []
    for position, value in enumerate(args):
        if position != where:
            out.append(b"%d=" % position)
            keys.encode_argument(value, out)
    for keyword in sorted(kwargs):
        if keyword != where:
            out.append(keyword.encode() + b"=")
            keys.encode_argument(kwargs[keyword], out)
    return out


def _echoes(
    declared: FileSource,
    function: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> dict[int, Any] | None:
    """The items of a tuple result other than the followed one, each echoing its argument's
    value (``librosa.load``'s rate is its ``sr=``, given or by default), or ``None`` when one
    is ``None`` or is no echo (``soundfile.read``'s rate is the file's): only the call can tell
    it then."""
    if len(declared.echoes) != declared.length - 1:
        return None
    out = {}
    for index, argument in declared.echoes.items():
        value = argument_value(function, argument, args, kwargs)
        if value is None:
            return None
        out[index] = value
    return out


def _item_of(function: Callable[..., Any], item: int) -> Callable[..., Any]:
    """``function`` returning the item ``item`` of its tuple result (the value a chain follows)."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return function(*args, **kwargs)[item]

    return call


def _assembled(value: Any, item: int, echoes: dict[int, Any]) -> tuple[Any, ...]:
    """A source call's tuple result: ``value`` at ``item``, the echoed arguments elsewhere."""
    out: list[Any] = [None] * (max(item, *echoes) + 1 if echoes else item + 1)
    out[item] = value
    for index, echoed in echoes.items():
        out[index] = echoed
    return tuple(out)
