"""Energy meters over a window on fake hardware: RAPL files, a fake perf, fake NVML."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fake_perf import wait_for, write_fake_perf

from codedag.devices.cpu_energy import CpuEnergyProbe
from codedag.devices.fake_nvml import FakeGPU, FakeNVML
from codedag.devices.gpus import EmptyGPUs, NvmlGPUs
from codedag.energy.gpu_meter import GpuEnergyMeter, trapezoid_j
from codedag.energy.meters import PerfCpuMeter, RaplCpuMeter, cpu_meter_factory
from codedag.energy.process import REGISTRY


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


def test_unavailable_factory_gives_the_reason() -> None:
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


def test_perf_meter_reads_a_window_and_its_process_is_registered(tmp_path: Path) -> None:
    perf, ready = write_fake_perf(tmp_path, {"energy-pkg": 6.0, "energy-ram": 1.5})
    meter = PerfCpuMeter(["energy-pkg", "energy-ram"], perf=str(perf))
    before = set(REGISTRY.live())
    meter.start()
    wait_for(ready)
    started = set(REGISTRY.live()) - before
    assert len(started) == 1  # ended with the session's other processes if it is interrupted
    reading = meter.stop()
    assert not started & set(REGISTRY.live())
    assert (reading.source, reading.pkg_j, reading.ram_j, reading.total_j) == (
        "perf",
        6.0,
        1.5,
        7.5,
    )
    assert reading.metrics()["cpu_energy_source"] == "perf"


def test_perf_meter_that_reads_zero_or_was_not_started_is_unavailable(tmp_path: Path) -> None:
    perf, ready = write_fake_perf(tmp_path, {"energy-psys": 0.0})
    meter = PerfCpuMeter(["energy-psys"], perf=str(perf))
    meter.start()
    wait_for(ready)
    reading = meter.stop()
    assert reading.total_j is None and "read 0 J" in (reading.reason or "")
    unstarted = PerfCpuMeter(["energy-pkg"], perf=str(perf)).stop()
    assert unstarted.source == "unavailable" and unstarted.reason == "perf meter was not started"
