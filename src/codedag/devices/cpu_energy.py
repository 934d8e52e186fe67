"""CPU energy sources: which one can be read here and why the others cannot, and their readers.

RAPL through the powercap sysfs tree is preferred (root is needed since Linux 5.10, and it covers
a whole socket); ``perf`` power events come next. A source that exists but reads zero is reported
as unusable: a zero is not a measurement.

The readers are :func:`rapl_counters` with :func:`read_rapl_uj` and :func:`rapl_deltas_j` (the
powercap files, with counter wrap-around), and :class:`PerfEnergyCount` (``perf stat -a`` on the
power PMU's energy events over a window). The energy meters of an experiment
(:mod:`codedag.energy.meters`) turn their figures into readings.
"""

from __future__ import annotations

import os
import shutil
import subprocess
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
# Readers: the counters behind a window's energy.


@dataclass(frozen=True)
class RaplCounter:
    """One RAPL energy counter: its folder, a ``<package>/<domain>`` label and its wrap range."""

    path: Path
    name: str
    max_range_uj: int | None


def rapl_counters(root: Path = POWERCAP_ROOT) -> list[RaplCounter]:
    """The counters of every RAPL package and of its sub-domains (``core``, ``dram`` ...)."""
    counters: list[RaplCounter] = []
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
            counters.append(RaplCounter(path, label, max_uj))
    return counters


def read_rapl_uj(counters: list[RaplCounter]) -> list[int]:
    """The current value of each counter in microjoules.

    Raises:
        OSError: a counter file cannot be read.
    """
    return [int((c.path / "energy_uj").read_text()) for c in counters]


def rapl_deltas_j(
    counters: list[RaplCounter], start_uj: list[int], end_uj: list[int]
) -> dict[str, float]:
    """Joules per counter label between two reads; a counter that wrapped is unwrapped."""
    deltas: dict[str, float] = {}
    for counter, a, b in zip(counters, start_uj, end_uj):
        delta = b - a
        if delta < 0 and counter.max_range_uj:
            delta += counter.max_range_uj + 1
        deltas[counter.name] = delta / 1e6
    return deltas


class PerfEnergyCount:
    """``perf stat -a`` on the power PMU's energy ``events``, counting from start to stop.

    Args:
        events: event names of :func:`perf_power_events` (``energy-pkg`` ...).
        perf: the perf program.
    """

    def __init__(self, events: list[str], perf: str = "perf") -> None:
        self.events = events
        self.perf = shutil.which(perf) or perf
        self._proc: subprocess.Popen[bytes] | None = None
        self._out: Path | None = None

    def start(self) -> int:
        """Start perf in its own session; returns its process id."""
        import tempfile

        fd, name = tempfile.mkstemp(prefix="codedag-perf-", suffix=".csv")
        os.close(fd)
        self._out = Path(name)
        spec = ",".join(f"power/{e}/" for e in self.events)
        command = [self.perf, "stat", "-a", "-x", ",", "-e", spec, "-o", name]
        self._proc = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        return self._proc.pid

    def stop(self) -> str:
        """Stop perf (SIGINT makes it print its counts) and return what it wrote.

        Raises:
            DeviceError: perf was not started, or did not stop on SIGINT.
        """
        import signal

        from codedag.errors import DeviceError

        proc, out = self._proc, self._out
        if proc is None or out is None:
            raise DeviceError("perf meter was not started")
        try:
            proc.send_signal(signal.SIGINT)  # perf prints its counts on SIGINT
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise DeviceError("perf did not stop on SIGINT") from None
        finally:
            text = out.read_text() if out.exists() else ""
            out.unlink(missing_ok=True)
        return text


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
