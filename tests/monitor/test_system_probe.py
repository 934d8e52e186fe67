"""SystemProbe on fake cgroup trees (v1, v2, hybrid, quotas) and a fake NVML with two GPUs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from codedag.devices.cgroups import CgroupReader, discover
from codedag.devices.cpus import usable_cpu_count
from codedag.devices.fake_nvml import FakeGPU, FakeNVML
from codedag.devices.gpus import EmptyGPUs, NvmlGPUs
from codedag.monitor.experiment import ExperimentMonitor
from codedag.monitor.resources import ResourceMonitor
from codedag.monitor.system import SystemProbe

MIB = 2**20
GROUP = "docker/abc123"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def set_usage(proc_self: Path, layout: str, usage_ns: int) -> None:
    """Advance the cgroup's CPU usage counter where each layout keeps it."""
    cg = proc_self.parent.parent / "sys" / "fs" / "cgroup"
    if layout == "v2":
        (cg / GROUP / "cpu.stat").write_text(
            f"usage_usec {usage_ns // 1000}\nuser_usec 1\nsystem_usec 1\n"
        )
    else:  # v1 and hybrid: cpuacct (the hybrid's unified cpu.stat must be ignored)
        (cg / "cpuacct" / GROUP / "cpuacct.usage").write_text(f"{usage_ns}\n")


def probe_on(proc_self: Path, clock: Clock, in_container: bool = True) -> SystemProbe:
    return SystemProbe(
        cgroup=CgroupReader(discover(proc_self)),
        gpus=EmptyGPUs("test"),
        in_container=in_container,
        monotonic=clock,
    )


@pytest.mark.parametrize("layout", ["v1", "v2", "hybrid"])
def test_container_cpu_is_percent_of_the_quota(
    cgroup_tree: Callable[..., Path], layout: str
) -> None:
    proc = cgroup_tree(
        layout,
        cpu_quota=(150000, 100000),
        cpu_usage_ns=5_000_000_000,
        memory_limit_bytes=1024 * MIB,
        memory_usage_bytes=300 * MIB,
        inactive_file_bytes=100 * MIB,
    )
    clock = Clock()
    probe = probe_on(proc, clock)
    if layout == "v2":
        assert probe.cpu_limit_cpus == 1.5 and probe.capacity_cpus == 1.5
    else:
        assert probe.cpu_limit_cpus == 1.5
    assert f"cgroup {layout}" in probe.cpu_source
    first = probe.sample()
    assert first.cpu_pct is None  # a rate needs two readings
    clock.now += 2.0
    set_usage(proc, layout, 5_000_000_000 + 1_500_000_000)  # 1.5 CPU-s in 2 s = 0.75 CPUs
    second = probe.sample()
    assert second.cpu_pct == pytest.approx(50.0)  # 0.75 of a 1.5-CPU quota
    clock.now += 1.0
    set_usage(proc, layout, 6_500_000_000 + 1_500_000_000)  # 1.5 CPUs busy: the whole quota
    assert probe.sample().cpu_pct == pytest.approx(100.0)
    # memory: (usage - inactive file) / limit = 200 MiB of 1 GiB
    assert second.memory_used_mb == pytest.approx(200.0)
    assert second.memory_pct == pytest.approx(100.0 * 200 / 1024)
    described = probe.describe()
    assert described["cpu_capacity_cpus"] == 1.5 and described["memory_limit_mb"] == 1024.0
    assert described["cgroup_version"] == layout


@pytest.mark.parametrize("layout", ["v1", "v2"])
def test_a_smaller_parent_quota_is_the_capacity(
    cgroup_tree: Callable[..., Path], layout: str
) -> None:
    proc = cgroup_tree(layout, cpu_quota=(400000, 100000), parent_cpu_quota=(100000, 100000))
    clock = Clock()
    probe = probe_on(proc, clock)
    assert probe.capacity_cpus == 1.0
    probe.sample()
    clock.now += 1.0
    set_usage(proc, layout, 5_000_000_000 + 250_000_000)
    assert probe.sample().cpu_pct == pytest.approx(25.0)


