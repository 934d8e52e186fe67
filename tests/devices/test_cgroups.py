"""cgroup discovery and arithmetic on fake v1, v2 and hybrid trees."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from codedag.devices.cgroups import CgroupReader, count_cpu_list, discover

GIB = 2**30


@pytest.mark.parametrize("layout", ["v1", "v2", "hybrid"])
def test_layout_is_recognized(cgroup_tree: Callable[..., Path], layout: str) -> None:
    reader = CgroupReader(discover(cgroup_tree(layout)))
    assert reader.version == layout


@pytest.mark.parametrize("layout", ["v1", "v2", "hybrid"])
def test_no_quota_and_unlimited_memory_mean_none(
    cgroup_tree: Callable[..., Path], layout: str
) -> None:
    reader = CgroupReader(discover(cgroup_tree(layout)))
    cpu = reader.cpu_limit()
    memory = reader.memory_limit()
    assert cpu.cpus is None and ("-1" in cpu.source or "max" in cpu.source)
    assert memory.limit_bytes is None
    assert "unlimited" in memory.source or "max" in memory.source


@pytest.mark.parametrize("layout", ["v1", "v2", "hybrid"])
def test_quota_and_limit(cgroup_tree: Callable[..., Path], layout: str) -> None:
    proc = cgroup_tree(layout, cpu_quota=(150000, 100000), memory_limit_bytes=4 * GIB)
    reader = CgroupReader(discover(proc))
    assert reader.cpu_limit().cpus == pytest.approx(1.5)
    assert reader.memory_limit().limit_bytes == 4 * GIB


@pytest.mark.parametrize("layout", ["v1", "v2"])
def test_parent_quota_applies_when_smaller(cgroup_tree: Callable[..., Path], layout: str) -> None:
    proc = cgroup_tree(layout, cpu_quota=(400000, 100000), parent_cpu_quota=(50000, 100000))
    limit = CgroupReader(discover(proc)).cpu_limit()
    assert limit.cpus == pytest.approx(0.5)
    assert "abc123" not in limit.source  # found on the parent, not on the group itself


@pytest.mark.parametrize("layout", ["v1", "v2", "hybrid"])
def test_usage_counters(cgroup_tree: Callable[..., Path], layout: str) -> None:
    proc = cgroup_tree(
        layout,
        cpu_usage_ns=7_000_000_000,
        memory_usage_bytes=500 * 2**20,
        inactive_file_bytes=200 * 2**20,
    )
    reader = CgroupReader(discover(proc))
    assert reader.cpu_usage_ns() == 7_000_000_000  # v1 ns; v2 usage_usec * 1000
    assert reader.memory_usage_bytes() == 300 * 2**20  # page cache not counted
    assert reader.cpuset_cpus() == 4


def test_hybrid_reads_v1_controllers_not_the_empty_v2(cgroup_tree: Callable[..., Path]) -> None:
    proc = cgroup_tree("hybrid", cpu_usage_ns=123_000)
    reader = CgroupReader(discover(proc))
    assert reader.paths.v2 is not None and reader.paths.v2.name == "unified"
    assert reader.cpu_usage_ns() == 123_000  # cpuacct.usage, not unified/cpu.stat


@pytest.mark.parametrize("layout", ["v1", "v2", "hybrid"])
def test_missing_files_give_none_not_errors(cgroup_tree: Callable[..., Path], layout: str) -> None:
    reader = CgroupReader(discover(cgroup_tree(layout, files=False)))
    assert reader.cpu_limit().cpus is None
    assert reader.memory_limit().limit_bytes is None
    assert reader.cpu_usage_ns() is None
    assert reader.memory_usage_bytes() is None


def test_no_cgroup_at_all(tmp_path: Path) -> None:
    (tmp_path / "self").mkdir()
    reader = CgroupReader(discover(tmp_path / "self"))
    assert reader.version == "none"
    assert reader.cpu_limit().source == "no cgroup mounted"
    assert reader.cpu_usage_ns() is None


def test_group_outside_mount_root_falls_back_to_mount(tmp_path: Path) -> None:
    """With a cgroup namespace the membership path may not exist under the mount."""
    proc = tmp_path / "proc" / "self"
    proc.mkdir(parents=True)
    mount = tmp_path / "cg"
    mount.mkdir()
    (mount / "cpu.max").write_text("200000 100000\n")
    (proc / "cgroup").write_text("0::/some/host/path\n")
    (proc / "mountinfo").write_text(f"40 20 0:40 / {mount} rw - cgroup2 cgroup2 rw\n")
    assert CgroupReader(discover(proc)).cpu_limit().cpus == pytest.approx(2.0)


@pytest.mark.parametrize(
    ("text", "count"), [("0-3", 4), ("0,2,4", 3), ("0-1,8-9,12", 5), ("5", 1), ("", 0)]
)
def test_count_cpu_list(text: str, count: int) -> None:
    assert count_cpu_list(text) == count


def test_this_machine_reads_without_errors() -> None:
    reader = CgroupReader()
    reader.cpu_limit()
    reader.memory_limit()
    usage = reader.cpu_usage_ns()
    assert usage is None or usage > 0
