"""CPU energy probes and the governor on fake sysfs trees."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from codedag.energy.governor import governor_status
from codedag.energy.meters import perf_power_events, probe_cpu_energy, probe_rapl


def make_rapl(root: Path, readable: bool = True) -> Path:
    domain = root / "intel-rapl:0"
    domain.mkdir(parents=True)
    (domain / "name").write_text("package-0\n")
    (domain / "energy_uj").write_text("123456\n")
    (root / "intel-rapl:0:0").mkdir()  # a subdomain: not counted as a package
    if not readable:
        (domain / "energy_uj").chmod(0)
    return root


def test_rapl_missing(tmp_path: Path) -> None:
    ok, detail, _ = probe_rapl(tmp_path / "powercap")
    assert not ok and "does not exist" in detail


def test_rapl_readable(tmp_path: Path) -> None:
    ok, detail, names = probe_rapl(make_rapl(tmp_path / "powercap"))
    assert ok and names == ["package-0"] and "package-0" in detail
    probe = probe_cpu_energy(tmp_path / "powercap", tmp_path / "noevents")
    assert probe.source == "rapl"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files regardless of their mode")
def test_rapl_unreadable_without_root(tmp_path: Path) -> None:
    ok, detail, _ = probe_rapl(make_rapl(tmp_path / "powercap", readable=False))
    assert not ok and "root" in detail


def test_no_source_reports_both_reasons(tmp_path: Path) -> None:
    probe = probe_cpu_energy(tmp_path / "powercap", tmp_path / "events")
    assert probe.source is None
    assert "RAPL" in probe.detail and "no perf power events" in probe.detail


def test_perf_events_are_listed(tmp_path: Path) -> None:
    events = tmp_path / "events"
    events.mkdir()
    for name in ("energy-pkg", "energy-pkg.scale", "energy-pkg.unit", "energy-psys"):
        (events / name).write_text("event=0x02\n")
    assert perf_power_events(events) == ["energy-pkg", "energy-psys"]


def test_this_machine_probe_is_consistent() -> None:
    probe = probe_cpu_energy()
    if not Path("/sys/class/powercap").exists():
        assert probe.source != "rapl" and "does not exist" in probe.rapl
    if probe.source is None:
        assert probe.detail.startswith("CPU energy unavailable")


def test_governor_missing_cpufreq(tmp_path: Path) -> None:
    (tmp_path / "cpu0").mkdir()
    status = governor_status(tmp_path)
    assert not status.settable and status.in_effect == "unavailable"
    assert "no cpufreq" in status.detail


def test_governor_read(tmp_path: Path) -> None:
    for cpu, governor in (("cpu0", "powersave"), ("cpu1", "performance")):
        folder = tmp_path / cpu / "cpufreq"
        folder.mkdir(parents=True)
        (folder / "scaling_governor").write_text(governor + "\n")
        (folder / "scaling_available_governors").write_text("performance powersave\n")
    status = governor_status(tmp_path)
    assert status.current == ["powersave", "performance"]
    assert status.available == ["performance", "powersave"]
    assert status.in_effect == "mixed(performance,powersave)"
