"""What calibration measured: one :class:`Measurement` per (function, argument signature), and the
:class:`Calibration` of a DAG that maps each traced call to one of them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from codedag.calibrate.timing import Timing, pair_spread_ns, record_dict
from codedag.measure.summary import nanoseconds


@dataclass
class Measurement:
    """The original and the migrated path of one call signature, timed on one device.

    Attributes:
        function: canonical name.
        signature: key of the argument signature (:func:`codedag.calibrate.inputs.signature`).
        arguments: readable summary of the arguments.
        device: where the migrated path ran.
        device_name: description of that device.
        original: timing of the library call; ``None`` when it could not run.
        backend: timing of the migrated path (values in, backend, values out).
        h2d_ns: host-to-device copy of the array arguments alone (0 on the CPU).
        d2h_ns: device-to-host copy of the result alone (0 on the CPU).
        input_bytes: bytes of the array arguments.
        error: why the call could not be measured (backend refused the call, results differ
            from the library's beyond tolerance, arguments not recorded); ``None`` when measured.
        cached: whether the figures came from the calibration cache.
    """

    function: str
    signature: str
    arguments: str
    device: str
    device_name: str
    original: Timing | None = None
    backend: Timing | None = None
    h2d_ns: int = 0
    d2h_ns: int = 0
    input_bytes: int = 0
    error: str | None = None
    cached: bool = False

    @property
    def ok(self) -> bool:
        """Both paths were timed."""
        return self.error is None and self.original is not None and self.backend is not None

    @property
    def speedup(self) -> float | None:
        """Original median / backend median (above 1: the backend is faster)."""
        if not self.ok:
            return None
        assert self.original is not None and self.backend is not None
        return self.original.median_ns / max(1, self.backend.median_ns)

    @property
    def spread_ns(self) -> int:
        """Uncertainty of the saving: half-width of the 95 % interval of the difference of the
        medians (:func:`codedag.measure.statistic.difference_spread_ns`)."""
        return pair_spread_ns(self.original, self.backend)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (the cache entry and the ``--json`` row)."""
        return record_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], cached: bool = False) -> Measurement:
        """Inverse of :meth:`to_dict`.

        Raises:
            KeyError, TypeError, ValueError: not a measurement (a cache entry edited or damaged:
                NaN, infinite or negative times are refused).
        """
        return cls(
            function=str(data["function"]),
            signature=str(data["signature"]),
            arguments=str(data.get("arguments", "")),
            device=str(data["device"]),
            device_name=str(data.get("device_name", "")),
            original=Timing.from_dict(data["original"]) if data.get("original") else None,
            backend=Timing.from_dict(data["backend"]) if data.get("backend") else None,
            h2d_ns=nanoseconds(data.get("h2d_ns", 0)),
            d2h_ns=nanoseconds(data.get("d2h_ns", 0)),
            input_bytes=nanoseconds(data.get("input_bytes", 0)),
            error=data.get("error"),
            cached=cached,
        )


@dataclass(frozen=True)
class CallEstimate:
    """Calibrated figures of one traced call (its own signature's, or a neighbour's scaled).

    Attributes:
        measurement: the measurement used.
        scale: the call's input bytes / the measured signature's (1.0 when its own).
    """

    measurement: Measurement
    scale: float = 1.0

    def _scaled(self, ns: int) -> int:
        return int(ns * self.scale)

    @property
    def original_ns(self) -> int:
        """Median time of the library call."""
        assert self.measurement.original is not None
        return self._scaled(self.measurement.original.median_ns)

    @property
    def backend_ns(self) -> int:
        """Median time of the migrated path (copies in and out included)."""
        assert self.measurement.backend is not None
        return self._scaled(self.measurement.backend.median_ns)

    @property
    def h2d_ns(self) -> int:
        """Upload of the inputs alone (saved when a placed call produced them)."""
        return self._scaled(self.measurement.h2d_ns)

    @property
    def spread_ns(self) -> int:
        """Spread of the two timings."""
        return self._scaled(self.measurement.spread_ns)


@dataclass
class DispatchCost:
    """What a patched function costs beyond its work, measured in this process.

    Attributes:
        migrated_ns: the wrapper's own time on a migrated call (deciding, counting).
        passthrough_ns: the wrapper's time on a call it hands to the original.
    """

    migrated_ns: int = 0
    passthrough_ns: int = 0


@dataclass
class Calibration:
    """Every measurement taken for a DAG, and which one stands for each traced call.

    Attributes:
        device: where the migrated paths ran.
        device_name: its description.
        measurements: by ``function|signature``.
        calls: original call id -> its estimate.
        dispatch: the wrapper's own costs.
        cache_path: the cache file, if any.
        measured: measurements taken now.
        from_cache: measurements read from the cache.
        elapsed_s: wall time of the calibration.
    """

    device: str
    device_name: str
    measurements: dict[str, Measurement] = field(default_factory=dict)
    calls: dict[int, CallEstimate] = field(default_factory=dict)
    dispatch: DispatchCost = field(default_factory=DispatchCost)
    cache_path: str | None = None
    measured: int = 0
    from_cache: int = 0
    elapsed_s: float = 0.0

    def estimate(self, call_id: int) -> CallEstimate | None:
        """The estimate of an original call, ``None`` when it was not calibrated."""
        return self.calls.get(call_id)

    def rows(self) -> list[Measurement]:
        """Measurements sorted by the original's time, slowest first."""
        return sorted(
            self.measurements.values(),
            key=lambda m: (-(m.original.median_ns if m.original else 0), m.function),
        )
