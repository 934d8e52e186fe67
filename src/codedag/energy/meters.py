"""CPU energy sources: which one can be read here, and why the others cannot.

RAPL through the powercap sysfs tree is preferred (root is needed since Linux 5.10, and it covers
a whole socket); ``perf`` power events come next. A source that exists but reads zero is reported
as unusable: a zero is not a measurement.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

POWERCAP_ROOT = Path("/sys/class/powercap")
PERF_EVENTS_DIR = Path("/sys/bus/event_source/devices/power/events")


@dataclass(frozen=True)
class CpuEnergyProbe:
    """Result of probing CPU energy sources: the usable source (or ``None``) and the reasons."""

    source: str | None  # "rapl", "perf" or None
    detail: str
    rapl: str
    perf: str
    rapl_domains: list[str] = field(default_factory=list)
    perf_events: list[str] = field(default_factory=list)


def rapl_domains(root: Path = POWERCAP_ROOT) -> list[Path]:
    """Top-level RAPL package domains (``intel-rapl:0``, ``amd-rapl:0`` ...) that have a counter."""
    if not root.is_dir():
        return []
    return sorted(
        p
        for p in root.iterdir()
        if "rapl:" in p.name and p.name.count(":") == 1 and (p / "energy_uj").exists()
    )


def probe_rapl(root: Path = POWERCAP_ROOT) -> tuple[bool, str, list[str]]:
    """Whether RAPL energy counters can be read; returns ``(ok, detail, domain names)``."""
    if not root.is_dir():
        return False, f"{root} does not exist: the kernel exposes no RAPL here", []
    domains = rapl_domains(root)
    if not domains:
        return False, f"{root} has no RAPL domain with an energy_uj counter", []
    names = []
    for domain in domains:
        try:
            (domain / "energy_uj").read_text()
        except PermissionError:
            return (
                False,
                f"{domain / 'energy_uj'} is not readable (root is needed since Linux 5.10)",
                [],
            )
        except OSError as e:
            return False, f"{domain / 'energy_uj'}: {e.strerror}", []
        name_file = domain / "name"
        names.append(name_file.read_text().strip() if name_file.exists() else domain.name)
    return True, f"RAPL readable: {', '.join(names)}", names


def perf_power_events(events_dir: Path = PERF_EVENTS_DIR) -> list[str]:
    """Energy events the kernel's ``power`` PMU offers (``energy-pkg``, ``energy-psys`` ...)."""
    if not events_dir.is_dir():
        return []
    return sorted(
        p.name for p in events_dir.iterdir() if p.name.startswith("energy-") and "." not in p.name
    )


def probe_perf(
    events_dir: Path = PERF_EVENTS_DIR, perf: str = "perf", window_s: float = 0.2
) -> tuple[bool, str, list[str]]:
    """Whether ``perf stat`` reads non-zero energy from a power event over a short window."""
    events = perf_power_events(events_dir)
    if not events:
        return False, "the kernel offers no perf power events (no power PMU)", []
    binary = shutil.which(perf)
    if binary is None:
        return False, f"power events {', '.join(events)} exist but `perf` is not installed", events
    readings = []
    for event in events:
        joules = read_perf_energy_j(binary, event, window_s)
        if joules is None:
            readings.append(f"{event}: perf could not count it")
        elif joules <= 0.0:
            readings.append(f"{event}: reads 0 J over {window_s:g} s")
        else:
            return True, f"perf power/{event}/ reads {joules:.3f} J over {window_s:g} s", events
    return False, "; ".join(readings) + " (not a usable measurement)", events


def read_perf_energy_j(perf: str, event: str, window_s: float) -> float | None:
    """Joules ``perf stat -a -e power/<event>/`` counts over ``window_s``; ``None`` on failure."""
    command = [perf, "stat", "-a", "-x", ",", "-e", f"power/{event}/", "sleep", f"{window_s:g}"]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=10 + window_s)
    except (OSError, subprocess.TimeoutExpired):
        return None
    for line in result.stderr.splitlines():
        fields = line.split(",")
        if len(fields) > 2 and f"power/{event}/" in fields[2]:
            try:
                return float(fields[0])
            except ValueError:
                return None
    return None


def probe_cpu_energy(
    powercap_root: Path = POWERCAP_ROOT, perf_events_dir: Path = PERF_EVENTS_DIR
) -> CpuEnergyProbe:
    """Find the CPU energy source to use: RAPL, else perf, else none with both reasons."""
    rapl_ok, rapl_detail, names = probe_rapl(powercap_root)
    if rapl_ok:
        return CpuEnergyProbe("rapl", rapl_detail, rapl_detail, "not probed (RAPL is used)", names)
    perf_ok, perf_detail, events = probe_perf(perf_events_dir)
    if perf_ok:
        return CpuEnergyProbe("perf", perf_detail, rapl_detail, perf_detail, [], events)
    detail = f"CPU energy unavailable: RAPL: {rapl_detail}; perf: {perf_detail}"
    return CpuEnergyProbe(None, detail, rapl_detail, perf_detail, [], events)


