"""Calibrating batched chains: one batch through batched execution vs the per-sample chain.

For a chain found in the trace (:mod:`codedag.optimize.chains`), one batch of ``batch_size``
samples (the traced samples' recorded arguments, cycled) is run both ways on the target device
(:mod:`.chain_replay`): each sample through the original libraries then ``default_collate``, and
the samples recorded with deferral, collated into one record and run by the batched executor
(on an accelerator both ways end with the batch there, below). The first batched run is
verified against the original functions, round by round, through the tolerance table: a chain
whose batched result differs gets no time, only the reason. Both ways are then timed
interleaved (:func:`~.timing.time_pair`), and the recording part alone (what DataLoader workers
do) once more, so placement can charge it to the workers.

On an accelerator both ways end with the batch on the device, where the training step uses it:
the per-sample batch is copied there as the training loop's ``.to(device)`` copies it, and the
batched one stays where it ran, as batched execution delivers it once the loop moves its batches
to that device (:mod:`codedag.migrate.batched.deliver`). Timing the batched way with a copy back
to the host and the original without its copy to the device charged one way twice: a float32
batch of 32 images of 512 px is 100 MB, whose copy back took longer on an H200 than the whole
batched chain. The two copies are timed alone as well (``upload_ns``, ``download_ns``), so the
reason can say what delivering on the host would add. Figures go to the calibration cache like
the per-call ones.

On the CPU a chain is not measured where its calls' own calibration already rules batching out
(:func:`slower_per_call`): batched execution runs the same torch backends on the same cores.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import codedag.measure.pair as pair
from codedag.calibrate.environment import library_versions
from codedag.calibrate.inputs import signature

if TYPE_CHECKING:
    from codedag.calibrate.measurement import Calibration
from codedag.calibrate.saved_times import CalibrationCache, entry_key
from codedag.calibrate.timing import (
    Budget,
    Stopwatch,
    Timing,
    cpu_aware_stopwatch,
    pair_spread_ns,
    record_dict,
    time_pair,
)
from codedag.devices.torch_devices import device_name, device_sync
from codedag.measure.summary import nanoseconds

log = logging.getLogger(__name__)

CHAIN_BUDGET = Budget(min_samples=3, max_samples=51, target_ns=0, max_ns=3_000_000_000, warmup=0)
"""Batches are long (tens of ms to seconds on the CPU): 3 pairs at least, 3 s at most, stopping
as soon as the comparison is decided."""


REPLAY_VERSION = 4
"""Raised when the replay times something else than before (more of a chain; both ways up to the
batch on the device; operators with operands of their traced shapes; a replay that stops at a
flip collates a copy): older cached figures timed another thing, or failed where it now runs."""


@dataclass
class ChainMeasurement:
    """One batch of a chain, per sample with the libraries vs batched, on one device.

    Attributes:
        chain: the chain's id in the plan.
        signature: cache key of the chain's samples and batch size.
        device: where the batched executor ran.
        device_name: description of that device.
        batch_size: samples per batch.
        original: timing of the batch per sample with the libraries (collate, and on an
            accelerator the copy to it, included).
        batched: timing of the batch through batched execution (record, collate, executor;
            delivered where ``delivered`` says).
        delivered: where both ways leave the batch: ``"device"`` (on an accelerator) or
            ``"host"``.
        upload_ns: the per-sample batch's copy to the device alone (0 on the host).
        download_ns: the batched batch's copy back to the host alone (0 on the host).
        record_ns: the recording and collating part of ``batched`` (done in the workers).
        backend_calls: backend calls of one batched run.
        groups: distinct sample programs in the batch.
        h2d_bytes: host-to-device bytes per batch (counted as a device would copy).
        d2h_bytes: device-to-host bytes per batch (delivery on the host).
        timed_steps: the operations the replay covers.
        untimed_steps: operations it could not repeat (recorded without enough detail).
        stand_in_steps: timed operations replayed with stand-in operands (the trace kept none).
        error: why the chain could not be measured (``None``: measured).
        cached: whether the figures came from the cache.
    """

    chain: str
    signature: str
    device: str
    device_name: str
    batch_size: int
    original: Timing | None = None
    batched: Timing | None = None
    record_ns: int = 0
    delivered: str = "host"
    upload_ns: int = 0
    download_ns: int = 0
    backend_calls: int = 0
    groups: int = 0
    h2d_bytes: int = 0
    d2h_bytes: int = 0
    timed_steps: tuple[str, ...] = ()
    untimed_steps: tuple[str, ...] = ()
    stand_in_steps: tuple[str, ...] = ()
    error: str | None = None
    cached: bool = False

    @property
    def ok(self) -> bool:
        """Both ways were timed."""
        return self.error is None and self.original is not None and self.batched is not None

    @property
    def spread_ns(self) -> int:
        """Half-width of the 95 % interval of the difference of the medians
        (:func:`codedag.measure.statistic.difference_spread_ns`)."""
        return pair_spread_ns(self.original, self.batched)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (the cache entry)."""
        return record_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], cached: bool = False) -> ChainMeasurement:
        """Inverse of :meth:`to_dict` (``ValueError`` for NaN, infinite or negative figures)."""
        original, batched = data.get("original"), data.get("batched")
        return cls(
            chain=str(data["chain"]),
            signature=str(data["signature"]),
            device=str(data["device"]),
            device_name=str(data["device_name"]),
            batch_size=nanoseconds(data["batch_size"]),
            original=None if original is None else Timing.from_dict(original),
            batched=None if batched is None else Timing.from_dict(batched),
            record_ns=nanoseconds(data.get("record_ns", 0)),
            delivered="device" if data.get("delivered") == "device" else "host",
            upload_ns=nanoseconds(data.get("upload_ns", 0)),
            download_ns=nanoseconds(data.get("download_ns", 0)),
            backend_calls=nanoseconds(data.get("backend_calls", 0)),
            groups=nanoseconds(data.get("groups", 0)),
            h2d_bytes=nanoseconds(data.get("h2d_bytes", 0)),
            d2h_bytes=nanoseconds(data.get("d2h_bytes", 0)),
            timed_steps=tuple(data.get("timed_steps") or ()),
            untimed_steps=tuple(data.get("untimed_steps") or ()),
            stand_in_steps=tuple(data.get("stand_in_steps") or ()),
            error=data.get("error"),
            cached=cached,
        )


