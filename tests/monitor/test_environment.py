"""The run's environment description."""

from __future__ import annotations

import os

from codedag.monitor.environment import collect_environment
from codedag.version import __version__


def test_environment_names_this_process_and_reads_limits_without_a_probe() -> None:
    env = collect_environment()
    assert env["pid"] == os.getpid()
    assert env["codedag"] == __version__
    assert env["cpu_count"] >= 1
    assert env["cpu_capacity_cpus"] > 0
    assert "cgroup_version" in env


def test_a_probe_description_is_merged_and_replaces_the_direct_reading() -> None:
    env = collect_environment({"cpu_capacity_cpus": 1.5, "container": "docker"})
    assert env["cpu_capacity_cpus"] == 1.5
    assert env["container"] == "docker"
    assert "cgroup_version" not in env  # limits were not read again
