"""codedag doctor: checks on fakes, and on this machine through the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import psutil

from codedag.devices.cgroups import CgroupReader, discover
from codedag.devices.fake_nvml import FakeGPU, FakeNVML
from codedag.doctor import DoctorReport, check_cpu, check_gpus, run_doctor


def checks_by_name(report: DoctorReport) -> dict[str, tuple[str, str, str]]:
    return {c.name: (c.status, c.value, c.detail) for c in report.checks}


def test_fake_gpus_are_reported_with_energy_counter_state() -> None:
    report = DoctorReport()
    nvml = FakeNVML(
        [FakeGPU("NVIDIA H100 80GB HBM3"), FakeGPU("NVIDIA A10", energy_supported=False)]
    )
    check_gpus(report, nvml)
    checks = checks_by_name(report)
    assert checks["GPU 0"][0] == "ok" and "H100" in checks["GPU 0"][1]
    assert "driver 550.54.15" in checks["GPU 0"][1]
    assert checks["GPU 0 energy counter"][0] == "ok"
    assert checks["GPU 1 energy counter"][0] == "warn"
    assert report.facts["gpus"]["count"] == 2


def test_no_gpu_says_what_is_disabled() -> None:
    report = DoctorReport()
    check_gpus(report, FakeNVML(fail_init=True))
    status, value, detail = checks_by_name(report)["GPUs"]
    assert (status, value) == ("missing", "none")
    assert "unavailable" in detail


def test_container_limits_from_a_fake_v2_tree(cgroup_tree: Callable[..., Path]) -> None:
    proc = cgroup_tree("v2", cpu_quota=(200000, 100000), memory_limit_bytes=8 * 2**30)
    report = DoctorReport()
    check_cpu(report, CgroupReader(discover(proc)))
    checks = checks_by_name(report)
    assert checks["container CPU limit"][1] == "2 CPUs"
    assert checks["container memory limit"][1] == "8.00 GiB"
    assert report.facts["cpu"]["cgroup_version"] == "v2"
    assert report.facts["cpu"]["cgroup_memory_limit_bytes"] == 8 * 2**30


def test_hybrid_without_limits(cgroup_tree: Callable[..., Path]) -> None:
    report = DoctorReport()
    check_cpu(report, CgroupReader(discover(cgroup_tree("hybrid"))))
    checks = checks_by_name(report)
    assert checks["cgroup layout"][1].startswith("hybrid (v1 controllers, v2 at")
    assert checks["container CPU limit"][1] == "none"
    assert checks["container memory limit"][1] == "none"


def test_real_report_is_consistent_with_this_machine() -> None:
    report = run_doctor()
    facts = report.facts
    assert facts["cpu"]["logical_cpus"] == psutil.cpu_count()
    reader = CgroupReader()
    assert facts["cpu"]["cgroup_version"] == reader.version
    assert facts["cpu"]["cgroup_cpu_limit_cpus"] == reader.cpu_limit().cpus
    if not Path("/sys/class/powercap").exists():
        assert facts["energy"]["cpu_source"] != "rapl"
    import torch

    assert facts["torch"]["cuda_available"] == torch.cuda.is_available()
    if not torch.cuda.is_available():
        assert checks_by_name(report)["CUDA"][0] == "missing"
    statuses = {c.status for c in report.checks}
    assert statuses <= {"ok", "warn", "missing", "info"}


def test_cli_json_is_machine_readable() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "codedag", "doctor", "--json"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    data = json.loads(out.stdout)
    assert data["schema_version"] == 1
    assert {"python", "packages", "torch", "gpus", "cpu", "energy", "tools", "extras"} <= set(
        data["facts"]
    )
    names = {c["name"] for c in data["checks"]}
    assert {"torch", "container CPU limit", "RAPL (powercap)", "graphviz dot"} <= names


def test_cli_table_escapes_brackets() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "codedag", "doctor"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert "[audio] librosa" in out.stdout
    assert "missing piece(s)" in out.stdout