def chain_signature(candidate: Any, batch_size: int) -> str:
    """What a chain's batch time depends on: each sample's steps, argument signatures, size,
    and how far the replay reaches (:data:`REPLAY_VERSION`)."""
    parts: list[Any] = [REPLAY_VERSION, batch_size]
    for sample in candidate.samples:
        parts.append(
            [
                [
                    s.name,
                    s.data_slot,
                    None if s.args is None else signature(s.args),
                    s.out_dtype,
                    s.operands,
                ]
                for s in sample.steps
            ]
        )
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]


def _versions(functions: list[str]) -> dict[str, str]:
    versions: dict[str, str] = {}
    for function in functions or ["numpy.add"]:
        versions.update(library_versions(function))
    return versions


class ChainCalibrator:
    """Measures batched chains on one device, through the calibration cache.

    Args:
        device: where the batched executor runs (the main process's device).
        cache: the calibration cache (default: the user's cache file).
        stopwatch: how one batch is timed (tests inject fakes).
        budget: how long each chain is measured.
        on_device: whether both ways end with the batch on ``device`` (module docstring);
            ``None``: on every device but the CPU.
    """

    def __init__(
        self,
        device: str = "cpu",
        cache: CalibrationCache | None = None,
        stopwatch: Stopwatch | None = None,
        budget: Budget | None = None,
        on_device: bool | None = None,
    ) -> None:
        self.device = device
        self.on_device = not device.startswith("cpu") if on_device is None else on_device
        self.cache = cache if cache is not None else CalibrationCache.default()
        self.stopwatch = stopwatch or cpu_aware_stopwatch(device, device_sync(device))
        self.budget = budget or CHAIN_BUDGET
        self.device_name = device_name(device)

    def measure(self, candidate: Any, batch_size: int) -> ChainMeasurement:
        """One batch of ``candidate`` both ways (or its figures from the cache)."""
        sig = chain_signature(candidate, batch_size)
        key = entry_key(self.device_name, _versions(candidate.functions), "<batched>", sig)
        cached = self.cache.get(key)
        if cached is not None:
            try:
                found = ChainMeasurement.from_dict(cached, cached=True)
                found.chain = candidate.id
                return found
            except (KeyError, TypeError, ValueError):
                log.debug("unusable cache entry for %s; measuring again", candidate.id)
        result = self._measure(candidate, batch_size, sig)
        if result.error is None or not result.error.startswith("internal"):
            self.cache.put(key, result.to_dict())
        return result

    def unmeasured(self, candidate: Any, batch_size: int, reason: str) -> ChainMeasurement:
        """``candidate``'s entry where it is not measured, and why (nothing cached)."""
        sig = chain_signature(candidate, batch_size)
        found = ChainMeasurement(candidate.id, sig, self.device, self.device_name, batch_size)
        found.error = reason
        return found

    def _measure(self, candidate: Any, batch_size: int, sig: str) -> ChainMeasurement:
        from codedag.calibrate import chain_replay

        result = ChainMeasurement(candidate.id, sig, self.device, self.device_name, batch_size)
        try:
            prepared = chain_replay.prepare(candidate.samples, batch_size)
        except ValueError as e:
            result.error = str(e)
            return result
        result.timed_steps = tuple(prepared.timed_steps)
        result.untimed_steps = tuple(prepared.untimed_steps)
        result.stand_in_steps = tuple(prepared.stand_ins)
        try:
            expected = chain_replay.run_original(prepared)
        except chain_replay.ShapesDiffer as e:
            result.error = str(e)
            return result
        except Exception as e:
            result.error = f"the libraries refuse the rebuilt chain ({type(e).__name__}: {e})"
            return result
        try:
            run = chain_replay.run_batched(prepared, self.device, verify=True, count_transfers=True)
        except Exception as e:
            result.error = f"batched execution cannot run this chain: {type(e).__name__}: {e}"
            result.error = result.error[:300]
            return result
        if run.mismatches:
            result.error = f"batched result differs from the libraries': {run.mismatches[0]}"
            result.error = result.error[:300]
            return result
        if tuple(run.output.shape) != tuple(getattr(expected, "shape", ())):
            result.error = (
                f"batched batch has shape {tuple(run.output.shape)}, the per-sample one "
                f"{tuple(getattr(expected, 'shape', ()))}"
            )
            return result
        result.backend_calls = run.backend_calls
        result.groups = run.groups
        result.h2d_bytes = run.h2d_bytes
        result.d2h_bytes = run.d2h_bytes
        device, on_device = self.device, self.on_device

        def original() -> Any:
            batch = chain_replay.run_original(prepared)
            return chain_replay.to_device(batch, device) if on_device else batch

        result.original, result.batched = time_pair(
            original,
            lambda: chain_replay.run_batched(prepared, device, on_device=on_device),
            self.stopwatch,
            self.budget,
            what=f"batched chain {candidate.id}",
        )
        record = pair.time_one(
            lambda: chain_replay.record(prepared), self.stopwatch, repeats=3, warmup=0
        )
        result.record_ns = record.median_ns
        if on_device:
            result.delivered = "device"
            result.upload_ns, result.download_ns = self._copies(prepared)
        return result

    def _copies(self, prepared: Any) -> tuple[int, int]:
        """The per-sample batch's copy to the device and the batched batch's copy back, alone."""
        from codedag.backends.batched.transfer import DeviceIO
        from codedag.calibrate import chain_replay

        host = chain_replay.run_original(prepared)
        on_device = chain_replay.run_batched(prepared, self.device, on_device=True).output
        io = DeviceIO(self.device)
        watch = self.stopwatch
        upload = pair.time_one(lambda: chain_replay.to_device(host, self.device), watch, 3)
        download = pair.time_one(lambda: io.download(on_device), watch, 3)
        return upload.median_ns, download.median_ns


