"""DataLoader workers that inherit nothing apply the plan themselves.

A forked DataLoader worker inherits the functions the plan replaced in the process that applied
it. A worker started with ``spawn`` or ``forkserver`` (the default start method on macOS and
Windows, and on Linux from Python 3.14) imports the program afresh and would run the libraries'
own functions: no cached prefix, no table, no placed call. So while a plan is applied,
``DataLoader._get_iterator`` (where a loader starts its workers, once per epoch, or once for
persistent workers) is replaced: a loader whose workers start that way hands them, as their
``worker_init_fn``, a :class:`PlanInWorker` that carries the plan and the migrator's settings.
In the worker it applies the plan (once per process) and then calls the program's own
``worker_init_fn``, which still runs with the seeds torch gave the worker. The loader's own
attribute is put back as soon as the workers have started.

What such a worker applies is what a forked one inherits at its start: the same plan sections
with the same settings, the same device rules (a worker never initializes CUDA), the prefix
cache's store and generation (:attr:`~codedag.migrate.cache.runtime.CacheSettings.run`). What
differs:

* applying costs each worker the import of codedag's run time and the registry (about half a
  second, beside the seconds a spawned worker takes to import torch), so workers started again
  for every epoch receive the plan only where it saves each of them more in its epoch than that
  (:data:`APPLY_S`, against the prefix cache's expected saving per sample times the worker's
  share of the data set); otherwise one warning says what is forgone;
* what the worker's prefix cache, lookup tables and placed calls count reaches the process
  that started it through a file rewritten after each batch and at the worker's exit
  (:class:`CountsFolder`);
* batched chains run per sample: whether a worker defers its values to a batched run is a
  switch the process running the batches shares with forked workers only, so once a loader
  starts workers afresh, batched execution stops, with one warning.

A plan the worker cannot apply leaves it running the libraries' own functions, with one warning.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import multiprocessing
import multiprocessing.util
import os
import pickle
import shutil
import tempfile
import weakref
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codedag.errors import ConfigError
from codedag.migrate.dispatch import ITERATOR
from codedag.migrate.patched_runtime import PatchedRuntime
from codedag.migrate.workerstats import COUNT_FIELDS
from codedag.util.io import read_json

log = logging.getLogger(__name__)

HOOK = ITERATOR
"""Where a DataLoader starts its workers."""


@dataclass(frozen=True)
class WorkerPlan:
    """What a worker needs to apply the plan as the process that started it did.

    Attributes:
        plan: the plan (its ``loader`` section left out: a worker makes no DataLoader).
        default_device: the migrator's default device.
        guard: the migrator's guard settings (None: off).
        batched: its batched settings.
        cache: its prefix cache settings, with the store's folder, budgets and generation
            resolved.
        tables: whether the plan's tables apply.
        migrator_type: the class that applied it (:class:`~codedag.migrate.PipelineMigrator`,
            sent by name).
        saved_ns_per_sample: what the plan expects to save per sample from the second epoch on
            (its prefix cache's figure); None where it says nothing (no cache).
        counts_folder: where the worker leaves what its prefix cache, lookup tables and
            placed calls counted (:class:`CountsFolder`; None: nowhere).
    """

    plan: Any
    default_device: str
    guard: Any
    batched: Any
    cache: Any
    tables: bool
    migrator_type: Any = None
    saved_ns_per_sample: int | None = None
    counts_folder: str | None = None

    def migrator(self) -> Any:
        """A migrator of this plan, not applied (its batched chains run per sample)."""
        migrator = self.migrator_type(
            self.plan,
            self.default_device,
            guard=self.guard if self.guard is not None else False,
            batched=self.batched,
            cache=self.cache,
            tables=self.tables,
        )
        migrator.batched.run_per_sample()
        return migrator


_APPLIED: list[Any] = []
"""The migrator applied in this worker process (kept: its patches live as long as it does)."""


class PlanInWorker:
    """A DataLoader ``worker_init_fn`` that applies a plan in the worker, then calls the
    program's own (picklable: a spawned worker receives it pickled).

    Args:
        plan: what to apply.
        own: the program's ``worker_init_fn`` (None: it had none).
    """

    def __init__(self, plan: WorkerPlan, own: Callable[[int], Any] | None) -> None:
        self.plan = plan
        self.own = own

    def __call__(self, worker_id: int) -> None:
        apply_in_worker(self.plan)
        if self.own is not None:
            self.own(worker_id)


def apply_in_worker(plan: WorkerPlan) -> None:
    """Apply ``plan`` in this worker process, once; a failure leaves the libraries' own
    functions, with one warning. The process that started the worker already said what applying
    the plan warns of: those warnings are not repeated here."""
    if _APPLIED:
        return
    codedag_log = logging.getLogger("codedag")
    level = codedag_log.level
    codedag_log.setLevel(logging.ERROR)
    try:
        migrator = plan.migrator()
        migrator.apply()
    except Exception as error:  # the worker goes on as it would without codedag
        codedag_log.setLevel(level)
        log.warning(
            "codedag: a DataLoader worker could not apply the plan (%s: %s); it runs the "
            "libraries' own functions",
            type(error).__name__,
            error,
        )
        _APPLIED.append(None)
        return
    finally:
        codedag_log.setLevel(level)
    _APPLIED.append(migrator)
    if plan.counts_folder is not None:
        _publish_counts(Path(plan.counts_folder), migrator)


_EXIT_PRIORITY = 5  # multiprocessing finalizers: after the writer's (20) stored its queue


def _publish_counts(folder: Path, migrator: Any) -> None:
    """Rewrite this worker's counts file in ``folder`` after each batch it fetches (when they
    changed; a plan without a prefix cache or lookup tables has no hook after a batch) and at its
    exit: what the process that started it reads is as of the worker's last batch, even while
    the worker lives on (a persistent one). The file holds the prefix cache's counts, the lookup
    tables' prefixed with :data:`TABLES` and each placed function's with :data:`CALLS`."""
    cache, tables = migrator.cache, migrator.tables
    path = folder / f"{os.getpid()}.json"
    last: list[dict[str, int]] = [{}]

    def publish() -> None:
        now = cache.session.values() if cache.active else {}
        if tables.active:
            now.update({TABLES + name: value for name, value in tables.values().items()})
        for function, counts in migrator.call_counts().items():
            now.update({f"{CALLS}{function}.{field}": n for field, n in counts.items() if n})
        if now != last[0]:
            with contextlib.suppress(OSError, TypeError, ValueError):  # counts are a courtesy
                _write_counts(path, now)
                last[0] = now

    for part in (cache, tables):
        if part.active:
            part.after_fetch = publish
    multiprocessing.util.Finalize(None, publish, exitpriority=_EXIT_PRIORITY)


TABLES = "tables."
"""The prefix of the lookup tables' counts in a worker's counts file."""
CALLS = "calls."
"""The prefix of the placed functions' counts (``calls.<function>.<field>``)."""


