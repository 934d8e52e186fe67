"""Calibrate the migratable calls of a traced DAG on a target device.

For each distinct (function, argument signature) among the candidate calls, the call is rebuilt
from its recorded argument descriptions and run both ways, interleaved, on the target device: the
original library function, and the migrated path exactly as a patched call runs it (values in,
backend, values out). Before timing, the migrated result is compared with the library's through
the tolerance table: a backend that refuses the call or differs gets no time, only the reason.
Figures go to the calibration cache, so a second calibration of the same pipeline on the same
machine only reads them.

Ragged inputs (a resize of images of many sizes) give many signatures: at most
``max_signatures`` per function are measured, spread over the input sizes, and the other calls
borrow the nearest measured signature's figures scaled by their input bytes.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from codedag.backends.registry import Registry
from codedag.calibrate.dispatch import measure_dispatch
from codedag.calibrate.environment import library_versions
from codedag.calibrate.inputs import (
    describe,
    input_bytes,
    rebuild_call,
    signature,
)
from codedag.calibrate.measurement import (
    Calibration,
    CallEstimate,
    DispatchCost,
    Measurement,
)
from codedag.calibrate.saved_times import CalibrationCache, entry_key
from codedag.calibrate.timing import (
    Budget,
    Stopwatch,
    cpu_aware_stopwatch,
    summarized_disturbances,
    time_one,
    time_pair,
)
from codedag.devices.torch_devices import device_name, device_sync
from codedag.errors import CodeDAGError
from codedag.graph.model import ExecutionDAG
from codedag.measure.summary import nanoseconds
from codedag.measure.threads import torch_threads

log = logging.getLogger(__name__)

Progress = Callable[[int, int, str], None]
"""``progress(done, total, what)``."""

MAX_SIGNATURES = 6
"""Signatures measured per function at most (spread over input sizes)."""


@dataclass(frozen=True)
class _Candidate:
    call_id: int
    function: str
    args: list[dict[str, Any]]
    signature: str
    nbytes: int


def _no_progress(done: int, total: int, what: str) -> None:
    return None


def _candidates(calls: Iterable[Any]) -> tuple[list[_Candidate], list[int]]:
    """Calls with recorded arguments, and the ids of those without."""
    found, missing = [], []
    for node in calls:
        args = getattr(node, "args", None)
        try:
            if not isinstance(args, list):
                raise TypeError("no argument list")
            found.append(_Candidate(node.id, node.name, args, signature(args), input_bytes(args)))
        except (TypeError, ValueError, KeyError, AttributeError):
            missing.append(node.id)  # not recorded, or not in the recorded format
    return found, missing


def _pick(cands: list[_Candidate], limit: int) -> list[_Candidate]:
    """Up to ``limit`` distinct signatures of one function, spread over input sizes."""
    distinct: dict[str, _Candidate] = {}
    for cand in cands:
        distinct.setdefault(cand.signature, cand)
    ordered = sorted(distinct.values(), key=lambda c: (c.nbytes, c.signature))
    if len(ordered) <= limit:
        return ordered
    step = (len(ordered) - 1) / (limit - 1)
    return [ordered[round(i * step)] for i in range(limit)]


class Calibrator:
    """Measures call signatures on one device, through a cache.

    Args:
        device: ``cpu`` or ``cuda:i``: where the migrated path runs.
        cache: the calibration cache (default: the user's cache file).
        registry: the migration registry (default: the process-wide one).
        stopwatch: how one call is timed (tests inject noise or fake clocks).
        budget: how long each signature is measured.
        max_signatures: signatures measured per function at most.
        threads: torch intra-op threads during the measurements: the number the calls will run
            with (1 inside DataLoader workers, which PyTorch sets there); ``None`` keeps the
            process's setting.
    """

    def __init__(
        self,
        device: str = "cpu",
        cache: CalibrationCache | None = None,
        registry: Registry | None = None,
        stopwatch: Stopwatch | None = None,
        budget: Budget | None = None,
        max_signatures: int = MAX_SIGNATURES,
        threads: int | None = None,
    ) -> None:
        self.device = device
        self.cache = cache if cache is not None else CalibrationCache.default()
        self.registry = registry
        self.stopwatch = stopwatch or cpu_aware_stopwatch(device, device_sync(device))
        self.budget = budget or Budget()
        self.max_signatures = max(1, max_signatures)
        self.threads = threads
        with self._threads():
            self.device_name = device_name(device)

    def _threads(self) -> contextlib.AbstractContextManager[None]:
        """Run with ``self.threads`` torch threads (restored afterwards)."""
        return torch_threads(self.threads)

    # ------------------------------------------------------------------ one signature
    def measure(self, function: str, args: list[dict[str, Any]]) -> Measurement:
        """Measure one call signature (or read it from the cache)."""
        with self._threads():
            return self._cached_or_measured(function, args)

    def _cached_or_measured(self, function: str, args: list[dict[str, Any]]) -> Measurement:
        sig = signature(args)
        key = entry_key(self.device_name, library_versions(function), function, sig)
        cached = self.cache.get(key)
        if cached is not None:
            try:
                return Measurement.from_dict(cached, cached=True)
            except (KeyError, TypeError, ValueError):
                log.debug("unusable cache entry for %s; measuring again", function)
        measurement = self._measure(function, args, sig)
        self.cache.put(key, measurement.to_dict())
        return measurement

    def _measure(self, function: str, args: list[dict[str, Any]], sig: str) -> Measurement:
        from codedag.backends.probe import migrated_call, original_function
        from codedag.backends.tolerances import difference

        result = Measurement(
            function, sig, describe(args), self.device, self.device_name,
            input_bytes=input_bytes(args),
        )  # fmt: skip
        try:
            call_args, call_kwargs = rebuild_call(args)
        except (CodeDAGError, ValueError, TypeError) as e:
            result.error = f"cannot rebuild the arguments: {e}"
            return result
        try:
            original = original_function(function)
            backend = migrated_call(function, self.device, self.registry)
        except Exception as e:
            result.error = f"{type(e).__name__}: {e}"
            return result
        try:
            expected = original(*call_args, **call_kwargs)
        except Exception as e:
            result.error = f"the library refuses the rebuilt call ({type(e).__name__}: {e})"
            return result
        try:
            actual = backend(*call_args, **call_kwargs)
        except Exception as e:
            result.error = f"backend cannot run this call: {type(e).__name__}: {e}"[:300]
            return result
        problem = difference(function, expected, actual)
        if problem is not None:
            result.error = f"backend result differs from the library's: {problem}"[:300]
            return result
        result.original, result.backend = time_pair(
            lambda: original(*call_args, **call_kwargs),
            lambda: backend(*call_args, **call_kwargs),
            self.stopwatch,
            self.budget,
            what=f"{function} ({result.arguments})",
            function=function,
        )
        if not self.device.startswith("cpu"):
            result.h2d_ns, result.d2h_ns = self._copies(call_args, call_kwargs, expected)
        return result

    def _copies(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], output: object
    ) -> tuple[int, int]:
        """Measured host-to-device copy of the array arguments and device-to-host of the output."""
        import numpy as np
        import torch

        arrays = [v for v in (*args, *kwargs.values()) if isinstance(v, np.ndarray)]
        device = torch.device(self.device)

        def upload() -> None:
            for a in arrays:
                torch.from_numpy(np.ascontiguousarray(a)).to(device)

        h2d = time_one(upload, self.stopwatch).median_ns if arrays else 0
        d2h = 0
        if isinstance(output, np.ndarray) and output.dtype.kind in "biuf":
            on_device = torch.from_numpy(np.ascontiguousarray(output)).to(device)
            d2h = time_one(lambda: on_device.cpu(), self.stopwatch).median_ns
        return int(h2d), int(d2h)

    def dispatch(self) -> DispatchCost:
        """The wrapper's own costs, from the cache or measured."""
        key = entry_key(self.device_name, library_versions("codedag"), "<dispatch>", "")
        cached = self.cache.get(key)
        if cached is not None:
            try:
                return DispatchCost(
                    nanoseconds(cached["migrated_ns"]), nanoseconds(cached["passthrough_ns"])
                )
            except (KeyError, TypeError, ValueError):
                log.debug("unusable cache entry for the dispatch cost; measuring again")
        with self._threads():
            cost = measure_dispatch(self.device)
        self.cache.put(
            key, {"migrated_ns": cost.migrated_ns, "passthrough_ns": cost.passthrough_ns}
        )
        return cost

    # ------------------------------------------------------------------ a DAG
    def calibrate(self, calls: Iterable[Any], progress: Progress = _no_progress) -> Calibration:
        """Measure every distinct signature among ``calls`` (call nodes with ``args``).

        Calls without recorded arguments get no estimate (placement leaves them on the CPU).
        Measurements that other work disturbed are said in one warning at the end.
        """
        with summarized_disturbances():
            return self._calibrate(calls, progress)

    def _calibrate(self, calls: Iterable[Any], progress: Progress) -> Calibration:
        start = time.perf_counter()
        cands, missing = _candidates(calls)
        if missing:
            log.info("%d call(s) have no recorded arguments and are not calibrated", len(missing))
        by_function: dict[str, list[_Candidate]] = {}
        for cand in cands:
            by_function.setdefault(cand.function, []).append(cand)
        chosen = {f: _pick(c, self.max_signatures) for f, c in sorted(by_function.items())}
        total = sum(len(c) for c in chosen.values())
        out = Calibration(
            self.device,
            self.device_name,
            cache_path=None if self.cache.path is None else str(self.cache.path),
        )
        done = 0
        for function, picked in chosen.items():
            measured: list[tuple[_Candidate, Measurement]] = []
            for cand in picked:
                progress(done, total, function)
                m = self.measure(function, cand.args)
                out.measurements[f"{function}|{cand.signature}"] = m
                if m.cached:
                    out.from_cache += 1
                else:
                    out.measured += 1
                measured.append((cand, m))
                done += 1
            for cand in by_function[function]:
                out.calls[cand.call_id] = _nearest(cand, measured)
        progress(total, total, "")
        out.dispatch = self.dispatch()
        out.elapsed_s = time.perf_counter() - start
        return out


def _nearest(cand: _Candidate, measured: list[tuple[_Candidate, Measurement]]) -> CallEstimate:
    for other, m in measured:
        if other.signature == cand.signature:
            return CallEstimate(m)
    usable = [(o, m) for o, m in measured if m.ok] or measured
    other, m = min(usable, key=lambda om: abs(om[0].nbytes - cand.nbytes))
    scale = cand.nbytes / other.nbytes if other.nbytes else 1.0
    return CallEstimate(m, scale)


def calibrate_dag(
    dag: ExecutionDAG,
    device: str = "cpu",
    names: Callable[[str], bool] | None = None,
    progress: Progress = _no_progress,
    **options: Any,
) -> Calibration:
    """Calibrate the migratable calls of ``dag`` (an ExecutionDAG or a coarsened DAG's source).

    Args:
        dag: the traced DAG.
        device: where the migrated path runs.
        names: which function names to calibrate (default: every migratable one).
        progress: ``progress(done, total, function)``.
        **options: passed to :class:`Calibrator` (``cache``, ``registry``, ``stopwatch``, ...).
    """
    from codedag.backends.admission import admit_dag
    from codedag.backends.registry import default_registry

    registry = options.get("registry") or default_registry()
    source = getattr(dag, "source", dag)
    admission = admit_dag(source, registry)  # nothing is imported for a name it does not admit
    wanted = names or admission.allows
    calls = [n for n in source.calls() if admission.allows(n.name) and wanted(n.name)]
    return Calibrator(device, **options).calibrate(calls, progress)
