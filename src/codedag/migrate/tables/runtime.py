"""TablesRuntime: a plan's ``tables`` section applied to the process, and what it counts.

While the plan is applied, inside a DataLoader fetch and only when called from the traced
function, a planned *producer* returns its uint8 array as a :class:`~.run_values.RunArray`
(``np.asarray(image, dtype=D)``, a conversion, returns the cast as the run's first value). Its
layers replace:

* the producers;
* the plan's *guards*: the samples' functions of libraries that take arrays only (cv2, torch,
  PIL: they ignore ``__array__``), which compute a run value they receive;
* ``_MapDatasetFetcher.fetch``: a batch whose code fails while run values exist in it (a function
  the trace did not see took one) runs again without tables, from the random state it started
  with; after :data:`GIVE_UP_AFTER` such batches in a row the process starts no more runs.

:class:`codedag.migrate.dispatch.Dispatch` installs them, nested with the other parts' layers
where they replace the same function.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import codedag.migrate.random_states as random_states
import codedag.migrate.tables.lookup as lookup
from codedag.migrate.admitted import admitted_runs
from codedag.migrate.dispatch import FETCH
from codedag.migrate.patched_runtime import PatchedRuntime
from codedag.migrate.stats import TablesStats
from codedag.migrate.tables.run_values import (
    COUNTS,
    RunArray,
    active,
    computed,
    computed_kwargs,
    count_error,
    counts,
    holds_run_value,
    runs_started,
    start_run,
    state,
)
from codedag.patching import like_original
from codedag.plan.context import frame_name

log = logging.getLogger(__name__)

GIVE_UP_AFTER = 3
"""Failing batches in a row after which a process starts no more runs."""
FIELDS = COUNTS
"""Counters of :meth:`TablesRuntime.stats`, per process."""
CONVERSIONS = frozenset({"numpy.asarray", "numpy.array"})
"""Producers whose ``dtype=`` is a cast of the uint8 array they make: the run's first call."""


@dataclass(frozen=True)
class RunSpec:
    """Where runs start: a producer function called from one of ``callers`` (any: empty)."""

    producer: str
    callers: tuple[str, ...] = ()