def _write_counts(path: Path, values: Mapping[str, int]) -> None:
    """Write ``values`` to ``path`` whole (:func:`write_private`). Not
    :func:`~codedag.util.io.atomic_write_json`, which makes the folder and syncs the file to
    disk: this runs after every batch, for a reader that is alive."""
    write_private(path, json.dumps(dict(values)).encode("utf-8"))


def write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` whole (a draft, 0600, renamed over it) in a private folder of
    this run's, never through a link, and never into a folder made again: a folder removed
    meanwhile fails the write (``OSError``)."""
    draft = path.with_name(f".{path.stem}.draft")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    with os.fdopen(os.open(draft, flags, 0o600), "wb") as handle:
        handle.write(data)
    os.replace(draft, path)


class CountsFolder:
    """A private folder (0700, made by :func:`tempfile.mkdtemp`) where workers started afresh
    leave what their prefix cache, lookup tables and placed calls counted, one JSON file each,
    rewritten whole: the process that started them sums the files (read with a size cap; a file
    that is not a flat map of counts is passed over). A program that exits with the plan still
    applied removes the folder at its exit."""

    MAX_BYTES = 1 << 16

    def __init__(self, earlier: Mapping[str, int] | None = None) -> None:
        self.path = Path(tempfile.mkdtemp(prefix="codedag-worker-counts-"))
        self._earlier = Counter(earlier or {})  # an earlier application's sums
        self._final: dict[str, int] | None = None
        self._removal = weakref.finalize(self, shutil.rmtree, self.path, ignore_errors=True)

    def totals(self) -> dict[str, int]:
        """Every worker's counts, summed (as of its last file)."""
        if self._final is not None:
            return self._final
        out = Counter(self._earlier)
        for file in sorted(self.path.glob("*.json")):
            try:
                data = read_json(file, "worker counts", self.MAX_BYTES, expect=dict)
            except (ConfigError, OSError):
                continue
            for name, value in data.items():
                if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                    out[name] += value
        return dict(out)

    @property
    def closed(self) -> bool:
        """Whether the folder was removed (its sums kept)."""
        return self._final is not None

    def close(self) -> None:
        """Keep the sums and remove the folder."""
        self._final = self.totals()
        self._removal()


APPLY_S = 0.5
"""What receiving and applying a plan costs a worker started afresh (the import of codedag's run
time, the registry and the plan: 0.4-0.65 s measured on a 2-CPU machine)."""


def forgone_gain_s(loader: Any, plan: WorkerPlan) -> float | None:
    """What a worker started afresh for one epoch would save with ``plan``, where that is less
    than applying it costs (:data:`APPLY_S`); None where it is worth sending: persistent workers
    (they pay once), a plan that says nothing of its saving, a data set of unknown length."""
    if getattr(loader, "persistent_workers", False) or plan.saved_ns_per_sample is None:
        return None
    try:
        samples = len(loader.dataset) / max(1, int(loader.num_workers))
    except TypeError:  # an iterable data set without a length
        return None
    gain_s = plan.saved_ns_per_sample * samples / 1e9
    return gain_s if gain_s < APPLY_S else None


def start_method(loader: Any) -> str:
    """How ``loader`` starts its workers (``fork``, ``spawn``, ``forkserver``)."""
    context = getattr(loader, "multiprocessing_context", None)
    if context is not None:
        return str(context.get_start_method())
    method = multiprocessing.get_start_method(allow_none=True)  # read without fixing it
    return str(method or multiprocessing.get_all_start_methods()[0])


class SpawnedWorkers(PatchedRuntime):
    """The run-time part that hands the plan to workers that inherit nothing.

    Args:
        plan: what such a worker applies, made when a loader starts them (None: the plan
            gives workers nothing to do).
        active: whether the plan gives workers anything to do (asked when it is applied).
    """

    section = "workers"

    def __init__(
        self, plan: Callable[[], WorkerPlan | None], active: Callable[[], bool] = lambda: True
    ) -> None:
        super().__init__()
        self._plan = plan
        self._active = active
        self._shipped: tuple[WorkerPlan | None] | None = None  # made once per apply
        self.counted: CountsFolder | None = None  # what such workers' caches counted
        self.handed = 0  # loaders whose started workers received the plan
        self.forgone = 0  # loaders whose workers would have spent more on it than it saves

    @property
    def active(self) -> bool:
        """Whether the plan gives workers anything to do."""
        return self._active()

    def functions(self) -> list[str]:
        """No library function."""
        return []

    def hooks(self) -> list[str]:
        """Where a DataLoader starts its workers."""
        return [HOOK]

    def after_patching(self, failed: Mapping[str, str]) -> None:
        """Mark applied (such workers report through files, :class:`CountsFolder`)."""
        self.failed = dict(failed)
        self._shipped = None
        self._applied = True

    def _totals(self) -> dict[str, int]:
        """Every worker's counts file, summed (nothing before a plan was sent)."""
        return self.counted.totals() if self.counted is not None else {}

    def cache_counts(self) -> dict[str, int]:
        """What the prefix caches of workers started afresh counted, summed."""
        return {k: n for k, n in self._totals().items() if not k.startswith((TABLES, CALLS))}

    def call_counts(self) -> dict[str, dict[str, int]]:
        """What the placed functions of workers started afresh counted, summed, per function
        (:data:`~codedag.migrate.workerstats.COUNT_FIELDS`)."""
        out: dict[str, dict[str, int]] = {}
        for key, n in self._totals().items():
            function, _, field = key[len(CALLS) :].rpartition(".")
            if key.startswith(CALLS) and function and field in COUNT_FIELDS:
                out.setdefault(function, {})[field] = n
        return out

    def tables_counts(self) -> dict[str, int]:
        """What the lookup tables of workers started afresh counted, summed."""
        return {k[len(TABLES) :]: n for k, n in self._totals().items() if k.startswith(TABLES)}

    def after_restore(self) -> None:
        """Keep the workers' counts and remove their folder."""
        if self.counted is not None:
            self.counted.close()
        super().after_restore()

    def shipped(self) -> WorkerPlan | None:
        """What workers started afresh receive, made once while applied; None when the plan
        gives them nothing, or cannot travel to them (one warning says why)."""
        if self._shipped is None:
            self._shipped = (self.travelling(self._plan()),)
        return self._shipped[0]

    def travelling(self, plan: WorkerPlan | None) -> WorkerPlan | None:
        """``plan`` as it travels to a worker: with this part's counts folder, or None where it
        cannot be pickled (one warning says why)."""
        if plan is None:
            return None
        try:
            pickle.dumps(plan)
        except Exception as error:  # a setting of the program's that cannot travel
            log.warning(
                "codedag: DataLoader workers that did not fork from this process after the "
                "plan was applied run the libraries' own functions: the plan's settings cannot "
                "be sent to them (%s: %s)",
                type(error).__name__,
                error,
            )
            return None
        if self.counted is None or self.counted.closed:  # a folder only for a plan that travels
            earlier = self.counted.totals() if self.counted is not None else None
            self.counted = CountsFolder(earlier)
        return dataclasses.replace(plan, counts_folder=str(self.counted.path))

    def _not_worth_it(self, loader: Any, plan: WorkerPlan) -> bool:
        """Whether ``loader``'s workers would spend more applying ``plan`` than it saves
        them in their epoch (said once, with the gain forgone)."""
        gain_s = forgone_gain_s(loader, plan)
        if gain_s is None:
            return False
        if not self.forgone:
            log.warning(
                "codedag: the DataLoader's workers, started with %r for each epoch, run the "
                "libraries' own functions: the plan would save each about %.2f s of its epoch, "
                "less than the %.1f s applying it costs a worker started afresh "
                "(persistent_workers=True lets them apply it once)",
                start_method(loader),
                gain_s,
                APPLY_S,
            )
        self.forgone += 1
        return True

    def layer(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        """``_get_iterator`` handing a :class:`PlanInWorker` to workers started afresh."""

        def _get_iterator(loader: Any) -> Any:
            if not getattr(loader, "num_workers", 0) or start_method(loader) == "fork":
                return original(loader)
            plan = self.shipped()
            if plan is None or self._not_worth_it(loader, plan):
                return original(loader)
            own = loader.worker_init_fn
            loader.worker_init_fn = PlanInWorker(plan, own)
            self.handed += 1
            try:
                return original(loader)
            finally:
                loader.worker_init_fn = own

        return _get_iterator
