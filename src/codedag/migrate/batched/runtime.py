"""BatchedRuntime: applies a plan's batched chains to the process and counts what they do.

Its layers (installed by :class:`codedag.migrate.dispatch.Dispatch`, innermost where other parts
replace the same function) replace:

* the chains' library functions and the array conversions (:mod:`.wrappers`);
* ``_MapDatasetFetcher.fetch`` (:mod:`.fetch`): samples are made with deferral, collated into
  records;
* ``_BaseDataLoaderIter.__next__`` (:mod:`.delivery`): records run in the main process.

Counters from DataLoader workers (forked after :meth:`BatchedRuntime.apply`) reach
:meth:`BatchedRuntime.stats` through :class:`codedag.migrate.workerstats.WorkerStats`. CUDA is
never touched in a worker: everything a worker does (recording, forcing, packing) is CPU code,
and the executor runs only where ``__next__`` runs.
"""

from __future__ import annotations

import logging
import mmap
import os
import threading
import time
from collections import Counter
from collections.abc import Mapping
from typing import Any

import torch

import codedag.backends.batched.capture as capture
import codedag.migrate.batched.fetch as fetch_module
from codedag.backends.batched.collate import BatchRecord
from codedag.backends.batched.delivery import (
    Undelivered,
    has_records,
    make_next,
    replace_records,
)
from codedag.backends.batched.executor import BatchExecutor, Outcome
from codedag.backends.batched.forcing import FORCED, REASONS, install_fork_hook
from codedag.backends.batched.transfer import DeviceIO, Pending, streams_for
from codedag.backends.batched.watch import watch
from codedag.backends.batched.wrappers import CONVERSIONS, EntryMatcher, chain_function, conversion
from codedag.migrate.batched.check import RunCheck
from codedag.migrate.batched.deliver import DeliveryChoice
from codedag.migrate.batched.settings import BatchedSettings, ChainSet
from codedag.migrate.dispatch import FETCH, NEXT
from codedag.migrate.patched_runtime import PatchedRuntime
from codedag.migrate.stats import BatchedStats
from codedag.migrate.workerstats import WorkerStats

log = logging.getLogger(__name__)

_WORKER_FIELDS = (
    "fetches",
    "fetch_ns",
    "records",
    "retried",
    "stopped",
    *(f"forced_{r}" for r in REASONS),
)


class _Switch:
    """Two bytes shared with forked workers: deferring is on (until stopped, for good), and
    paused (a per-sample block of the run-time check)."""

    def __init__(self) -> None:
        self._map = mmap.mmap(-1, 2)
        self._map[0] = 1
        self._map[1] = 0

    @property
    def on(self) -> bool:
        return bool(self._map[0])

    @property
    def deferring(self) -> bool:
        return bool(self._map[0]) and not self._map[1]

    def off(self) -> None:
        self._map[0] = 0

    def pause(self, paused: bool) -> None:
        self._map[1] = int(paused)