def perf_event_paranoid() -> int | None:
    """The kernel's ``perf_event_paranoid`` level (system-wide events need <= 0 without root)."""
    try:
        return int(Path("/proc/sys/kernel/perf_event_paranoid").read_text())
    except (OSError, ValueError):
        return None


def is_root() -> bool:
    """Whether this process runs as root."""
    return hasattr(os, "geteuid") and os.geteuid() == 0


# --------------------------------------------------------------------------------------------
# Meters: energy over one experiment's window.


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


@dataclass(frozen=True)
class _RaplDomain:
    path: Path
    name: str
    max_range_uj: int | None


class RaplCpuMeter(CpuEnergyMeter):
    """RAPL counters from the powercap tree: packages, and their ``dram`` sub-domains.

    Counter wrap-around is handled with ``max_energy_range_uj``. ``psys`` (whole platform) is
    kept in ``raw`` but not added to the total when package domains exist (it contains them).
    """

    source = "rapl"

    def __init__(self, root: Path = POWERCAP_ROOT) -> None:
        super().__init__()
        self.domains: list[_RaplDomain] = []
        for top in rapl_domains(root):
            # sub-domains are child folders in sysfs and also siblings under /sys/class/powercap
            subs = [*top.glob(f"{top.name}:*"), *root.glob(f"{top.name}:*")]
            seen: set[Path] = set()
            for path in [top, *sorted(subs)]:
                if path.resolve() in seen or not (path / "energy_uj").exists():
                    continue
                seen.add(path.resolve())
                name_file = path / "name"
                name = name_file.read_text().strip() if name_file.exists() else path.name
                label = f"{top.name}/{name}" if path != top else f"{path.name}/{name}"
                max_file = path / "max_energy_range_uj"
                max_uj = int(max_file.read_text()) if max_file.exists() else None
                self.domains.append(_RaplDomain(path, label, max_uj))
        self._start: list[int] = []

    def _read(self) -> list[int]:
        return [int((d.path / "energy_uj").read_text()) for d in self.domains]

    def start(self) -> None:
        self._start = self._read()

    def stop(self) -> CpuEnergyReading:
        try:
            end = self._read()
        except OSError as error:
            return CpuEnergyReading("unavailable", reason=f"RAPL read failed: {error}")
        raw: dict[str, float] = {}
        for domain, a, b in zip(self.domains, self._start, end):
            delta = b - a
            if delta < 0 and domain.max_range_uj:
                delta += domain.max_range_uj + 1
            raw[domain.name] = delta / 1e6
        pkg = [v for k, v in raw.items() if k.endswith("/package") or "/package-" in k]
        ram = [v for k, v in raw.items() if k.endswith("/dram")]
        psys = [v for k, v in raw.items() if k.endswith("/psys")]
        pkg_j = sum(pkg) if pkg else None
        ram_j = sum(ram) if ram else None
        total: float | None
        if pkg_j is not None:
            total = pkg_j + (ram_j or 0.0)
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
        self.perf = shutil.which(perf) or perf
        self._proc: subprocess.Popen[bytes] | None = None
        self._out: Path | None = None

    def start(self) -> None:
        import tempfile

        fd, name = tempfile.mkstemp(prefix="codedag-perf-", suffix=".csv")
        os.close(fd)
        self._out = Path(name)
        spec = ",".join(f"power/{e}/" for e in self.events)
        command = [self.perf, "stat", "-a", "-x", ",", "-e", spec, "-o", name]
        self._proc = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        from codedag.energy.process import REGISTRY

        REGISTRY.add(self._proc.pid)  # ended with the session's other groups, come what may

    def stop(self) -> CpuEnergyReading:
        import signal

        proc, out = self._proc, self._out
        if proc is None or out is None:
            return CpuEnergyReading("unavailable", reason="perf meter was not started")
        try:
            proc.send_signal(signal.SIGINT)  # perf prints its counts on SIGINT
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            return CpuEnergyReading("unavailable", reason="perf did not stop on SIGINT")
        finally:
            from codedag.energy.process import REGISTRY

            REGISTRY.discard(proc.pid)
            text = out.read_text() if out.exists() else ""
            out.unlink(missing_ok=True)
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


def parse_perf_csv(text: str) -> dict[str, float]:
    """``{event: joules}`` from ``perf stat -x ,`` output (uncounted events are skipped)."""
    values: dict[str, float] = {}
    for line in text.splitlines():
        fields = line.split(",")
        if len(fields) < 3 or line.startswith("#"):
            continue
        event = fields[2].strip().removeprefix("power/").removesuffix("/")
        try:
            values[event] = float(fields[0])
        except ValueError:
            continue
    return values


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
