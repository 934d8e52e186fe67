"""Energy meters on fake hardware: RAPL files, perf output, fake NVML; the governor on fake sysfs."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from codedag.devices.fake_nvml import FakeGPU, FakeNVML
from codedag.devices.gpus import EmptyGPUs, NvmlGPUs
from codedag.energy.governor import UNAVAILABLE_NO_CPUFREQ, governor_applied
from codedag.energy.gpu_meter import GpuEnergyMeter, trapezoid_j
from codedag.energy.meters import (
    CpuEnergyProbe,
    RaplCpuMeter,
    cpu_meter_factory,
    parse_perf_csv,
)
from codedag.errors import ConfigError


def fake_rapl(root: Path) -> dict[str, Path]:
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


def test_rapl_meter_handles_wraparound_and_dram(tmp_path: Path) -> None:
    files = fake_rapl(tmp_path)
    # nested layout as in sysfs: sub-domains live inside the package folder
    meter = RaplCpuMeter(tmp_path)
    meter.start()
    files["package-0"].write_text("1999999\n")  # wrapped: 1e9 - 999e6 + 1 + 1999999 uJ
    files["dram"].write_text("7000000\n")
    reading = meter.stop()
    assert reading.source == "rapl" and reading.reason is None
    assert reading.pkg_j == pytest.approx(3.000001, rel=1e-6)
    assert reading.ram_j == pytest.approx(2.0)
    assert reading.total_j == pytest.approx(5.000001, rel=1e-6)


def test_rapl_meter_that_does_not_advance_is_unavailable(tmp_path: Path) -> None:
    fake_rapl(tmp_path)
    meter = RaplCpuMeter(tmp_path)
    meter.start()
    reading = meter.stop()
    assert reading.total_j is None and "did not advance" in reading.reason
    assert reading.metrics()["cpu_energy_source"] == "unavailable"


def test_perf_output_parsing_and_unavailable_factory() -> None:
    text = "# started on ...\n\n12.34,Joules,power/energy-pkg/,1000,100.00,,\n0.00,Joules,power/energy-psys/,1000,100.00,,\n"
    assert parse_perf_csv(text) == {"energy-pkg": 12.34, "energy-psys": 0.0}
    probe = CpuEnergyProbe(
        None, "CPU energy unavailable: RAPL: none; perf: reads 0 J", "none", "0 J"
    )
    reading = cpu_meter_factory(probe)().stop()
    assert reading.total_j is None and reading.reason == "RAPL: none; perf: reads 0 J"


def test_gpu_meter_counter_and_trapezoid_on_real_timestamps() -> None:
    assert trapezoid_j([0.0, 1.0, 1.5, 4.0], [100, 200, 200, 100]) == pytest.approx(150 + 100 + 375)
    nvml = FakeNVML([FakeGPU(power_w=300.0), FakeGPU(power_w=100.0, energy_supported=False)])
    gpus = NvmlGPUs(nvml, environ={})
    meter = GpuEnergyMeter(gpus, [0, 1], interval_s=0.01)
    meter.start()
    time.sleep(0.05)
    nvml.advance(2.0)
    reading = meter.stop()
    metrics = reading.metrics()
    assert reading.counter_j == {0: pytest.approx(600.0), 1: None}
    assert metrics["gpu_energy_total_joules"] is None  # GPU 1 has no counter: no total
    assert "not supported on GPU(s) 1" in metrics["gpu_energy_unavailable_reason"]
    assert metrics["gpu_power_max_watts"] == 300.0 and metrics["gpu_power_min_watts"] == 100.0
    # integrated power uses the sample timestamps, which span the real window
    times = [t for t, s in reading.samples if s.index == 0]
    assert reading.integrated_j[0] == pytest.approx(300.0 * (times[-1] - times[0]))
    single = GpuEnergyMeter(gpus, [0], interval_s=0.01)
    single.start()
    nvml.advance(1.0)
    assert single.stop().metrics()["gpu_energy_total_joules"] == pytest.approx(300.0)
    gpus.close()
    empty = GpuEnergyMeter(EmptyGPUs("no NVML"), None)
    empty.start()
    assert empty.stop().metrics()["gpu_energy_unavailable_reason"] == "no NVML"


def fake_cpufreq(root: Path, governor: str = "powersave") -> list[Path]:
    files = []
    for cpu in ("cpu0", "cpu1"):
        folder = root / cpu / "cpufreq"
        folder.mkdir(parents=True)
        (folder / "scaling_governor").write_text(governor + "\n")
        (folder / "scaling_available_governors").write_text("performance powersave\n")
        files.append(folder / "scaling_governor")
    return files


def test_governor_is_set_and_restored(tmp_path: Path) -> None:
    files = fake_cpufreq(tmp_path)
    with pytest.raises(RuntimeError), governor_applied("performance", tmp_path) as governor:
        assert governor == "performance"
        assert all(f.read_text().strip() == "performance" for f in files)
        raise RuntimeError("an error inside the session")
    assert all(f.read_text().strip() == "powersave" for f in files)
    with (
        pytest.raises(ConfigError, match="available: performance, powersave"),
        governor_applied("turbo", tmp_path),
    ):
        pass


def test_governor_without_cpufreq_is_recorded_as_unavailable(tmp_path: Path) -> None:
    with governor_applied("performance", tmp_path) as governor:
        assert governor == UNAVAILABLE_NO_CPUFREQ == "unavailable: no cpufreq"