class TablesRuntime(PatchedRuntime):
    """The ``tables`` section of a plan, applied (see the module docstring).

    Args:
        runs: where runs start.
        guards: functions that take arrays only and compute a run value they receive.
    """

    section = "tables"

    def __init__(self, runs: list[RunSpec], guards: list[str] | None = None) -> None:
        super().__init__()
        runs, admitted = admitted_runs(runs, guards or ())  # before anything is imported
        self.runs = runs
        self.guards = sorted(set(admitted) - {r.producer for r in runs})
        self.failures = 0
        self._baseline: dict[str, int] = {}
        # what the tables of workers started afresh counted (set by the migrator), and, in such
        # a worker, what it does after each batch (report its counts)
        self.afresh_counts: Callable[[], dict[str, int]] = dict
        self.after_fetch: Callable[[], None] | None = None
        callers: dict[str, set[str]] = {}
        for run in runs:
            callers.setdefault(run.producer, set()).update(run.callers or ("",))
        self._callers = {name: frozenset(found) for name, found in callers.items()}

    @property
    def active(self) -> bool:
        """Whether the plan names any producer."""
        return bool(self.runs)

    def functions(self) -> list[str]:
        """The producers and the guards."""
        return sorted(set(self._callers) | set(self.guards)) if self.active else []

    def hooks(self) -> list[str]:
        """The fetch (a batch that fails with run values runs again without them)."""
        return [FETCH] if self.active else []

    def before_patching(self) -> None:
        """Count from here: what earlier plans in this process counted is not this one's; the
        tables' gatherer imported here, before workers fork (:func:`.lookup.prepare`)."""
        self._baseline = counts()
        lookup.prepare()

    def values(self) -> dict[str, int]:
        """This process's counters since the plan was applied (a forked worker inherits the
        baseline with the counters)."""
        return {k: v - self._baseline.get(k, 0) for k, v in counts().items()}

    def worker_stats(self) -> Any:
        """The tables' counters of forked workers."""
        from codedag.migrate.workerstats import WorkerStats

        return WorkerStats(["tables"], lambda _name: self.values(), FIELDS)

    def layer(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        """The replacement of ``name`` calling ``original`` (``original`` itself where the
        plan does not patch ``name``)."""
        if not self.active:
            return original
        if name == FETCH:
            return self._fetch(original)
        if name in self._callers:
            return _producer(name, original, self._callers[name])
        if name in self.guards:
            return _guard(original)
        return original

    def _fetch(self, original: Callable[..., Any]) -> Callable[..., Any]:
        runtime = self

        def fetch(fetcher: Any, index: Any) -> Any:
            if state.suspended or runtime.failures >= GIVE_UP_AFTER:
                return original(fetcher, index)
            states, taken = random_states.hold()
            runs = runs_started()
            state.fetching += 1
            try:
                batch = original(fetcher, index)
            except Exception as error:
                if runs_started() == runs:
                    raise
                runtime.failures += 1
                count_error()
                log.info(
                    "a batch failed with lookup-table runs (%s: %s); it runs again without them",
                    type(error).__name__,
                    str(error).splitlines()[0][:120] if str(error) else "",
                )
                random_states.restore(states)
                state.suspended += 1
                try:
                    return original(fetcher, index)
                finally:
                    state.suspended -= 1
            finally:
                state.fetching -= 1
                random_states.release(taken)
                if runtime.workers is not None:
                    runtime.workers.publish()
                if runtime.after_fetch is not None:
                    runtime.after_fetch()
            runtime.failures = 0
            return batch

        return fetch

    def stats(self) -> TablesStats:
        """``get_stats()["tables"]``: runs started, computed through a table or by their calls,
        trials and mismatches, failed batches (all processes)."""
        local = self.values()
        remote = self.workers.totals("tables") if self.workers is not None else {}
        afresh = self.afresh_counts()
        merged = {k: local.get(k, 0) + remote.get(k, 0) + afresh.get(k, 0) for k in FIELDS}
        return TablesStats.model_validate(
            {
                "enabled": self.active,
                "producers": sorted({r.producer for r in self.runs}),
                **merged,
            }
        )


def _producer(
    name: str, original: Callable[..., Any], callers: frozenset[str]
) -> Callable[..., Any]:
    anywhere = "" in callers
    conversion = name in CONVERSIONS

    def producer(*args: Any, **kwargs: Any) -> Any:
        if not active():
            return original(*args, **kwargs)
        if holds_run_value(args, kwargs):
            args, kwargs = computed(args), computed_kwargs(kwargs)
        if not anywhere and not _called_from(sys._getframe(1), callers):
            return original(*args, **kwargs)
        if conversion:
            converted = _converted(original, args, kwargs)
            if converted is not None:
                return converted
        out = original(*args, **kwargs)
        if lookup.starts(out):
            return out.view(RunArray)
        return out

    return like_original(producer, original)


LAYERS = 3
"""Frames looked through for the caller: another runtime's replacement may call this one."""


def _called_from(frame: Any, callers: frozenset[str]) -> bool:
    for _ in range(LAYERS):
        if frame is None:
            return False
        if frame_name(frame) in callers:
            return True
        frame = frame.f_back
    return False


def _converted(original: Callable[..., Any], args: tuple, kwargs: dict[str, Any]) -> Any:
    """``np.asarray(image, dtype=D)`` (or ``D`` passed second) as ``np.asarray(image).astype(D)``,
    the cast starting a run, where the array is uint8 (a PIL image's): the same values, cast the
    same way; once the array is made and no run starts, the conversion from it (not made
    twice). None where the call is not such a conversion (it runs as written)."""
    if len(args) == 1 and set(kwargs) == {"dtype"}:
        dtype = kwargs["dtype"]
    elif len(args) == 2 and not kwargs:
        dtype = args[1]
    else:
        return None
    if dtype is None or np.dtype(dtype) == np.uint8:
        return None
    base = original(args[0])
    if lookup.starts(base):
        array = base.view(RunArray)
        # an array given in may be the same memory user code writes into later: the run copies it
        aliased = isinstance(args[0], np.ndarray)
        call = (array, np.dtype(dtype))
        started = start_run(array, "numpy.ndarray.astype", np.ndarray.astype, call, {}, aliased)
        if started is not None:
            return started
    return original(base, *args[1:], **kwargs)


def _guard(original: Callable[..., Any]) -> Callable[..., Any]:
    def guard(*args: Any, **kwargs: Any) -> Any:
        if holds_run_value(args, kwargs):
            return original(*computed(args), **computed_kwargs(kwargs))
        return original(*args, **kwargs)

    return like_original(guard, original)
