"""CPU energy sources on fake sysfs trees: RAPL probes and counters, perf events and counts."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from fake_perf import wait_for, write_fake_perf

from codedag.devices.cpu_energy import (
    PerfEnergyCount,
    parse_perf_csv,
    perf_power_events,
    probe_cpu_energy,
    probe_rapl,
    rapl_counters,
    rapl_deltas_j,
    read_rapl_uj,
)
from codedag.errors import DeviceError


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


def nested_rapl(root: Path) -> dict[str, Path]:
    """A package with a core and a dram sub-domain, nested as in sysfs."""
    files = {}
    for path, name, value, max_uj in (
        ("intel-rapl:0", "package-0", 999_000_000, 1_000_000_000),
        ("intel-rapl:0/intel-rapl:0:0", "core", 10, None),
        ("intel-rapl:0/intel-rapl:0:2", "dram", 5_000_000, 1_000_000_000),
    ):
        folder = root / path
        folder.mkdir(parents=True)
        (folder / "name").write_text(name + "\n")
        (folder / "energy_uj").write_text(f"{value}\n")
        if max_uj:
            (folder / "max_energy_range_uj").write_text(f"{max_uj}\n")
        files[name] = folder / "energy_uj"
    return files


def test_rapl_counters_are_labelled_read_and_unwrapped(tmp_path: Path) -> None:
    files = nested_rapl(tmp_path)
    counters = rapl_counters(tmp_path)
    assert [c.name for c in counters] == [
        "intel-rapl:0/package-0",
        "intel-rapl:0/core",
        "intel-rapl:0/dram",
    ]
    assert [c.max_range_uj for c in counters] == [1_000_000_000, None, 1_000_000_000]
    start = read_rapl_uj(counters)
    assert start == [999_000_000, 10, 5_000_000]
    files["package-0"].write_text("1999999\n")  # wrapped past 1e9
    files["dram"].write_text("7000000\n")
    deltas = rapl_deltas_j(counters, start, read_rapl_uj(counters))
    assert deltas["intel-rapl:0/package-0"] == pytest.approx(3.000001, rel=1e-6)
    assert deltas["intel-rapl:0/dram"] == pytest.approx(2.0)
    assert deltas["intel-rapl:0/core"] == 0.0
    files["core"].unlink()
    with pytest.raises(OSError):
        read_rapl_uj(counters)


def test_sibling_sub_domains_are_counted_once(tmp_path: Path) -> None:
    make_rapl(tmp_path)  # the sub-domain is a sibling, as under /sys/class/powercap
    (tmp_path / "intel-rapl:0:0" / "energy_uj").write_text("5\n")
    (tmp_path / "intel-rapl:0:0" / "name").write_text("core\n")
    assert [c.name for c in rapl_counters(tmp_path)] == [
        "intel-rapl:0/package-0",
        "intel-rapl:0/core",
    ]
    assert rapl_counters(tmp_path / "missing") == []


def test_perf_output_is_parsed_into_joules_per_event() -> None:
    text = (
        "# started on ...\n\n"
        "12.34,Joules,power/energy-pkg/,1000,100.00,,\n"
        "0.00,Joules,power/energy-psys/,1000,100.00,,\n"
        "<not counted>,Joules,power/energy-ram/,0,100.00,,\n"
    )
    assert parse_perf_csv(text) == {"energy-pkg": 12.34, "energy-psys": 0.0}


def test_a_perf_count_runs_until_stopped_and_returns_its_output(tmp_path: Path) -> None:
    perf, ready = write_fake_perf(tmp_path, {"energy-pkg": 4.5})
    outputs = set(Path(tempfile.gettempdir()).glob("codedag-perf-*.csv"))
    count = PerfEnergyCount(["energy-pkg", "energy-ram"], perf=str(perf))
    pid = count.start()
    assert pid > 0
    wait_for(ready)
    text = count.stop()
    assert parse_perf_csv(text) == {"energy-pkg": 4.5}
    assert set(Path(tempfile.gettempdir()).glob("codedag-perf-*.csv")) == outputs  # removed
    with pytest.raises(DeviceError, match="not started"):
        PerfEnergyCount(["energy-pkg"], perf=str(perf)).stop()
