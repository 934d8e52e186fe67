"""Watch one DataLoader through a script's epochs: time them, plan in or after the first, apply it.

A :class:`LoaderWatch` is handed each ``__iter__`` of its loader (by ``codedag run``'s patch of
``DataLoader.__iter__`` or by :func:`codedag.integrations.accelerate.accelerate`). It

* times each epoch from the iterator's creation to its exhaustion, and the time the script waits
  in ``__next__`` (the data wait), counting batches and samples;
* with a plan stored for this pipeline (:mod:`.plan_store`), applies it before the first epoch
  (one whose cached chains met none of their source calls in that epoch was made for another path
  through the code: it is dropped and the second epoch plans as a first run's first does);
* else imports the planner in the background while the first batches train (with 0 workers
  only where the script imported cv2, PIL or another library codedag accelerates besides numpy:
  :func:`.prefetch.likely_to_plan`; waited for before planning and before any watched loader's
  next iterator, where workers fork), then traces the first samples of one batch and plans them
  (:func:`.autoplan.plan_loader`; not at all when they call no library codedag knows), with
  every random generator put back, and applies the plan (``PipelineMigrator.apply``) after the
  first epoch's first batch, so that it serves the rest of the epoch and its cache stores what
  the second epoch reads: with 0 workers the fetch is this process's; workers (persistent ones
  included) were started with a mailbox (:mod:`codedag.migrate.plan_mailbox`) where the plan is
  posted once the planner's background import has ended, and apply it before their next fetch.
  Where no plan was made in the first epoch (an epoch of one batch), it is made when the epoch
  ends, and a persistent loader's workers find it at the next epoch's first fetch. A plan that
  changes nothing (no function replaced, no batched chain, prefix cache, lookup table or loader
  setting) is restored at once and reported as ``nothing to apply``;
* on :meth:`close`, restores everything the plan patched and fills the run's results.

The iterator the script receives yields the loader's own batches, unchanged; it forwards
``len()`` and attribute reads to torch's iterator. Failing to trace, plan or apply logs one
warning and the script runs on unmodified.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from codedag.errors import ConfigError
from codedag.integrations import prefetch
from codedag.integrations.run_results import AcceleratedRun, Decision, EpochFigures
from codedag.util.gc_pause import gc_paused
from codedag.util.import_draws import (
    ImportDraw,
    draws_line,
    noting_import_draws,
    replay_in_forked_children,
    stop_replaying,
)
from codedag.util.text import folded_path

if TYPE_CHECKING:
    from codedag.integrations.plan_store import IdlePlan
    from codedag.migrate.plan_mailbox import Mailbox
    from codedag.plan import MigrationPlan
    from codedag.plan.cache import FirstEpoch

log = logging.getLogger(__name__)

_busy = threading.local()


def busy() -> bool:
    """Whether this thread is tracing, planning or applying (its DataLoaders are codedag's)."""
    return bool(getattr(_busy, "depth", 0))


@contextlib.contextmanager
def _working() -> Iterator[None]:
    _busy.depth = getattr(_busy, "depth", 0) + 1
    try:
        yield
    finally:
        _busy.depth -= 1


@dataclass(frozen=True)
class WatchSettings:
    """How a watched loader is planned.

    Args:
        plan_budget_s: seconds tracing and planning may take (0: never plan).
        replan: plan again even when a plan is stored for this pipeline.
        store_plans: keep plans across runs (:mod:`codedag.integrations.plan_store`).
        first_epoch: how the cache's first epoch stores values: ``all`` (the default: the
            epoch the plan first applies in already traces and plans, and the run is judged
            by the epochs after it), ``auto`` (the plan's: paced where storing every value
            would slow it) or ``paced`` (docs/cache.md).
    """

    plan_budget_s: float = 60.0
    replan: bool = False
    store_plans: bool = True
    first_epoch: FirstEpoch = "all"

    def __post_init__(self) -> None:
        if self.first_epoch not in ("all", "auto", "paced"):  # FirstEpoch (no pydantic here)
            raise ConfigError(
                f"first_epoch must be 'auto', 'all' or 'paced', got {self.first_epoch!r}"
            )


def batch_samples(batch: Any, samples_listed: int | None = None) -> int:
    """Samples in a batch: the first dimension of its first tensor or array (1 if none).

    ``samples_listed``: for a loader whose own ``collate_fn`` may hand on its samples as they
    are (:func:`listed_batch_size`), its batch size (0 where a batch sampler makes them): then
    lists of one length side by side (``(list(images), list(targets))``) hold one item per
    sample, and so does a list of as many tensors or arrays as the batch size.
    """
    if samples_listed is not None:
        listed = _listed_samples(batch, samples_listed)
        if listed:
            return listed
    if type(batch) is tuple or type(batch) is list:  # the usual (inputs, targets) first
        shape = getattr(batch[0], "shape", None) if batch else None
        if shape is not None and len(shape) > 0:
            return int(shape[0])
    stack = [batch]
    while stack:
        item = stack.pop(0)
        shape = getattr(item, "shape", None)
        if shape is not None and len(shape) > 0:
            return int(shape[0])
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            if item and not any(
                hasattr(x, "shape") or isinstance(x, (list, tuple, dict)) for x in item
            ):
                return len(item)  # a collated list of plain values
            stack.extend(item)
    return 1


def _listed_samples(batch: Any, batch_size: int) -> int:
    """Samples in a batch its loader's own ``collate_fn`` made of lists (0: not such a batch)."""
    if type(batch) not in (tuple, list) or not batch:
        return 0
    if len(batch) > 1 and all(type(part) is list for part in batch):
        lengths = {len(part) for part in batch}
        if len(lengths) == 1:  # (list(images), list(targets))
            return lengths.pop()
    shaped = all(len(getattr(item, "shape", ())) for item in batch)
    return batch_size if type(batch) is list and len(batch) == batch_size and shaped else 0


def listed_batch_size(loader: Any) -> int | None:
    """For a loader that batches with a ``collate_fn`` of its own (not torch's default one),
    which may hand on its samples as a list: its batch size (0 where a batch sampler makes the
    batches); None for any other loader."""
    from torch.utils.data import default_collate

    collate = getattr(loader, "collate_fn", None)
    if collate is None or collate is default_collate:
        return None
    size = getattr(loader, "batch_size", None)
    if isinstance(size, int):
        return size
    return 0 if getattr(loader, "batch_sampler", None) is not None else None


@dataclass(eq=False)
class _TimedIterator:
    """The script's iterator over one epoch: torch's own, timed.

    The counts are plain attributes of this iterator, written into the epoch's figures when the
    epoch ends: the cost per batch stays a few hundred nanoseconds.
    """

    _inner: Any
    _watch: LoaderWatch
    figures: EpochFigures
    start: float
    done: bool = field(default=False, init=False)
    wait_s: float = field(default=0.0, init=False)
    batches: int = field(default=0, init=False)
    samples: int = field(default=0, init=False)
    samples_listed: int | None = field(default=None, init=False)
    last_s: float = field(default=0.0, init=False)  # when the last batch was handed

    def __post_init__(self) -> None:
        self.wait_s = self.figures.data_wait_s
        self.samples_listed = listed_batch_size(self._watch.loader)

    def __iter__(self) -> _TimedIterator:
        return self

    def __next__(self) -> Any:
        began = time.perf_counter()
        if self.batches >= 1 and not self._watch.tried:
            self._watch.plan_within_epoch(self)
        try:
            batch = next(self._inner)
        except StopIteration:
            self.wait_s += time.perf_counter() - began
            self._watch._epoch_ended(self, complete=True)
            raise
        self.last_s = time.perf_counter()
        self.wait_s += self.last_s - began
        self.batches += 1
        self.samples += batch_samples(batch, self.samples_listed)
        return batch

    def gave_every_batch(self) -> bool:
        """Whether the epoch gave as many batches as the loader has: a trainer that counts them
        (Lightning) stops reading at the last one and never meets the iterator's end."""
        try:
            return self.batches >= len(self._inner) > 0
        except TypeError:  # an iterable data set without a length
            return False

    def seal(self, complete: bool) -> None:
        """Write the epoch's counts and time into its figures: an epoch the script stopped
        reading early ends at its last batch and the epoch's mean step after it (not when the
        next epoch starts or the script ends: validation, saving, a worker's shutdown)."""
        figures = self.figures
        end = time.perf_counter()
        if not complete and self.batches:
            steps = self.batches - 1  # between the first batch handed and the last
            stepping = max(0.0, self.last_s - self.start - self.wait_s)
            end = min(end, self.last_s + (stepping / steps if steps else 0.0))
        figures.epoch_s = end - self.start
        figures.complete = complete
        figures.data_wait_s = self.wait_s
        figures.batches, figures.samples = self.batches, self.samples

    def __len__(self) -> int:
        return len(self._inner)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _unloaded(plan: MigrationPlan) -> list[str]:
    """The functions ``plan`` patches whose modules are not imported yet (applying it would
    import them)."""
    from codedag.patching import loaded_value
    from codedag.plan.names import named_functions

    out = []
    for name in dict.fromkeys(n.name for n in named_functions(plan) if n.used):
        try:
            loaded_value(name)
        except LookupError:
            out.append(name)
    return out


_WATCHES: weakref.WeakSet[LoaderWatch] = weakref.WeakSet()
"""The watches of this process: one plan applies at a time (a plan's patches are the process's,
and serve every DataLoader)."""

_INTERRUPTED = "planning was interrupted; the next epoch plans again"
NOTHING_APPLIED = "the plan moves, batches, caches and tabulates nothing"

_APPLIED: list[tuple[weakref.ref[LoaderWatch], Any]] = []
"""Each applied plan's watch and migrator. A loader dropped with its watch (a notebook's cell run
again binds a new one) is collected without its plan being restored: the patched functions hold
the migrator, so its patches stay until :func:`_restore_orphaned` finds the watch gone."""


def _forget_applied(migrator: Any) -> None:
    """Drop ``migrator`` from :data:`_APPLIED`: its watch restores it."""
    _APPLIED[:] = [entry for entry in _APPLIED if entry[1] is not migrator]


def _restore_orphaned() -> None:
    """Restore the plans whose watch was collected with its loader (said once each)."""
    for entry in list(_APPLIED):
        watch, migrator = entry
        if watch() is not None:
            continue
        _APPLIED.remove(entry)
        try:
            migrator.restore()
        except Exception as error:  # its patches stay; the next apply says why it cannot
            log.warning("codedag: a dropped DataLoader's plan was not restored: %s", error)
        else:
            log.info("codedag: the plan of a DataLoader no longer used was restored")


class LoaderWatch:
    """Times, plans and accelerates one DataLoader; see the module docstring."""

    def __init__(self, loader: Any, settings: WatchSettings, index: int = 0) -> None:
        from codedag.integrations.pipeline_code import pipeline_name

        self.loader = loader
        self.settings = settings
        self.results = AcceleratedRun(
            loader_index=index, dataset=pipeline_name(getattr(loader, "dataset", None))
        )
        self.migrator: Any = None
        self.plan: MigrationPlan | None = None
        self._open: _TimedIterator | None = None
        self._tried = False
        self._in_this_process_only = False  # workers started afresh receive no plan
        self._mailbox: Mailbox | None = None  # where the first epoch's workers look for the plan
        self._first_indices: list[Any] = []
        self._replanned = ""  # why a stored plan was not applied, when it was not
        self._from_store = False  # the plan applied was stored by an earlier run
        self._inputs: dict[str, Any] | None = None  # what the stored plan's key stands for
        # a stored plan naming functions of modules the script has not imported yet, applied at
        # the second batch with 0 workers: the script's first batch imports what it uses, as its
        # own run does (a module whose import draws from a global generator draws in its place)
        self._deferred: MigrationPlan | None = None
        self._import_draws: list[ImportDraw] = []  # imports of codedag's that drew
        self._unreplayable: list[ImportDraw] = []  # those a forked worker cannot make (said once)
        self._lock = threading.RLock()
        _WATCHES.add(self)

    def follow(self, loader: Any) -> None:
        """Watch ``loader`` from its next epoch on: the script made the watched loader again
        over the same data set and settings (a helper that builds one each epoch), so its
        epochs are this loader's next ones, under the plan applied in this process."""
        with self._lock:
            if self._open is not None:
                self._epoch_ended(self._open, complete=False)
            self.loader = loader
            self.results.loaders_made += 1

    # ------------------------------------------------------------------ the epochs
    def iterate(self, make_iterator: Callable[[], Any]) -> Any:
        """Start an epoch: ``make_iterator()`` is the loader's own ``__iter__``."""
        if busy():
            return make_iterator()
        prefetch.settle()
        with self._lock:
            if self._open is not None:
                self._epoch_ended(self._open, complete=False)  # the script stopped reading early
            start = time.perf_counter()
            if not self.results.epochs and not self._tried:
                self._apply_stored()
            if self._tried or self._fetches_here() or self.settings.plan_budget_s <= 0:
                inner = make_iterator()
            else:
                inner = self._started_with_mailbox(make_iterator)
            if not self.results.epochs and not self._tried and self._fetches_here():
                self._first_indices = _record_first_indices(inner)
            planning = not self._tried and self._deferred is None
            if planning and self.settings.plan_budget_s > 0 and self._prefetches():
                prefetch.start()
            figures = EpochFigures(
                epoch=len(self.results.epochs) + 1,
                planned=self.migrator is not None and not self._in_this_process_only,
                data_wait_s=time.perf_counter() - start,
            )
            self._open = _TimedIterator(inner, self, figures, start)
            return self._open

    @contextlib.contextmanager
    def _noting_draws(self, why: str) -> Iterator[None]:
        """Note the modules the block imports whose import draws from a global random generator:
        the processes forked from now on (the loader's workers) make those draws where their
        code first imports the modules, as the script's own workers do; a draw that cannot be
        made again is said once (the script's own run makes it, this one no more)."""
        said = bool(self._unreplayable)
        try:
            with noting_import_draws(self._import_draws):
                yield
        finally:
            if self._import_draws:
                self._unreplayable = replay_in_forked_children(self._import_draws)
                if self._unreplayable and not said:
                    log.warning("%s", draws_line(self._unreplayable, why))

    def _epoch_ended(self, timed: _TimedIterator, complete: bool) -> None:
        with self._lock:
            if timed.done:
                return
            timed.done = True
            complete = complete or timed.gave_every_batch()
            timed.seal(complete)
            self.results.epochs.append(timed.figures)
            if self._open is timed:
                self._open = None
            if self._deferred is not None:  # an epoch of one batch
                self._apply_deferred()
            elif not self._tried:
                self._plan_and_apply()
            elif complete and self._from_store and len(self.results.epochs) == 1:
                self._from_store = False  # judged once, by the first epoch
                # a plan applied from the second batch of an epoch of one met no batch yet
                served = (timed.figures.plan_from_batch or 1) <= timed.batches
                if served and self._stored_plan_met_nothing():
                    self._plan_again()

    def _stored_plan_met_nothing(self) -> bool:
        """Whether the stored plan this run applied caches chains none of whose source calls the
        first epoch made: a plan for another path through the same code (the script run with
        other arguments, another script over the same data set), which gains nothing here."""
        if self.migrator is None:
            return False
        if self._in_this_process_only and not self._fetches_here():
            return False  # its workers, started afresh, fetch without it: it met nothing there
        cache = self.migrator.cache
        if not cache.active or not self.results.epochs[0].samples:
            return False
        if any(cache.session.unpaid(chain) for chain in cache.chains):
            return False  # met and given up (in a worker, or by an earlier run): no other path
        return cache.progress().lookups == 0

    def _plan_again(self) -> None:
        """Drop the stored plan that met nothing (its file too: the next run plans afresh) and
        plan in the next epoch as a first run does; a loader whose workers persist keeps them
        with the stored plan for this run (they take no other)."""
        from codedag.integrations.plan_store import drop_plan

        why = "the stored plan's cached chains met none of their source calls in epoch 1"
        log.warning("codedag: %s: it was made for another path through this code", why)
        drop_plan(self.results.plan_key)
        if getattr(self.loader, "persistent_workers", False) and not self._fetches_here():
            self.results.plan_reason = f"{why}; the next run plans again"
            return
        _forget_applied(self.migrator)
        self.migrator.restore()
        self.migrator, self.plan, self._tried = None, None, False
        self._replanned = f"planned again: {why}"
        self.results.plan_status = "skipped"

    @property
    def tried(self) -> bool:
        """Whether a plan was looked for (stored, or traced and planned) already."""
        return self._tried

    def plan_within_epoch(self, timed: _TimedIterator) -> None:
        """Plan within the first epoch: after its first batch, with workers once the planner's
        background import has ended.

        A plan applied now serves the epoch's remaining batches: its prefix cache stores them
        in the first epoch and the second reads them back, instead of storing in the second.
        With 0 workers the fetch that the plan patches is this process's, and every batch
        fetched before the plan would have to be computed again to be stored: the plan is made
        at the second batch, waiting for the import. The loader's workers, started before the
        plan was made, receive it through their mailbox (:mod:`codedag.migrate.plan_mailbox`)
        and apply it before their next fetch, so it serves every batch after those they were
        handed already; meanwhile they load while the import runs, so the plan waits for it.
        """
        if not self._fetches_here() and (self._mailbox is None or not prefetch.settled()):
            return
        with self._lock:
            if self._tried or timed.done:
                return
            handed = _batches_handed(timed._inner) if not self._fetches_here() else 0
            if self._deferred is not None:
                self._apply_deferred()
            else:
                self._plan_and_apply(self._first_indices[0] if self._first_indices else None)
            served = self._fetches_here() or (self._mailbox is not None and self._mailbox.delivered)
            if self.migrator is not None and served:
                timed.figures.planned = True
                timed.figures.plan_from_batch = timed.batches + 1 + handed

    def _started_with_mailbox(self, make_iterator: Callable[[], Any]) -> Any:
        """The loader's iterator, its workers started with a mailbox where the plan made while
        they run is posted (a loader with workers, not planned yet)."""
        from codedag.migrate.plan_mailbox import Mailbox

        if self._mailbox is not None:  # an epoch before planning: its workers are gone
            self._mailbox.close()
            self._mailbox = None
        own = self.loader.worker_init_fn
        mailbox = Mailbox()
        try:
            self.loader.worker_init_fn = mailbox.worker_init(own)
        except Exception as error:  # a loader that takes no other: its workers keep their code
            log.debug("no mailbox for the DataLoader's workers: %s", error)
            mailbox.close()
            return make_iterator()
        self._mailbox = mailbox
        try:
            return make_iterator()
        finally:
            self.loader.worker_init_fn = own

    def _post_to_workers(self) -> None:
        """Post what the loader's running workers apply: the plan, or nothing (they stop
        looking). Workers that would spend more applying it than it saves them receive
        nothing."""
        mailbox = self._mailbox
        if mailbox is None or mailbox.posted:
            return
        plan = None
        if self.migrator is not None and not self._in_this_process_only:
            from codedag.migrate.spawned_workers import forgone_gain_s

            try:
                plan = self.migrator.running_worker_plan()
                if plan is not None and forgone_gain_s(self.loader, plan) is not None:
                    plan = None
            except Exception as error:  # the workers run on as they are
                log.debug("no plan for the running workers: %s: %s", type(error).__name__, error)
                plan = None
        mailbox.post(plan)

    def _fetches_here(self) -> bool:
        return getattr(self.loader, "num_workers", 1) == 0

    def _prefetches(self) -> bool:
        """Whether to import the planner in the background (with workers it has the first
        epoch, with 0 workers the first batch): where the script imported a library a plan is
        likely made for. Samples with nothing to plan never import it at all, and with workers
        the import would take a core from them."""
        return prefetch.likely_to_plan()

    def end_epoch(self) -> None:
        """The epoch is over, as a trainer knows it (its last step ran): seal an epoch the loop left
        open (it stopped before the iterator's end, as ``limit_train_batches`` does) and plan now,
        not when the next epoch starts. Nothing happens when the iterator was exhausted already."""
        with self._lock:
            if self._open is not None:
                self._epoch_ended(self._open, complete=False)

    # ------------------------------------------------------------------ planning
    def _key(self) -> str:
        """The plan's key, made once, before the loader's first batch: the data set's settings
        are read as the next run reads them there (an attribute its samples set, an LMDB
        environment opened at the first sample, would give the plan a key never looked up)."""
        from codedag.integrations.autoplan import script_device
        from codedag.integrations.plan_store import plan_key

        if not self.results.plan_key:
            self.results.device = script_device()
            self.results.plan_key = plan_key(self.loader, self.results.device)
        return self.results.plan_key

    def _under_another_plan(self) -> bool:
        """Whether another watched loader's plan is applied in this process: its patches serve
        this loader too, and a plan of this loader's own cannot be applied beside it (said
        once, and nothing traced or planned)."""
        if self._plan_holder() is not None:  # perhaps a loader dropped in a cycle with its
            gc.collect()  # watch, which the cycle collector alone frees: then its plan goes
        _restore_orphaned()
        holder = self._plan_holder()
        if holder is None:
            return False
        self._tried = True
        self.results.plan_status = "not planned"
        self.results.plan_reason = (
            f"it runs under the plan applied for the DataLoader over {holder.results.dataset}, "
            "planned first: one plan applies in a process, and its patches serve every "
            "DataLoader (what the two pipelines share is cached, placed and tabulated alike); "
            "a plan of its own would serve what they do not share"
        )
        log.warning(
            "codedag: the DataLoader over %s is not planned: %s",
            self.results.dataset,
            self.results.plan_reason,
        )
        return True

    def _plan_holder(self) -> LoaderWatch | None:
        """Another watch whose plan is applied (None: none)."""
        return next((w for w in list(_WATCHES) if w is not self and w.migrator is not None), None)

    @gc_paused()
    def _apply_stored(self) -> None:
        if not self.settings.store_plans or self._under_another_plan():
            return
        from codedag.integrations.pipeline_code import changed_code
        from codedag.integrations.plan_store import load_plan, plan_path

        try:
            key = self._key()  # before the first batch, replanned or not (see _key)
        except Exception as error:  # the pipeline's code cannot be read: plan as usual
            log.debug("no plan key: %s", error)
            return
        if self.settings.replan:
            return
        stored = load_plan(key, idle=True)
        if stored is None or (stored.plan is None and stored.idle is None):
            return
        changed = changed_code(stored.inputs.get("code", {}))
        if changed:  # the plan's call sites may name code that is no more: plan again
            self._replanned = f"planned again: {', '.join(changed)} changed since the stored plan"
            log.info("codedag: %s", self._replanned)
            return
        self.results.plan_path = str(plan_path(key))
        self._inputs = stored.inputs or None
        if stored.idle is None and stored.plan is not None and self._fetches_here():
            unloaded = _unloaded(stored.plan)
            if unloaded:  # see _deferred
                self._deferred = stored.plan
                log.info(
                    "codedag: the stored plan applies from the second batch: it names %s, of "
                    "modules the script has not imported yet",
                    ", ".join(unloaded[:3]),
                )
                return
        self._tried = True
        if stored.idle is not None:  # nothing to apply: its decisions, no model imported
            self.results.moved, self.results.kept = stored.idle.moved, stored.idle.kept
            self._idle(stored.idle.reason or NOTHING_APPLIED)
        elif stored.plan is None or not self._apply(stored.plan, stored=True):
            return
        self.results.plan_status += " (stored plan)"
        self._from_store = True

    def _apply_deferred(self) -> None:
        """Apply the stored plan kept for the second batch (see :attr:`_deferred`)."""
        plan, self._deferred = self._deferred, None
        assert plan is not None
        self._tried = True
        if self._apply(plan, stored=True):
            self.results.plan_status += " (stored plan)"
            self._from_store = True

    @gc_paused()
    def _plan_and_apply(self, indices: Any = None) -> None:
        """Trace, plan and apply, and post the outcome to the loader's running workers;
        ``indices``: those of the warm-up batch (0 workers): samples it did not fetch are
        traced, and it is then stored in the prefix cache. Ctrl-C meanwhile stops the script's
        loop, as it would have without codedag, and the next epoch plans again."""
        if self.results.plan_reason == _INTERRUPTED:
            self.results.plan_reason = ""
        try:
            self._plan_and_apply_here(indices)
        except KeyboardInterrupt:
            if self.migrator is None:  # nothing applied (an apply cut short restores itself)
                self._tried = False
                self.results.plan_status, self.results.plan_reason = "not planned", _INTERRUPTED
            raise
        finally:
            self._post_to_workers()

    def _plan_and_apply_here(self, indices: Any) -> None:
        prefetch.settle()
        from codedag.integrations.autoplan import plan_loader, script_device

        if self._under_another_plan():
            return
        self._tried = True
        self.results.device = script_device()
        self._first_indices = []
        with _working(), self._noting_draws("to trace a batch in the script's process"):
            outcome = plan_loader(self.loader, self.settings.plan_budget_s, indices=indices)
        self.results.trace_s, self.results.plan_s = outcome.trace_s, outcome.plan_s
        if outcome.idle:  # the samples gave nothing to plan: the next run traces nothing
            from codedag.integrations.plan_store import NO_PLAN, IdlePlan

            self._idle(outcome.reason)
            self._save(NO_PLAN, outcome.functions, IdlePlan(reason=outcome.reason))
            return
        if outcome.plan is None:
            self._skip(outcome.reason)
            return
        applied = self._apply(outcome.plan)
        if applied and self._replanned and not self.results.plan_reason:
            self.results.plan_reason = self._replanned
        if applied and indices is not None:
            self._store_warmup(indices)
        if applied:
            from codedag.integrations.plan_store import IdlePlan

            idle = self.results.plan_status == "nothing to apply" and self.migrator is None
            held = IdlePlan(self.results.moved, self.results.kept) if idle else None
            self._save(outcome.plan, outcome.functions, held)

    def _save(self, plan: dict[str, Any], functions: frozenset[str], idle: IdlePlan | None) -> None:
        """Store ``plan`` (made for samples that ran ``functions``; ``idle``: what a plan that
        applies nothing keeps) for the next run of this pipeline, where plans are stored."""
        if not self.settings.store_plans:
            return
        from codedag.integrations.plan_store import plan_inputs, save_plan

        inputs = None
        with contextlib.suppress(Exception):
            self._key()
            inputs = plan_inputs(self.loader, self.results.device, functions)
        if self.results.plan_key:
            saved = save_plan(self.results.plan_key, plan, inputs, idle)
            self.results.plan_path = "" if saved is None else str(saved)
            self._inputs = inputs

    def _store_warmup(self, indices: Any) -> None:
        """Fetch the warm-up batch's samples again under the applied plan, so that its prefix
        cache holds them too and the next epoch reads every sample back (0 workers: the fetch
        is this process's), from a copy of the data set where it can be made. Collation is
        skipped; every random generator is put back."""
        migrator = self.migrator
        if migrator is None or not migrator.get_stats()["cache"].get("enabled"):
            return
        from codedag.integrations.autoplan import preserved_random_state
        from codedag.trace.dataloader import indices_loader, on_a_copy
        from codedag.util.logs import held_logs

        def fetch(loader: Any) -> None:
            for _ in indices_loader(loader, indices, collate_fn=_discard):
                pass

        try:
            with _working(), preserved_random_state(self.loader), held_logs():
                on_a_copy(self.loader, fetch)
        except Exception as error:  # the next epoch computes these samples, as without it
            log.debug("the warm-up batch was not stored: %s: %s", type(error).__name__, error)

    def _apply(self, plan: Mapping[str, Any] | MigrationPlan, stored: bool = False) -> bool:
        """Apply ``plan`` (validated here once when it is a fresh plan's dict); False when it
        cannot be (the reason reported; a ``stored`` plan is set aside, and the loader planned
        as in a first run)."""
        from codedag.integrations.autoplan import preserved_random_state
        from codedag.plan.files import check_plan
        from codedag.util.logs import held_logs

        migrator = None
        try:
            plan = check_plan(dict(plan) if isinstance(plan, Mapping) else plan, "the plan")
            idle = places_nothing(plan)  # then no migrator, and no random draw to put back
            if not idle:
                with (
                    _working(),
                    self._noting_draws("to apply the plan"),
                    preserved_random_state(self.loader),
                    held_logs(),
                ):
                    migrator = _applied(plan, self.settings.first_epoch)
                    idle = changes_nothing(migrator)
                    if idle:
                        migrator.restore()
        except Exception as error:
            reason = f"the plan could not be applied: {type(error).__name__}: {error}"
            if stored:
                self._set_aside(reason)
            else:
                self._skip(reason)
            return False
        self.plan = plan
        self.results.moved, self.results.kept = decisions(plan)
        if idle:  # the loader runs as it is: say so, rather than 'applied', and hold no patch
            self._idle(NOTHING_APPLIED)
            return True
        self.migrator = migrator
        _APPLIED.append((weakref.ref(self), migrator))
        self.results.plan_status = "applied"
        method = self._started_workers()
        if method is not None:
            self.results.plan_status = self._afresh_status(method)
        return True

    def _afresh_status(self, method: str) -> str:
        """The plan's status where the loader starts workers that inherit nothing."""
        from codedag.migrate.spawned_workers import forgone_gain_s

        shipped = self.migrator.worker_plan() if self.migrator is not None else None
        if shipped is None:
            why = "they receive nothing"
        elif (gain_s := forgone_gain_s(self.loader, shipped)) is not None:
            why = (
                f"the plan would save each {gain_s:.2f} s of an epoch, less than applying it costs"
            )
        else:
            return f"applied ({method} workers apply it themselves)"
        self._in_this_process_only = True
        return f"applied in this process only ({method} workers: {why})"

    def _started_workers(self) -> str | None:
        """How the loader starts workers that inherit nothing of this process ('spawn',
        'forkserver': they apply the plan themselves); None with 0 workers or forked ones."""
        from codedag.migrate.spawned_workers import start_method

        if self._fetches_here():
            return None
        method = start_method(self.loader)
        return None if method == "fork" else method

    def _idle(self, reason: str) -> None:
        self.results.plan_status, self.results.plan_reason = "nothing to apply", reason

    def _set_aside(self, reason: str) -> None:
        """Remove the stored plan that cannot be applied (edited, written by another version,
        or naming what this process cannot patch) and plan as a first run does."""
        from codedag.integrations.plan_store import drop_plan

        log.warning(
            "codedag: stored plan %s set aside: %s; planning again", self.results.plan_path, reason
        )
        drop_plan(self.results.plan_key)
        self.results.plan_path = ""
        self._tried = False
        self._replanned = f"planned again: the stored plan was set aside ({reason})"

    def _skip(self, reason: str) -> None:
        self.results.plan_status, self.results.plan_reason = "skipped", reason
        log.warning(
            "codedag: planning skipped for the DataLoader over %s: %s; the script runs unmodified",
            self.results.dataset,
            reason,
        )

    # ------------------------------------------------------------------ the end
    @gc_paused()
    def close(self) -> AcceleratedRun:
        """Seal an open epoch, restore the plan's patches and return the results (idempotent)."""
        with self._lock:
            if self._open is not None:
                timed, self._open = self._open, None
                self._tried = True  # the script is over: no planning now
                self._epoch_ended(timed, complete=False)
            self._tried = True
            if self._mailbox is not None:
                self._mailbox.post(None)
                self._mailbox.close()
            if self._import_draws:
                stop_replaying()
            if self.migrator is not None:
                migrator, self.migrator = self.migrator, None
                _forget_applied(migrator)
                given_up = _given_up(migrator)
                try:
                    migrator.restore()
                finally:
                    self.results.cache = cache_figures(migrator.get_stats().get("cache") or {})
                if given_up:
                    self._forget_given_up(given_up)
            return self.results

    def _forget_given_up(self, chains: frozenset[str]) -> None:
        """Keep the stored plan from caching the prefix ``chains`` a process of this run gave up
        (flagged in the store: a later run would patch and key their calls for nothing, and a
        plan left with nothing to apply then imports nothing), and say so in the summary."""
        plan = self.plan
        if plan is None or plan.cache is None:
            return
        reason = (
            "given up at run time: it did not pay (a warning of the run that gave it up says "
            "why); planning again (codedag run --replan, accelerate(replan=True)) weighs it again"
        )
        rows = [
            c.model_copy(update={"cached": False, "reason": reason}) if c.id in chains else c
            for c in plan.cache.chains
        ]
        plan = plan.model_copy(update={"cache": plan.cache.model_copy(update={"chains": rows})})
        self.plan = plan
        self.results.moved, self.results.kept = decisions(plan)
        if not self.settings.store_plans or not self.results.plan_key or self._inputs is None:
            return
        from codedag.integrations.plan_store import IdlePlan, save_plan

        held = IdlePlan(self.results.moved, self.results.kept) if places_nothing(plan) else None
        save_plan(self.results.plan_key, plan.to_dict(), self._inputs, held)


def _discard(_samples: Any) -> None:
    return None


def _given_up(migrator: Any) -> frozenset[str]:
    """The prefix chains a process of this run gave up (the store's flags: workers' too),
    read before the migrator closes its store."""
    cache = migrator.cache
    if not cache.active:
        return frozenset()
    try:
        cache.session.writer.flush()  # the values queued judged first (restoring waits for them)
        return frozenset(c.id for c in cache.chains if cache.session.unpaid(c))
    except Exception as error:  # a store that cannot be read: the plan is kept as it is
        log.debug("the prefix cache's flags were not read: %s", error)
        return frozenset()


def _batches_handed(inner: Any) -> int:
    """Batches torch's iterator ``inner`` handed its workers and the script has not received:
    fetched, or about to be, by workers that may not have the plan yet (0 when it keeps no
    count)."""
    sent, received = getattr(inner, "_send_idx", None), getattr(inner, "_rcvd_idx", None)
    if isinstance(sent, int) and isinstance(received, int):
        return max(0, sent - received)
    return 0


def _record_first_indices(inner: Any) -> list[Any]:
    """A list that receives the indices of ``inner``'s first batch when it is fetched: torch's
    iterator asks ``_next_index()`` (its batch sampler's next) before each fetch, and an
    instance attribute stands in for it once. Empty for an iterator without it, or an iterable
    dataset's (its indices are placeholders)."""
    from torch.utils.data import IterableDataset

    found: list[Any] = []
    original = getattr(inner, "_next_index", None)
    if original is None or isinstance(getattr(inner, "_dataset", None), IterableDataset):
        return found

    def _next_index() -> Any:
        try:
            index = original()
        finally:
            with contextlib.suppress(AttributeError):
                del inner._next_index
        found.append(list(index) if isinstance(index, list) else index)  # a sampler may reuse it
        return index

    with contextlib.suppress(AttributeError, TypeError):  # one that takes no attributes: none
        inner._next_index = _next_index
    return found


def _applied(plan: MigrationPlan, first_epoch: FirstEpoch) -> Any:
    from codedag.migrate.api import PipelineMigrator
    from codedag.migrate.cache.runtime import CacheSettings
    from codedag.plan.cache import first_epoch_share

    share = first_epoch_share(first_epoch)
    migrator = PipelineMigrator(plan, cache=CacheSettings(store_share=share))
    migrator.apply()
    return migrator


def places_nothing(plan: MigrationPlan) -> bool:
    """Whether ``plan`` places no call, runs no chain batched, caches none, starts no lookup
    table and sets no loader: applying it would change nothing, so no migrator is made (its
    import and set-up cost a run a tenth of a second)."""
    return (
        not plan.context_device_map
        and not any(call.migrate for call in plan.calls)
        and not any(chain.in_use for chain in plan.batched.chains)
        and (plan.cache is None or not plan.cache.cached_chains)
        and (plan.tables is None or not plan.tables.planned)
        and plan.loader is None
    )


def changes_nothing(migrator: Any) -> bool:
    """Whether an applied ``PipelineMigrator`` replaced no function and runs no batched chain,
    prefix cache, lookup table or loader setting."""
    if migrator.patched_functions():
        return False
    stats = migrator.get_stats()
    sections = ("batched", "cache", "tables")
    return stats["loader"] is None and not any(stats[k].get("enabled") for k in sections)


def decisions(plan: MigrationPlan) -> tuple[list[Decision], list[Decision]]:
    """What the plan moves and what it keeps where it was, one row per function or chain."""
    moved: dict[tuple[str, str], Decision] = {}
    kept: dict[tuple[str, str], Decision] = {}
    for call in plan.calls:
        row = Decision(what=call.function, section="calls", where=call.device, reason=call.reason)
        (moved if call.migrate else kept).setdefault((call.function, "calls"), row)
    for chain in plan.batched.chains:
        name = folded_path(chain.steps or [chain.id])
        row = Decision(
            what=name, section="batched", where=plan.batched.device or "", reason=chain.reason
        )
        (moved if chain.batched else kept).setdefault((name, "batched"), row)
    cache = plan.cache
    for cached in cache.chains if cache is not None else []:
        name = folded_path(cached.steps or [cached.id])
        row = Decision(what=name, section="cache", where="prefix cache", reason=cached.reason)
        (moved if cached.cached else kept).setdefault((name, "cache"), row)
    if cache is not None and not cache.chains:  # no chain to weigh: say why, once per source
        unread = [(s.function, s.reason) for s in cache.skipped]
        unread = unread or ([("traced samples", cache.note)] if cache.note else [])
        for what, reason in unread:
            row = Decision(what=what, section="cache", where="prefix cache", reason=reason)
            kept.setdefault((what, "cache"), row)
    for run in plan.tables.planned if plan.tables is not None else []:
        name = " -> ".join([run.producer, *run.calls])
        reason = (
            f"{len(run.calls)} element-wise call(s) on {run.producer}'s uint8 array as one "
            f"table lookup ({run.traced_ns / 1e6:.3g} ms traced per sample)"
        )
        row = Decision(what=name, section="tables", where="lookup table", reason=reason)
        moved.setdefault((name, "tables"), row)
    return list(moved.values()), list(kept.values())


def cache_figures(stats: dict[str, Any]) -> dict[str, Any]:
    """The prefix cache's counters a summary shows (``get_stats()["cache"]``)."""
    if not stats.get("enabled"):
        return {"enabled": False}
    keys: tuple[str, ...] = ("hits", "stored", "not_stored_later", "not_stored_changed")
    keys += ("hit_rate", "hit_bytes")
    keys += ("bytes", "misses", "diverged", "problems")
    return {"enabled": True, **{k: stats[k] for k in keys if k in stats}}
