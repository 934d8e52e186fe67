"""Run-time guard: a placement stays only if, measured on this process's own calls, its backend
agrees with the original library and beats it in time.

A plan comes from measurements taken elsewhere (calibration on synthetic inputs, maybe another
device); the guard checks it on the real calls. For the first ``calls`` migrated calls of each
placed function (per process: a forked DataLoader worker checks again, on its own device), the
wrapper runs both the backend path and the original on the same arguments, in interleaved rounds
(backend first, then original first, ...), each timed by :mod:`codedag.measure` (on a CUDA device
between two synchronizations, so the time is the work's, not the launch's). It compares the two
results with the tolerance table (:func:`codedag.backends.tolerances.difference`: type, shape,
dtype, values) and returns the backend's result only when they match, else the original's.

Then it decides, once, by the rule of :func:`codedag.measure.statistic.verdict`: the placement is
**kept** when every compared result matched and the backend's saving (the original's median time
minus the backend's) exceeds both its spread (the half-width of its 95 % interval) and ``margin``
of the original's median; otherwise it is **switched off** (the original runs from then on) with
the reason, both medians and the spread. A slow first call is one sample of ``calls``: the medians
do not follow it. A measurement that other work disturbed says so in the reason. A result that
differs switches the function off at once: nothing is gained by checking further. Each decision
is one INFO log line and appears in the function's stats (``guard``).

The wrapper tests one attribute per call (:attr:`Guard.checking`); once decided, or when the
guard is disabled, a migrated call costs nothing more.
"""

from __future__ import annotations

import enum
import functools
import logging
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from codedag.backends.tolerances import difference
from codedag.devices.torch_devices import synchronize
from codedag.measure.clock import Stopwatch, no_sync
from codedag.measure.pair import PairResult, PairSamples, round_order

log = logging.getLogger(__name__)


class GuardState(str, enum.Enum):
    """Where a function's guard stands."""

    CHECKING = "checking"
    KEPT = "kept"
    SWITCHED_OFF = "switched_off"
    DISABLED = "disabled"


MAX_CALLS = 10_000
"""Checked calls per function at most: each runs twice, so more only doubles the run's work."""


@dataclass(frozen=True)
class GuardSettings:
    """How the guard checks placements.

    Args:
        calls: migrated calls per function and process that also run the original.
        margin: fraction of the original's median time the backend must save to be kept
            (0: it must beat the original beyond the spread; 0.1: also by at least 10 %).
        clock_ns: the clock (nanoseconds); tests inject a fake one.
        synchronize: ``synchronize(device)`` around a backend on a CUDA device; default
            :func:`codedag.devices.torch_devices.synchronize`.
    """

    calls: int = 8
    margin: float = 0.0
    clock_ns: Callable[[], int] = time.perf_counter_ns
    synchronize: Callable[[str], None] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.calls, int) or not 1 <= self.calls <= MAX_CALLS:
            raise ValueError(
                f"guard calls must be an integer >= 1 and <= {MAX_CALLS} (each runs the call "
                f"twice), got {self.calls!r}"
            )
        if not 0.0 <= self.margin < 1.0:
            raise ValueError(f"guard margin must be in [0, 1), got {self.margin!r}")


class Checked(NamedTuple):
    """One guarded call: the result to return and what happened."""

    result: Any
    from_backend: bool
    backend_error: Exception | None
    difference: str | None


# Integer codes of the states and reasons, for the shared counters of forked workers.
STATE_CODES = {
    GuardState.CHECKING: 1,
    GuardState.KEPT: 2,
    GuardState.SWITCHED_OFF: 3,
    GuardState.DISABLED: 4,
}
_STATES_BY_CODE = {code: state for state, code in STATE_CODES.items()}
FIELDS = (
    "guard_state",
    "guard_calls",
    "guard_mismatches",
    "guard_original_ns",
    "guard_backend_ns",
    "guard_slower",
)
"""What a worker reports of its guard (see :meth:`Guard.fields`)."""