def test_container_without_quota_uses_the_usable_cpus(cgroup_tree: Callable[..., Path]) -> None:
    proc = cgroup_tree("v2")
    clock = Clock()
    probe = probe_on(proc, clock)
    assert probe.cpu_limit_cpus is None and probe.capacity_cpus == usable_cpu_count()
    probe.sample()
    clock.now += 1.0
    set_usage(proc, "v2", 5_000_000_000 + 500_000_000)
    assert probe.sample().cpu_pct == pytest.approx(100.0 * 0.5 / usable_cpu_count())


def test_outside_a_container_without_quota_cpu_is_host_wide(
    cgroup_tree: Callable[..., Path],
) -> None:
    probe = probe_on(cgroup_tree("v2"), Clock(), in_container=False)
    assert "host-wide" in probe.cpu_source and "host-wide" in probe.memory_source
    probe.sample()
    sample = probe.sample()
    assert sample.memory_pct is not None and 0 < sample.memory_pct <= 100
    assert sample.process_memory_mb is not None and sample.process_memory_mb > 1


def two_gpus() -> FakeNVML:
    return FakeNVML(
        [
            FakeGPU("NVIDIA H100", memory_used_mb=2048, utilization_pct=90, power_w=300),
            FakeGPU("NVIDIA H100", memory_used_mb=512, utilization_pct=10, temperature_c=61),
        ]
    )


def test_two_fake_gpus_give_series_per_gpu(cgroup_tree: Callable[..., Path]) -> None:
    nvml = two_gpus()
    probe = SystemProbe(
        cgroup=CgroupReader(discover(cgroup_tree("v2"))),
        gpus=NvmlGPUs(nvml, environ={}),
        in_container=True,
    )
    monitor = ResourceMonitor(60.0, probe=probe)
    monitor.sample_now()
    nvml.gpus[0].utilization_pct = 70
    nvml.gpus[1].memory_used_mb = 1536
    monitor.sample_now()
    usage = monitor.usage()
    assert set(usage["gpu_usage"]) == {"0", "1"}
    assert [p[1] for p in usage["gpu_usage"]["0"]] == [90.0, 70.0]
    assert [p[1] for p in usage["gpu_usage"]["1"]] == [10.0, 10.0]
    assert [p[1] for p in usage["gpu_memory"]["1"]] == [512.0, 1536.0]
    assert [p[1] for p in usage["gpu_power_w"]["0"]] == [300.0, 300.0]
    assert usage["gpu_temperature_c"]["1"][0][1] == 61.0
    assert monitor.summary()["series"]["gpu_usage/0"]["mean"] == 80.0
    assert [g["name"] for g in probe.describe()["gpus"]] == ["NVIDIA H100", "NVIDIA H100"]
    probe.close()
    assert nvml.initialized == 0


def test_monitor_json_carries_both_gpus(tmp_path: Path, cgroup_tree: Callable[..., Path]) -> None:
    tree = cgroup_tree("v1", cpu_quota=(200000, 100000))

    def factory() -> SystemProbe:
        return SystemProbe(
            cgroup=CgroupReader(discover(tree)),
            gpus=NvmlGPUs(two_gpus(), environ={}),
            in_container=True,
        )

    monitor = ExperimentMonitor("gpus", run_dir=tmp_path, probe_factory=factory)
    monitor.start_mode("baseline", resource_interval=30.0)
    monitor.start_batch()
    monitor.end_batch()
    monitor.stop_mode()  # stop() takes the closing sample
    data = monitor.to_dict()
    usage = data["modes"]["baseline"]["resource_usage"]
    assert usage["gpu_usage"]["0"][0][1] == 90.0 and usage["gpu_usage"]["1"][0][1] == 10.0
    assert usage["gpu_memory"]["0"][0][1] == 2048.0
    assert data["environment"]["cpu_limit_cpus"] == 2.0
    assert len(data["environment"]["gpus"]) == 2
