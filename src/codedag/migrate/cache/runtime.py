"""PrefixCacheRuntime: applies a plan's ``cache`` section to the process and counts what it does.

Its layers (installed by :class:`codedag.migrate.dispatch.Dispatch`, outermost where other parts
replace the same function) replace:

* the chains' library functions: a planned source call (matched by the function that makes it)
  starts a chain; a call receiving a prefix value is a step of its chain
  (:mod:`.prefix_values`); every other call runs the original;
* the chains' *guards*: the other functions of their libraries the trace saw in the samples
  (``cv2.copyMakeBorder`` beside ``cv2.imdecode`` and ``cv2.resize``). cv2 takes arrays only (it
  ignores ``__array__``): a value before the cut that reaches one, on a branch the chain does
  not take, is computed there, and its chain diverges;
* ``_MapDatasetFetcher.fetch``: a batch whose code fails while prefix values exist (a function
  outside the chain that the trace did not see received one) runs again without the cache, from
  the random state it started with (Python's, NumPy's and torch's global generators), counted as
  ``error``; a chain whose fetches fail :data:`~.session.GIVE_UP_AFTER` times in a row is not
  cached in that process any more. At a fetch's end the writer thread is woken for the values
  the batch queued (:meth:`codedag.store.writer.Writer.wake`).

DataLoader workers forked after :meth:`PrefixCacheRuntime.apply` inherit the patches and open the
store themselves; their counters reach :meth:`PrefixCacheRuntime.stats` through
:class:`codedag.migrate.workerstats.WorkerStats`.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import time
import types
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import codedag.migrate.random_states as random_states
from codedag.backends.libraries import arrays_only, library_takes_any_value
from codedag.devices.distributed import machine_launch_key
from codedag.migrate.admitted import admitted_chains
from codedag.migrate.cache.headers import RECORDED_METHODS
from codedag.migrate.cache.prefix_values import (
    has_prefix_value,
    outside_call,
    real_samples,
    step,
)
from codedag.migrate.cache.session import FIELDS, JUDGE_AFTER, REASONS, ChainSpec, Session
from codedag.migrate.dispatch import FETCH, ITERABLE_FETCH
from codedag.migrate.patched_runtime import PatchedRuntime
from codedag.migrate.stats import CacheStats
from codedag.patching import like_original
from codedag.store.tiers import PrefixStore, StoreSettings

log = logging.getLogger(__name__)


class CacheProgress(NamedTuple):
    """Counts of every process so far, for judging an epoch by its difference to an earlier one.

    Attributes:
        lookups: values of cached chains looked up (hits and misses).
        hits: values read back from the store.
        ready: values a later lookup will find: hits, and misses queued for storing, less those
            the store refused (full, written to meanwhile) or evicted since.
        lost: values that will not be found: not stored (full, dropped, changed) or evicted.
    """

    lookups: int
    hits: int
    ready: int
    lost: int

    def since(self, earlier: CacheProgress) -> CacheProgress:
        """What was counted between ``earlier`` and these counts."""
        return CacheProgress(*(now - then for now, then in zip(self, earlier)))


@dataclass(frozen=True)
class CacheSettings:
    """How the prefix cache runs.

    Attributes:
        enabled: ``False`` applies nothing (the plan's section is ignored).
        verify: hits (the first ones in each process) recomputed and compared bit for bit with
            the stored value; a difference removes the entry and delivers the computed value.
        store: where the store lives and its budgets (defaults: the plan's, then
            :class:`~codedag.store.tiers.StoreSettings`' own).
        judge_after: values of a chain each process stores before it compares what storing
            and reading them back cost with what computing them did, and gives the chain up
            where storing does not pay (0: never, and every value is stored whatever it costs).
        store_share: the share of each process's loading time that storing values may take
            until a chain has a hit in the epoch; values past it are stored by the next epoch
            (``None``, the default: the plan's ``cache.store_share``, which paces the first epoch
            where storing every value would slow it; 0: every value is stored in the epoch that
            computes it; :data:`~codedag.plan.cache.STORE_SHARE` paces it).
        run: what the processes of one run share in the store: they join one generation
            (:meth:`~codedag.store.tiers.PrefixStore.begin_run`). ``None``, the default: the
            ranks of this process's distributed launch on this machine, else this process and
            the workers it starts.
    """

    enabled: bool = True
    verify: int = 0
    store: StoreSettings = field(default_factory=StoreSettings)
    judge_after: int = JUDGE_AFTER
    store_share: float | None = None
    run: str | None = None


def library_guards(functions: set[str]) -> set[str]:
    """Every C function of the libraries of ``functions`` that take arrays only (OpenCV's),
    and the few functions that do in other libraries (``torch.from_numpy``):
    a sample on a path its chain's trace did not take (a blur drawn with ``p=0.1`` in none of
    the traced samples) hands a value before the cut to one the plan never saw, which a stand-in
    would fail (the batch run again, or an iterable data set's error)."""
    out: set[str] = set()
    for root in {n.split(".", 1)[0] for n in functions if not library_takes_any_value(n)}:
        try:  # imported here, as patching the chain's own functions would (a plan applied
            module = importlib.import_module(root)  # before the script imported it)
        except ImportError:
            continue
        out.update(
            f"{root}.{name}"
            for name, value in list(vars(module).items())
            if isinstance(value, types.BuiltinFunctionType) and not name.startswith("_")
        )
    # and the functions that take arrays only in libraries that take any value otherwise
    # (``torch.from_numpy``), where the script imported them
    out.update(name for name in arrays_only() if name.split(".", 1)[0] in sys.modules)
    return out


def chains_from_plan(section: Any) -> list[ChainSpec]:
    """The cached chains of a plan's ``cache`` section (the model or its dict)."""
    if section is None:
        return []
    if isinstance(section, dict):
        from codedag.plan.cache import CacheSection

        section = CacheSection.model_validate(section)
    out = []
    for chain in section.cached_chains:
        cut = chain.cut
        assert cut is not None
        out.append(
            ChainSpec(
                id=chain.id,
                source_function=chain.source_function,
                source_slot=chain.source_slot,
                callers=tuple(chain.callers),
                functions=tuple(chain.functions),
                cut_function=cut.step,
                cut_occurrence=cut.occurrence,
                guards=tuple(chain.guards),
                lines=tuple(chain.lines),
                methods=frozenset(chain.steps) & RECORDED_METHODS,
            )
        )
    return out


class PrefixCacheRuntime(PatchedRuntime):
    """The prefix cache of a plan (see the module docstring).

    Args:
        chains: the cached chains.
        settings: verification and the store's place and budgets.
    """

    section = "cache"

    def __init__(self, chains: list[ChainSpec], settings: CacheSettings | None = None) -> None:
        super().__init__()
        self.chains = admitted_chains(chains) if (settings is None or settings.enabled) else []
        self.settings = settings or CacheSettings()
        self.store = PrefixStore.open(self.settings.store) if self.chains else PrefixStore([])
        self.session = Session(
            self.store,
            self.settings.verify,
            self.settings.judge_after,
            self.settings.store_share or 0.0,
        )
        self._sources: dict[str, list[ChainSpec]] = {}
        for chain in self.chains:
            self._sources.setdefault(chain.source_function, []).append(chain)
        self._guarded: set[str] = set()
        self._library_guards: set[str] | None = None
        self.run = self.settings.run or ""  # the generation joined (set when applied)
        # what the caches of workers started afresh counted (set by the migrator), and, in
        # such a worker, what it does after each batch (report its counts)
        self.afresh_counts: Callable[[], dict[str, int]] = dict
        self.after_fetch: Callable[[], None] | None = None

    @property
    def active(self) -> bool:
        """Whether the plan caches anything."""
        return bool(self.chains)

    def _functions(self) -> tuple[set[str], set[str]]:
        """The chains' functions (sources included) and their guards that are not chained: the
        plan's, and every C function of the chains' libraries that take arrays only
        (:func:`library_guards`)."""
        chained = {f for c in self.chains for f in c.functions} | set(self._sources)
        if self._library_guards is None:  # once: hundreds of names ask
            self._library_guards = library_guards(chained)
        guards = {g for c in self.chains for g in c.guards} | self._library_guards
        return chained, guards - chained

    def functions(self) -> list[str]:
        """The chains' functions (sources included) and their guards."""
        chained, guarded = self._functions()
        return sorted(chained | guarded) if self.active else []

    def hooks(self) -> list[str]:
        """The fetch (samples begin there; a failing batch runs again without the cache)."""
        return [FETCH, ITERABLE_FETCH] if self.active else []

    def before_patching(self) -> None:
        """Open the store (a new generation)."""
        from codedag.migrate.cache.keys import versions

        versions()  # read once here (tens of ms), not in the first sample of every worker
        self._guarded = self._functions()[1]
        run = self.settings.run
        if run is None:  # the ranks of one launch, else this process and the workers it starts
            run = machine_launch_key() or f"process={os.getpid()};{time.time_ns()}"
        self.run = run
        self.store.begin_run(run)
        if not self.store.enabled:
            log.warning(
                "prefix cache: no usable store (%s); the run goes on without the cache",
                "; ".join(self.store.problems) or "no tier",
            )
        elif self.store.problems:
            log.warning("prefix cache: %s", "; ".join(self.store.problems))

    def after_patching(self, failed: Mapping[str, str]) -> None:
        """Start counting."""
        super().after_patching(failed)
        log.info("prefix cache applied: %d chain(s)", len(self.chains))

    def worker_stats(self) -> Any:
        """The cache's counters of forked workers."""
        from codedag.migrate.workerstats import WorkerStats

        return WorkerStats(
            ["cache"],
            lambda _name: self.session.values(),
            FIELDS,
            labels=lambda: {"cache": dict(self.session.details)},
        )

    def after_restore(self) -> None:
        """Write pending updates, stop counting and close the store."""
        self.session.writer.close()
        self.session.flush()
        super().after_restore()
        self.store.close()

    def layer(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        """The cache's replacement of ``name`` calling ``original``."""
        if name == FETCH:
            return self._make_fetch(original)
        if name == ITERABLE_FETCH:
            return self._make_iterable_fetch(original)
        if name in self._guarded:
            return _guard(name, original)
        return self._replacement(name, original)

    # -- replacements ---------------------------------------------------------------------
    def _replacement(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        from codedag.plan.context import frame_name

        session = self.session
        sources = self._sources.get(name, [])
        by_caller: dict[str, ChainSpec] = {}
        by_line: dict[tuple[str, int], ChainSpec] = {}
        anywhere = next((c for c in sources if not c.callers), None)
        for chain in sources:
            for caller in chain.callers:
                for line in chain.lines:
                    by_line.setdefault((caller, line), chain)
                if not chain.lines:
                    by_caller.setdefault(caller, chain)

        def replacement(*args: Any, **kwargs: Any) -> Any:
            if has_prefix_value(args, kwargs):
                return step(name, original, args, kwargs)
            if sources and session.active:
                chain = None
                if by_line or by_caller:
                    frame = sys._getframe(1)
                    caller = frame_name(frame)
                    chain = by_line.get((caller, frame.f_lineno)) if by_line else None
                    chain = chain or by_caller.get(caller)
                if chain is None and anywhere is not None and session.fetching:
                    chain = anywhere
                if chain is not None and chain.id not in session.given_up:
                    return session.source(chain, original, args, kwargs)
            return original(*args, **kwargs)

        return like_original(replacement, original)

    def _make_fetch(self, original: Callable[..., Any]) -> Callable[..., Any]:
        session = self.session
        runtime = self

        def fetch(fetcher: Any, index: Any) -> Any:
            if not session.active:
                return original(fetcher, index)
            states, taken = random_states.hold()
            workers = runtime.workers
            collate = _fetch_started(fetcher, session)
            try:
                batch = original(fetcher, index)
            except Exception as error:
                if not session.created:
                    raise
                log.info(
                    "a batch failed with cached chains (%s: %s); it runs again without the cache",
                    type(error).__name__,
                    str(error).splitlines()[0][:120] if str(error) else "",
                )
                session.failed_sample()
                random_states.restore(states)
                with session.suspended():
                    return original(fetcher, index)
            finally:
                fetcher.collate_fn = collate
                random_states.release(taken)
                runtime._fetch_ended(workers)
            session.succeeded_sample()
            return batch

        return fetch

    def _make_iterable_fetch(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """The fetch of an iterable data set: as a map-style one's, except that a batch that
        fails with cached values cannot run again (its samples came from the data set's
        iterator, which has moved on): the error goes on to the program, and the chains of the
        batch are not cached in this process any more."""
        session = self.session
        runtime = self

        def fetch(fetcher: Any, index: Any) -> Any:
            if not session.active:
                return original(fetcher, index)
            workers = runtime.workers
            collate = _fetch_started(fetcher, session)
            try:
                batch = original(fetcher, index)
            except StopIteration:  # the data set's end
                raise
            except Exception as error:
                if session.created:
                    session.failed_for_good(error)
                raise
            finally:
                fetcher.collate_fn = collate
                runtime._fetch_ended(workers)
            session.succeeded_sample()
            return batch

        return fetch

    def _fetch_ended(self, workers: Any) -> None:
        """A DataLoader fetch of this thread ended: its values go to the writer, its hits'
        generations to the store, and a worker's counts to the process that owns them."""
        session = self.session
        session.local.fetching -= 1
        session.end_fetch()
        session.writer.wake()
        session.flush()
        if workers is not None:
            workers.publish()  # a worker's counts reach the owner with its batch
        if self.after_fetch is not None:
            self.after_fetch()

    # -- statistics -----------------------------------------------------------------------
    def _merged(self) -> dict[str, int]:
        local = self.session.values()
        remote = self.workers.totals("cache") if self.workers is not None else {}
        afresh = self.afresh_counts()
        return {k: local.get(k, 0) + remote.get(k, 0) + afresh.get(k, 0) for k in FIELDS}

    def _diverged(self) -> dict[str, int]:
        """Why chains were computed normally (every process), the ten most common reasons."""
        details = Counter(self.session.details)
        if self.workers is not None:
            details.update(self.workers.label_totals("cache"))
        return dict(details.most_common(10))

    def progress(self) -> CacheProgress:
        """What every process has counted so far (workers' counts as of their last batch)."""
        merged = self._merged()
        misses = sum(merged[f"miss_{r}"] for r in REASONS)
        refused = merged["full"] + merged["changed"] + merged["evicted"]
        hits = merged["hits"]
        ready = max(0, hits + merged["queued"] - refused)
        return CacheProgress(hits + misses, hits, ready, refused + merged["dropped"])

    def stats(self) -> CacheStats:
        """``get_stats()["cache"]``: hits, misses by reason, bytes in RAM and on disk,
        evictions, verification, time reading and writing (all processes; this process's
        queued values are stored first)."""
        self.session.writer.flush()
        merged = self._merged()
        tiers = self.store.info() if self.active else []
        hits = merged["hits"]
        misses = {r: merged[f"miss_{r}"] for r in REASONS if merged[f"miss_{r}"]}
        lookups = hits + sum(misses.values())
        return CacheStats.model_validate(
            {
                "enabled": self.active,
                "chains": [c.id for c in self.chains],
                "hits": hits,
                "misses": misses,
                "hit_rate": hits / lookups if lookups else 0.0,
                "stored": merged["stored"],
                "not_stored_full": merged["full"],
                "not_stored_changed": merged["changed"],
                "not_stored_dropped": merged["dropped"],
                "not_stored_later": merged["later"],
                "unpaid": merged["unpaid"],
                "evictions": merged["evicted"],
                "corrupt": merged["corrupt"],
                "bytes": {t.kind: t.used_bytes for t in tiers},
                "allocated_bytes": {t.kind: t.allocated_bytes for t in tiers},
                "budget_bytes": {t.kind: t.budget_bytes for t in tiers},
                "tiers": [t.__dict__ for t in tiers],
                "verify": {
                    "checked": merged["verified"],
                    "mismatches": merged["verify_mismatches"],
                    "examples": list(self.session.mismatches[:5]),
                },
                "read_ms": merged["read_ns"] / 1e6,
                "write_ms": merged["write_ns"] / 1e6,
                "queue_ms": merged["queue_ns"] / 1e6,
                "hit_bytes": merged["hit_bytes"],
                "lookup": {
                    "gathered": merged["lookup_gathered"],
                    "computed": merged["lookup_computed"],
                    "mismatches": merged["lookup_mismatches"],
                },
                "diverged": self._diverged(),
                "problems": self.store.problems,
            }
        )


class RealSamplesCollate:
    """A fetcher's collate function for one fetch, handed the samples' real values
    (:func:`~.prefix_values.real_samples`) where the fetch started chains. A fetch that makes
    the samples itself (batched execution's) reads ``user_collate`` and calls
    ``prepare_samples``."""

    __slots__ = ("session", "user_collate")

    def __init__(self, user_collate: Callable[[Any], Any], session: Session) -> None:
        self.user_collate = user_collate
        self.session = session

    def prepare_samples(self, data: Any) -> Any:
        """The samples with their prefix values real."""
        return real_samples(data) if self.session.created else data

    def __call__(self, data: Any) -> Any:
        return self.user_collate(self.prepare_samples(data))


def _fetch_started(fetcher: Any, session: Session) -> Any:
    """Start a fetch of ``fetcher`` in ``session`` (samples begin, chains start) and give the
    fetcher a :class:`RealSamplesCollate` for it; returns its own collate function, to put
    back when the fetch ends."""
    session.begin_sample(fetcher)
    session.local.fetching += 1
    collate = fetcher.collate_fn
    fetcher.collate_fn = RealSamplesCollate(collate, session)
    return collate


def _guard(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """``original`` taking prefix values as their computed values (their chains diverge)."""

    def guard(*args: Any, **kwargs: Any) -> Any:
        if has_prefix_value(args, kwargs):
            return outside_call(name, original, args, kwargs)
        return original(*args, **kwargs)

    return like_original(guard, original)