CALL_OVERHEAD_NS = 100_000
"""A generous bound on what one call through a torch backend on the CPU spends besides its
computation (the wrapper, conversions, operator launches): all that batching saves per call."""


def slower_per_call(
    candidate: Any, calibration: Calibration, library_ns: Callable[[int], int], threads: int
) -> str | None:
    """Why ``candidate`` cannot run faster batched on the CPU, from its calls' calibration
    (``calibration.estimate(call_id)``), or ``None``: then it is measured.

    Batched execution runs the same torch backends on the same CPU: it saves each call's
    overhead, and its ``threads`` divide the computation at most. Where the computation of the
    chain's calls through torch (each calibrated backend time less :data:`CALL_OVERHEAD_NS`)
    exceeds ``threads`` times what every step takes with its library (calibrated, or traced by
    ``library_ns(call_id)`` where not), the chain is slower batched, and timing it would only
    add its rounds to a first run's planning.
    """
    torch_ns = own_ns = 0
    for sample in candidate.samples:
        for step in sample.steps:
            estimate = calibration.estimate(step.call_id)
            if estimate is not None and estimate.measurement.ok:
                torch_ns += max(0, estimate.backend_ns - CALL_OVERHEAD_NS)
                own_ns += estimate.original_ns
            else:
                own_ns += library_ns(step.call_id)
    if torch_ns <= max(1, threads) * own_ns:
        return None
    samples = max(1, len(candidate.samples))
    return (
        f"not measured batched: its calls compute for {torch_ns / samples / 1e6:.3g} ms a sample "
        f"through torch on the CPU (calibrated per call, less {CALL_OVERHEAD_NS / 1e3:g} us of "
        f"each call's overhead), more than {max(1, threads)} thread(s) times the "
        f"{own_ns / samples / 1e6:.3g} ms its steps take with the libraries: batching cannot make "
        "that up"
    )