class Guard:
    """The guard of one function in one process.

    Args:
        name: canonical function name (its tolerance entry).
        settings: the settings; ``None`` disables the guard.
        disabled_reason: why this function must not run twice per call (in-place arguments);
            the guard is then disabled.
        on_decision: called after each decision (the migrator publishes worker stats there).
    """

    __slots__ = (
        "_lock",
        "_samples",
        "_started",
        "calls",
        "checking",
        "disabled_reason",
        "inherited",
        "mismatches",
        "name",
        "on_decision",
        "reason",
        "settings",
        "state",
    )

    def __init__(
        self,
        name: str,
        settings: GuardSettings | None,
        *,
        disabled_reason: str | None = None,
        on_decision: Callable[[Guard], None] | None = None,
    ) -> None:
        self.name = name
        self.settings = settings
        self.disabled_reason = disabled_reason
        self.on_decision = on_decision
        # Decisions forked DataLoader workers reached, by the device they ran on: a worker forked
        # later starts with them instead of checking again (see adopt_workers()).
        self.inherited: dict[str, tuple[GuardState, str]] = {}
        self.reset()

    def reset(self) -> None:
        """Start checking afresh (a forked child measures on its own device)."""
        self._lock = threading.Lock()  # a forked child may have inherited it held
        self._samples = PairSamples()  # A: the original, B: the backend
        self._started = 0
        self.calls = 0
        self.mismatches = 0
        if self.settings is None or self.disabled_reason is not None:
            self.state = GuardState.DISABLED
            self.reason = self.disabled_reason or ""
        else:
            self.state = GuardState.CHECKING
            self.reason = ""
        self.checking = self.state is GuardState.CHECKING

    def adopt_workers(self, reports: list[dict[str, int]], device: str) -> None:
        """Remember what forked workers decided on ``device`` for the workers forked next.

        One worker that switched the function off is enough (it saw a mismatch or a loss on
        its own calls); kept needs every reporting worker to agree.
        """
        decided = [s for s in (stats_from_fields(r) for r in reports) if s is not None]
        states = {s["state"] for s in decided}
        if GuardState.SWITCHED_OFF.value in states:
            reason = next(s["reason"] for s in decided if s["state"] == "switched_off")
            self.inherited[device] = (GuardState.SWITCHED_OFF, reason)
        elif states == {GuardState.KEPT.value}:
            self.inherited[device] = (GuardState.KEPT, decided[0]["reason"])

    def start_inherited(self, device: str) -> bool:
        """In a fresh worker: take the decision earlier workers reached on ``device``, if any."""
        found = self.inherited.get(device)
        if found is None or self.state is GuardState.DISABLED:
            return False
        self.state, reason = found
        self.reason = f"decided by earlier DataLoader workers: {reason}"
        self.checking = False
        return True

    @property
    def switched_off(self) -> bool:
        """Whether the original runs from now on."""
        return self.state is GuardState.SWITCHED_OFF

    def run(self, backend: Callable[[], Any], original: Callable[[], Any], device: str) -> Checked:
        """Run both paths of one call, compare, and decide after the last checked call.

        Exceptions of ``original`` propagate (the library rejects the input); an exception of
        ``backend`` is returned in :class:`Checked` with the original's result.
        """
        settings = self.settings
        assert settings is not None, "run() is only called while checking"
        watch = _stopwatch(settings, device)
        with self._lock:
            order = round_order(("backend", "original"), self._started)
            self._started += 1
        backend_ns = original_ns = 0
        error: Exception | None = None
        result: Any = None
        expected: Any = None
        for way in order:
            if way == "backend":
                result, backend_ns, error = _timed_backend(backend, watch)
            else:
                timed = watch.timed(original)
                expected, original_ns = timed.value, timed.elapsed_ns
        if error is not None:
            return Checked(expected, False, error, None)
        problem = difference(self.name, expected, result)
        self._record(original_ns, backend_ns, problem)
        if problem is not None:
            return Checked(expected, False, None, problem)
        return Checked(result, True, None, None)

    def _record(self, original_ns: int, backend_ns: int, difference: str | None) -> None:
        settings = self.settings
        assert settings is not None
        with self._lock:
            if not self.checking:
                return  # another thread decided meanwhile
            self._samples.add(original_ns, backend_ns)
            self.calls += 1
            if difference is not None:
                self.mismatches += 1
                if not self.reason:
                    self.reason = difference
            if self.mismatches == 0 and self.calls < settings.calls:
                return
            self._decide(settings)
        if self.on_decision is not None:
            self.on_decision(self)

    def _decide(self, settings: GuardSettings) -> None:
        measured = self._samples.result(settings.margin, ("the original", "the backend"))
        needed = f" by {settings.margin:.0%}" if settings.margin else ""
        figures = _figures(measured)
        if self.mismatches:
            self.state = GuardState.SWITCHED_OFF
            self.reason = (
                f"{self.mismatches} of {self.calls} results differ from the original beyond "
                f"the tolerance ({self.reason})"
            )
        elif not measured.comparison.b_faster:
            self.state = GuardState.SWITCHED_OFF
            self.reason = (
                f"the backend does not beat the original{needed} beyond the spread: {figures}"
            )
        else:
            self.state = GuardState.KEPT
            self.reason = f"results match and the backend beats the original{needed}: {figures}"
        self.checking = False
        log.info(
            "guard: %s %s after %d checked call(s): %s",
            self.name,
            "kept" if self.state is GuardState.KEPT else "switched off",
            self.calls,
            self.reason,
        )

    def stats(self) -> dict[str, Any]:
        """``{"state", "original_ms_median", "backend_ms_median", "calls", "mismatches",
        "reason"}`` (medians ``None`` before the first checked call)."""
        with self._lock:
            original = list(self._samples.a_ns)
            backend = list(self._samples.b_ns)
            return {
                "state": self.state.value,
                "original_ms_median": statistics.median(original) / 1e6 if original else None,
                "backend_ms_median": statistics.median(backend) / 1e6 if backend else None,
                "calls": self.calls,
                "mismatches": self.mismatches,
                "reason": self.reason,
            }

    def fields(self) -> dict[str, int]:
        """This guard as the integers a forked worker reports (see :data:`FIELDS`)."""
        with self._lock:
            original_ns, backend_ns = self._samples.a_ns, self._samples.b_ns
            original = int(statistics.median(original_ns)) if original_ns else 0
            backend = int(statistics.median(backend_ns)) if backend_ns else 0
            slower = self.state is GuardState.SWITCHED_OFF and not self.mismatches
            return {
                "guard_state": STATE_CODES[self.state],
                "guard_calls": self.calls,
                "guard_mismatches": self.mismatches,
                "guard_original_ns": original,
                "guard_backend_ns": backend,
                "guard_slower": int(slower),
            }


