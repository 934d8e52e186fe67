"""CPU energy over one experiment's window: a meter per source, started and stopped around a run.

The sources and their readers (RAPL files, ``perf``) are :mod:`codedag.devices.cpu_energy`; a meter
turns what they count into the ``energy_metrics`` of an experiment, and a source that reads zero
into an unavailable reading: a zero is not a measurement.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from codedag.devices.cpu_energy import (
    POWERCAP_ROOT,
    CpuEnergyProbe,
    PerfEnergyCount,
    RaplCounter,
    parse_perf_csv,
    probe_cpu_energy,
    rapl_counters,
    rapl_deltas_j,
    read_rapl_uj,
)
from codedag.energy.process import REGISTRY
from codedag.errors import DeviceError


@dataclass
class CpuEnergyReading:
    """CPU energy over one window. Joules are ``None`` when not measured; ``reason`` says why."""

    source: str  # "rapl", "perf" or "unavailable"
    pkg_j: float | None = None
    ram_j: float | None = None
    total_j: float | None = None
    reason: str | None = None
    raw: dict[str, float] = field(default_factory=dict)

    def metrics(self) -> dict[str, object]:
        """The ``energy_metrics`` keys of experiment.json."""
        return {
            "cpu_energy_pkg_joules": self.pkg_j,
            "cpu_energy_ram_joules": self.ram_j,
            "cpu_energy_total_joules": self.total_j,
            "cpu_energy_source": self.source if self.reason is None else "unavailable",
            "cpu_energy_unavailable_reason": self.reason,
        }


class CpuEnergyMeter:
    """Measures CPU energy between :meth:`start` and :meth:`stop` (the unavailable base case)."""

    source = "unavailable"

    def __init__(self, reason: str = "no CPU energy source") -> None:
        self.reason = reason

    def start(self) -> None:
        """Begin the window."""

    def stop(self) -> CpuEnergyReading:
        """End the window and return its energy."""
        return CpuEnergyReading("unavailable", reason=self.reason)


class RaplCpuMeter(CpuEnergyMeter):
    """RAPL counters from the powercap tree: packages, and their ``dram`` sub-domains.

    Counter wrap-around is handled with ``max_energy_range_uj``. ``psys`` (whole platform) is
    kept in ``raw`` but not added to the total when package domains exist (it contains them).
    """

    source = "rapl"

    def __init__(self, root: Path = POWERCAP_ROOT) -> None:
        super().__init__()
        self.domains: list[RaplCounter] = rapl_counters(root)
        self._start: list[int] = []

    def start(self) -> None:
        self._start = read_rapl_uj(self.domains)

    def stop(self) -> CpuEnergyReading:
        try:
            end = read_rapl_uj(self.domains)
        except OSError as error:
            return CpuEnergyReading("unavailable", reason=f"RAPL read failed: {error}")
        raw = rapl_deltas_j(self.domains, self._start, end)
        pkg = [v for k, v in raw.items() if k.endswith("/package") or "/package-" in k]
        ram = [v for k, v in raw.items() if k.endswith("/dram")]
        psys = [v for k, v in raw.items() if k.endswith("/psys")]
        pkg_j = sum(pkg) if pkg else None
        ram_j = sum(ram) if ram else None
        if pkg_j is not None:
            total: float | None = pkg_j + (ram_j or 0.0)
        else:
            total = float(sum(psys)) if psys else None
        if total is not None and total <= 0.0:
            return CpuEnergyReading(
                "unavailable", reason="RAPL counters did not advance (0 J)", raw=raw
            )
        return CpuEnergyReading("rapl", pkg_j, ram_j, total, None, raw)


class PerfCpuMeter(CpuEnergyMeter):
    """``perf stat -a`` on the power PMU's energy events, running for the window.

    A window whose events all read 0 J is reported as unavailable: a zero is not a measurement.
    """

    source = "perf"

    def __init__(self, events: list[str], perf: str = "perf") -> None:
        super().__init__()
        self.events = events
        self._count = PerfEnergyCount(events, perf)
        self._pid: int | None = None

    def start(self) -> None:
        self._pid = self._count.start()
        REGISTRY.add(self._pid)  # ended with the session's other groups, come what may

    def stop(self) -> CpuEnergyReading:
        try:
            text = self._count.stop()
        except DeviceError as error:
            return CpuEnergyReading("unavailable", reason=str(error))
        finally:
            if self._pid is not None:
                REGISTRY.discard(self._pid)
        raw = parse_perf_csv(text)
        if not raw:
            return CpuEnergyReading("unavailable", reason=f"perf counted nothing: {text[-200:]!r}")
        if all(v <= 0.0 for v in raw.values()):
            return CpuEnergyReading(
                "unavailable", reason=f"perf events {sorted(raw)} read 0 J", raw=raw
            )
        pkg = raw.get("energy-pkg")
        ram = raw.get("energy-ram")
        total = (pkg + (ram or 0.0)) if pkg is not None else raw.get("energy-psys")
        return CpuEnergyReading("perf", pkg, ram, total, None, raw)


def cpu_meter_factory(
    probe: CpuEnergyProbe | None = None, powercap_root: Path = POWERCAP_ROOT
) -> Callable[[], CpuEnergyMeter]:
    """Probe once, then make a fresh meter of the usable source per window (unavailable: why)."""
    probe = probe if probe is not None else probe_cpu_energy(powercap_root)
    if probe.source == "rapl":
        return lambda: RaplCpuMeter(powercap_root)
    if probe.source == "perf":
        events = list(probe.perf_events)
        return lambda: PerfCpuMeter(events)
    detail = probe.detail.removeprefix("CPU energy unavailable: ")
    return lambda: CpuEnergyMeter(detail)
