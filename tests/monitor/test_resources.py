"""Resource sampling: container CPU against quotas on fake cgroup trees, fake NVML GPUs, sampler."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from codedag.devices.cgroups import CgroupReader, discover
from codedag.devices.fake_nvml import FakeGPU, FakeNVML
from codedag.devices.gpus import EmptyGPUs, NvmlGPUs
from codedag.monitor.probes import ResourceSample
from codedag.monitor.resources import ResourceMonitor
from codedag.monitor.system import SystemProbe

GIB = 2**30


class _Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _set_usage(reader: CgroupReader, usage_ns: int) -> None:
    if "cpuacct" in reader.paths.v1:
        (reader.paths.v1["cpuacct"] / "cpuacct.usage").write_text(f"{usage_ns}\n")
    else:
        assert reader.paths.v2 is not None
        (reader.paths.v2 / "cpu.stat").write_text(f"usage_usec {usage_ns // 1000}\n")


@pytest.mark.parametrize("layout", ["v1", "v2", "hybrid"])
@pytest.mark.parametrize(("quota", "cpus"), [((150000, 100000), 1.5), ((400000, 100000), 4.0)])
def test_container_cpu_is_percent_of_quota(
    cgroup_tree: Callable[..., Path], layout: str, quota: tuple[int, int], cpus: float
) -> None:
    proc = cgroup_tree(
        layout, cpu_quota=quota, memory_limit_bytes=4 * GIB, memory_usage_bytes=GIB,
        inactive_file_bytes=0,
    )  # fmt: skip
    reader = CgroupReader(discover(proc))
    clock = _Clock()
    probe = SystemProbe(cgroup=reader, gpus=EmptyGPUs("test"), in_container=True, monotonic=clock)
    assert probe.capacity_cpus == pytest.approx(cpus)
    assert "cgroup" in probe.cpu_source
    _set_usage(reader, 10_000_000_000)
    first = probe.sample()
    assert first.cpu_pct is None  # a rate needs two readings
    # 2 s of wall time, 1.2 CPU-seconds used -> 0.6 cores busy
    clock.t += 2.0
    _set_usage(reader, 11_200_000_000)
    second = probe.sample()
    assert second.cpu_pct == pytest.approx(100.0 * 0.6 / cpus)
    assert second.memory_pct == pytest.approx(25.0)
    assert second.memory_used_mb == pytest.approx(1024.0)
    assert probe.describe()["cpu_limit_cpus"] == pytest.approx(cpus)


def test_parent_quota_applies(cgroup_tree: Callable[..., Path]) -> None:
    proc = cgroup_tree("v2", cpu_quota=(400000, 100000), parent_cpu_quota=(100000, 100000))
    probe = SystemProbe(cgroup=CgroupReader(discover(proc)), gpus=EmptyGPUs(), in_container=True)
    assert probe.capacity_cpus == pytest.approx(1.0)


def test_outside_containers_without_quota_uses_host_cpu(cgroup_tree: Callable[..., Path]) -> None:
    proc = cgroup_tree("v2")
    probe = SystemProbe(cgroup=CgroupReader(discover(proc)), gpus=EmptyGPUs(), in_container=False)
    assert probe.cpu_source.startswith("host-wide")
    probe.sample()
    time.sleep(0.02)
    sample = probe.sample()
    assert sample.cpu_pct is not None and 0.0 <= sample.cpu_pct <= 100.0
    assert sample.process_memory_mb is not None and sample.process_memory_mb > 0


def test_two_fake_gpus_are_sampled() -> None:
    nvml = FakeNVML(
        [
            FakeGPU("A", utilization_pct=10.0, memory_used_mb=1000.0, power_w=100.0),
            FakeGPU("B", utilization_pct=90.0, memory_used_mb=5000.0, power_w=300.0),
        ]
    )
    probe = SystemProbe(gpus=NvmlGPUs(nvml), in_container=False)
    monitor = ResourceMonitor(0.05, probe=probe)
    for _ in range(3):
        monitor.sample_now()
    usage = monitor.usage()
    assert set(usage["gpu_usage"]) == {"0", "1"}
    assert [p[1] for p in usage["gpu_usage"]["1"]] == [90.0, 90.0, 90.0]
    assert usage["gpu_memory"]["0"][0][1] == pytest.approx(1000.0)
    assert usage["gpu_power_w"]["1"][0][1] == pytest.approx(300.0)
    assert usage["gpu_temperature_c"]["0"][0][1] == pytest.approx(45.0)
    names = [g["name"] for g in probe.describe()["gpus"]]
    assert names == ["A", "B"]
    probe.close()


class _CountingProbe:
    def __init__(self) -> None:
        self.calls = 0

    def sample(self) -> ResourceSample:
        self.calls += 1
        return ResourceSample(timestamp=time.time(), cpu_pct=float(self.calls), memory_pct=50.0)

    def describe(self) -> dict[str, str]:
        return {"cpu_source": "counting"}


def test_sampler_thread_samples_and_stops() -> None:
    probe = _CountingProbe()
    monitor = ResourceMonitor(0.01, probe=probe)
    monitor.start()
    deadline = time.monotonic() + 5.0
    while monitor.samples_taken < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    monitor.stop()
    assert not monitor.running
    taken = monitor.samples_taken
    assert taken >= 3
    time.sleep(0.03)
    assert monitor.samples_taken == taken  # nothing after stop
    summary = monitor.summary()
    assert summary["series"]["memory_usage"]["mean"] == pytest.approx(50.0)
    assert summary["sampler_cpu_s"] >= 0.0


def test_failing_probe_never_raises() -> None:
    class Broken:
        def sample(self) -> ResourceSample:
            raise RuntimeError("driver gone")

        def describe(self) -> dict[str, str]:
            return {}

    monitor = ResourceMonitor(0.01, probe=Broken())
    assert monitor.sample_now() is None
    assert monitor.errors == 1


def test_bad_interval_is_refused() -> None:
    from codedag.errors import ConfigError

    with pytest.raises(ConfigError, match="interval"):
        ResourceMonitor(0)


@pytest.mark.gpu
def test_real_gpu_is_sampled_through_nvml() -> None:
    import torch

    x = torch.randn(4096, 4096, device="cuda")
    probe = SystemProbe()
    assert probe.describe()["gpus"], "NVML should see the GPU torch uses"
    for _ in range(20):
        x = x @ x
        x = x / x.norm()
    sample = probe.sample()
    torch.cuda.synchronize()
    assert sample.gpus and sample.gpus[0].memory_used_mb and sample.gpus[0].memory_used_mb > 64
    probe.close()


def test_process_tree_includes_child_processes() -> None:
    import subprocess
    import sys

    from codedag.monitor.probes import ProcessTreeProbe

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        probe = ProcessTreeProbe()
        deadline = time.monotonic() + 10
        while child.pid not in [p.pid for p in probe._tree()] and time.monotonic() < deadline:
            time.sleep(0.01)
        assert child.pid in [p.pid for p in probe._tree()]
        alone = ProcessTreeProbe(include_children=False)
        assert probe.read(1.0)[1] > alone.read(1.0)[1]  # the child's RSS is counted
    finally:
        child.kill()
        child.wait()


def test_monitor_closes_nvml_when_the_mode_stops(tmp_path: Path) -> None:
    from codedag.monitor.experiment import ExperimentMonitor

    nvml = FakeNVML([FakeGPU("A")])
    monitor = ExperimentMonitor(
        "nv", tmp_path, probe_factory=lambda: SystemProbe(gpus=NvmlGPUs(nvml), in_container=False)
    )
    monitor.start_mode("baseline", resource_interval=60.0)
    monitor.stop_mode()
    data = monitor.to_dict()
    assert data["modes"]["baseline"]["resource_usage"]["gpu_usage"]["0"][0][1] == 50.0
    assert nvml.initialized == 0  # nvmlShutdown was called