class BatchedRuntime(PatchedRuntime):
    """Batched execution of a plan's chains (see the module docstring).

    Args:
        chains: the chains placed for batched execution.
        device: where batches run (the main process's device for them).
        settings: delivery, verification and the rest.
        other_keys: function -> traced context keys of its calls the chains do not start at
            (so those calls keep running eagerly).
    """

    section = "batched"

    def __init__(
        self,
        chains: ChainSet,
        device: str,
        settings: BatchedSettings | None = None,
        other_keys: dict[str, list[str]] | None = None,
    ) -> None:
        self.chains = chains
        self.settings = settings or BatchedSettings()
        self.device = torch.device(device)
        self.io = DeviceIO(self.device, simulate=self.settings.simulate_transfers)
        graphs = capture.for_device(
            self.device, self.settings.capture, self.settings.capture_graphs
        )
        self.executor = BatchExecutor(self.device, self.io, capture=graphs)
        self.streams = streams_for(self.device)
        self.delivery = DeliveryChoice(self.settings.deliver, self.device, self.io.moves)
        self.other_keys = dict(other_keys or {})
        super().__init__()
        self._entries: set[str] = set()
        self._switch = _Switch()
        # the plan's own choice is checked in the loader; "always" is the user's
        self.check = RunCheck() if self.settings.check and chains.mode == "auto" else None
        self._owner = os.getpid()
        self._lock = threading.Lock()
        self.batches = 0
        self.samples = 0
        self.ready_samples = 0
        self.groups = 0
        self.backend_calls = 0
        self.main_ns = 0
        self.verified = 0
        self.mismatches: list[str] = []
        self.max_abs_diff = 0.0
        self._remote_sites: Counter[str] = Counter()
        self._calls_per_batch: list[int] = []

    # -- life cycle ---------------------------------------------------------------------------
    @property
    def active(self) -> bool:
        """Whether there is anything to run batched."""
        return bool(self.chains.chains)

    def functions(self) -> list[str]:
        """The chains' library functions and the array conversions."""
        if not self.active:
            return []
        return sorted({*self.chains.functions, *CONVERSIONS})

    def hooks(self) -> list[str]:
        """The fetch (samples made with deferral) and ``__next__`` (records run)."""
        return [FETCH, NEXT] if self.active else []

    def before_patching(self) -> None:
        """Reset the counters and build the ops, so forked workers inherit them."""
        install_fork_hook()
        FORCED.reset()
        fetch_module.COUNTERS.reset()
        FORCED.give_up_after = self.settings.give_up_after
        self._entries = set(self.chains.entry_functions)
        _warm(self.chains.functions)

    def after_patching(self, failed: Mapping[str, str]) -> None:
        """Start counting."""
        super().after_patching(failed)
        log.info(
            "batched execution applied: %d chain(s) on %s, deliver=%s",
            len(self.chains.chains),
            self.device,
            self.settings.deliver,
        )

    def worker_stats(self) -> Any:
        """The batched counters of forked workers."""
        return WorkerStats(["batched"], self._local_counts, _WORKER_FIELDS)

    def layer(self, name: str, original: Any) -> Any:
        """The batched replacement of ``name`` calling ``original``."""
        if name == FETCH:
            return fetch_module.make_fetch(original, self._deferring)
        if name == NEXT:
            return make_next(original, self._launch, self._finish, self._has_work, self._ahead)
        if name in CONVERSIONS:
            return conversion(name, original)
        matcher = None
        if name in self._entries:
            matcher = EntryMatcher(
                name, self.chains.entries_of(name), self.other_keys.get(name, [])
            )
        return chain_function(name, original, matcher)

    def stop(self, reason: str) -> None:
        """Stop deferring, in this process and in workers forked from it (logged once)."""
        if self._switch.on:
            self._switch.off()
            log.warning("batched execution stops: %s", reason)

    def run_per_sample(self) -> None:
        """Never defer in this process: a DataLoader worker started afresh shares no switch
        with the process that runs the batches."""
        self._switch.off()

    # -- hooks ----------------------------------------------------------------------------------
    def _deferring(self) -> bool:
        return self._applied and self._switch.deferring

    def _has_work(self) -> bool:
        return self._applied

    def _ahead(self, iterator: object) -> int:
        if self.check is not None and self.check.checking and os.getpid() == self._owner:
            self.check.begin(iterator)
        if self.settings.ahead is not None:
            return self.settings.ahead
        workers = getattr(iterator, "_num_workers", 0)
        return 1 if self.device.type == "cuda" and workers > 0 else 0

    def _launch(self, batch: object) -> Pending:
        if os.getpid() != self._owner or not has_records(batch):
            return Pending(batch)
        pending = self.streams.launch(lambda: self._execute(batch))
        pending.batched = True
        return pending

    def _finish(self, pending: Pending) -> Any:
        result = self.streams.wait(pending)
        if pending.batched and os.getpid() == self._owner:
            result = self._deliver_late(result)
        check = self.check
        if check is not None and check.checking and os.getpid() == self._owner:
            check.deliver(pending.batched)
            if check.decided is False:
                self.stop(f"the run-time check: {check.reason}")
            if check.checking:
                self._switch.pause(not check.batched_now())
            else:
                self._switch.pause(False)
                log.info("batched execution, the run-time check: %s", check.reason)
        return result

    def _execute(self, batch: object) -> Any:
        started = time.perf_counter_ns()
        result = replace_records(batch, self._run_record)
        with self._lock:
            self.main_ns += time.perf_counter_ns() - started
        return result

    def _run_record(self, record: BatchRecord) -> Any:
        verify = self.verified < self.settings.verify
        outcome = self.executor.run(record, verify=verify)
        self._count(record, outcome)
        tensor = outcome.tensor
        if self.delivery.deciding:
            return Undelivered(tensor)  # decided when the batch is handed over
        if not self.delivery.on_device:
            tensor = self.io.download(tensor)
        return tensor

    def _deliver_late(self, batch: object) -> Any:
        """A batch run while ``deliver="auto"`` was deciding, delivered as decided now: on the
        device, or on the host (watched while still deciding)."""
        self.delivery.batch_finished()

        def deliver(value: Undelivered) -> Any:
            if self.delivery.on_device:
                self.streams.adopt(value.tensor)
                return value.tensor
            host = self.io.download(value.tensor)
            return watch(host, self.delivery.moved) if self.delivery.deciding else host

        return replace_records(batch, deliver, kind=Undelivered)

    def _count(self, record: BatchRecord, outcome: Outcome) -> None:
        with self._lock:
            self.batches += 1
            self.samples += record.deferred
            self.ready_samples += record.n - record.deferred
            self.groups += outcome.groups
            self.backend_calls += outcome.backend_calls
            self._calls_per_batch.append(outcome.backend_calls)
            del self._calls_per_batch[:-1000]
            if record.pid != os.getpid():
                self._remote_sites.update(record.sites)
            if outcome.failed:
                FORCED.forced("backend", "batched group failed", None, len(outcome.failed))
            if outcome.verified:
                self.verified += 1
                self.max_abs_diff = max(self.max_abs_diff, outcome.max_abs_diff)
        if outcome.mismatches:
            self.mismatches.extend(outcome.mismatches[:5])
            FORCED.forced("verify", outcome.mismatches[0][:100], None, record.deferred)
            self.stop(f"a batch differs from its CPU reference ({outcome.mismatches[0]})")

    # -- statistics -----------------------------------------------------------------------------
    @staticmethod
    def _local_counts(_name: str) -> dict[str, int]:
        return {
            **fetch_module.COUNTERS.values(),
            **FORCED.counts(),
            "stopped": len(FORCED.stopped),
        }

    def capture_stats(self) -> dict[str, Any]:
        """What graph capture did (:class:`codedag.backends.batched.capture.CaptureStats`, with
        ``state``: ``on``, ``stopped``, or ``off`` where nothing is captured: not CUDA, or
        ``BatchedSettings(capture=False)``) and the graphs held now."""
        graphs = self.executor.capture
        if graphs is None:
            return {"state": "off"}
        state = "on" if graphs.on else "stopped"
        return {"state": state, "graphs": graphs.graphs, **graphs.stats.as_dict()}

    def stats(self) -> BatchedStats:
        """``get_stats()["batched"]``: batches, samples, groups, backend calls, bytes, forced
        values by reason (and site), time in workers and in the main process."""
        local = self._local_counts("batched")
        remote = self.workers.totals("batched") if self.workers is not None else {}
        merged = {k: local.get(k, 0) + remote.get(k, 0) for k in _WORKER_FIELDS}
        forced = {r: merged[f"forced_{r}"] for r in REASONS if merged[f"forced_{r}"]}
        sites = Counter(FORCED.sites) + self._remote_sites
        calls = self._calls_per_batch
        return BatchedStats.model_validate(
            {
                "enabled": self.active,
                "deferring": self._switch.on,
                "device": str(self.device),
                "deliver": self.settings.deliver,
                "delivery": self.delivery.summary(),
                "chains": [c.id for c in self.chains.chains],
                "batches": self.batches,
                "samples": self.samples,
                "ready_samples": self.ready_samples,
                "groups": self.groups,
                "backend_calls": self.backend_calls,
                "backend_calls_per_batch_max": max(calls) if calls else 0,
                "h2d_bytes": self.io.h2d_bytes,
                "d2h_bytes": self.io.d2h_bytes,
                "forced": forced,
                "forced_sites": dict(sites.most_common(20)),
                "stopped_sites": sorted(FORCED.stopped),
                "stopped_sites_in_workers": remote.get("stopped", 0),
                "retried_samples": merged["retried"],
                "worker_ms": merged["fetch_ns"] / 1e6,
                "main_ms": self.main_ns / 1e6,
                "check": self.check.summary() if self.check is not None else {"state": "off"},
                "verify": {
                    "batches": self.verified,
                    "mismatches": list(self.mismatches),
                    "max_abs_diff": self.max_abs_diff,
                },
                "capture": self.capture_stats(),
            }
        )


def _warm(functions: list[str]) -> None:
    """Build the ops (and the registry behind them) now, so forked workers inherit them."""
    import codedag.backends.batched.ops as ops
    import codedag.backends.batched.views as views

    for name in functions:
        ops.library_op(name)
    for name in ("add", "subtract", "multiply", "divide"):
        ops.elementwise_op(f"numpy.{name}")
    for name in views.NUMPY_VIEWS:
        views.numpy_view(name)