def stats_from_fields(row: Mapping[str, int]) -> dict[str, Any] | None:
    """A worker's reported :meth:`Guard.fields` as :meth:`Guard.stats` (``None``: no report)."""
    state = _STATES_BY_CODE.get(int(row.get("guard_state", 0)))
    if state is None:
        return None
    calls = int(row.get("guard_calls", 0))
    original_ms = row.get("guard_original_ns", 0) / 1e6 if calls else None
    backend_ms = row.get("guard_backend_ns", 0) / 1e6 if calls else None
    reason = ""
    if not calls and state in (GuardState.KEPT, GuardState.SWITCHED_OFF):
        reason = "decided by earlier DataLoader workers; no call checked again here"
    elif state is GuardState.SWITCHED_OFF:
        if row.get("guard_mismatches", 0):
            reason = f"{row['guard_mismatches']} of {calls} results differ from the original"
        elif row.get("guard_slower", 0):
            reason = (
                f"the backend does not beat the original beyond the spread: backend median "
                f"{backend_ms:.4g} ms, original {original_ms:.4g} ms"
            )
    elif state is GuardState.KEPT:
        reason = (
            f"results match and the backend beats the original: backend median "
            f"{backend_ms:.4g} ms, original {original_ms:.4g} ms"
        )
    return {
        "state": state.value,
        "original_ms_median": original_ms,
        "backend_ms_median": backend_ms,
        "calls": calls,
        "mismatches": int(row.get("guard_mismatches", 0)),
        "reason": reason,
    }


def merge_worker_stats(own: dict[str, Any], reports: list[dict[str, int]]) -> dict[str, Any]:
    """Add forked workers' guard decisions to this process's guard stats.

    Each worker that reported appears under ``"workers"`` (with its ``pid``). When this process
    made no checked call itself (all calls ran in DataLoader workers), the top-level fields sum
    up the workers': their common state (``"mixed"`` when they differ), the calls and mismatches
    summed, the medians of their medians.
    """
    workers = []
    for row in reports:
        stats = stats_from_fields(row)
        if stats is not None:
            workers.append({"pid": int(row.get("pid", 0)), **stats})
    if not workers:
        return own
    merged = {**own, "workers": workers}
    if own["calls"] or own["state"] != GuardState.CHECKING.value:
        return merged
    states = Counter(w["state"] for w in workers)
    merged["state"] = next(iter(states)) if len(states) == 1 else "mixed"
    merged["calls"] = sum(w["calls"] for w in workers)
    merged["mismatches"] = sum(w["mismatches"] for w in workers)
    for key in ("original_ms_median", "backend_ms_median"):
        values = [w[key] for w in workers if w[key] is not None]
        merged[key] = statistics.median(values) if values else None
    summary = ", ".join(f"{count} {state}" for state, count in sorted(states.items()))
    reasons = sorted({w["reason"] for w in workers if w["reason"]})
    merged["reason"] = f"workers: {summary}" + (f" ({reasons[0]})" if reasons else "")
    return merged


def _stopwatch(settings: GuardSettings, device: str) -> Stopwatch:
    """Both ways of a call on ``device`` are timed alike: on CUDA between synchronizations."""
    sync: Callable[[], None] = no_sync
    if device.startswith("cuda"):
        sync = functools.partial(settings.synchronize or synchronize, device)
    return Stopwatch(sync=sync, clock=settings.clock_ns)


def _figures(measured: PairResult) -> str:
    """Both medians, the saving's spread and any interference, in words."""
    comparison = measured.comparison
    text = (
        f"backend median {measured.b.median_ns / 1e6:.4g} ms, original "
        f"{measured.a.median_ns / 1e6:.4g} ms (saving {comparison.saving_ns / 1e6:.4g} ± "
        f"{comparison.spread_ns / 1e6:.2g} ms)"
    )
    if measured.interference.disturbed:
        text += f"; measurement disturbed: {measured.interference.describe()}"
    return text


def _timed_backend(
    backend: Callable[[], Any], watch: Stopwatch
) -> tuple[Any, int, Exception | None]:
    try:
        timed = watch.timed(backend)
    except Exception as error:
        return None, 0, error
    return timed.value, timed.elapsed_ns, None
