"""The environment check behind ``codedag doctor``: plain data, rendered by the CLI.

Every check says what it found and, when something is missing, what that disables and how to get
it. Nothing here changes the machine; probes that cost time (``perf stat``, ``docker info``) are
bounded by short timeouts.
"""

from __future__ import annotations

import importlib.util
import platform
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from codedag.backends.derived import SequenceView
from codedag.backends.libraries import requirements
from codedag.version import __version__, distribution_version

SCHEMA_VERSION = 1

OK, WARN, MISSING, INFO = "ok", "warn", "missing", "info"

# distribution name, import name, what it is for: codedag's own dependencies
_CORE = (
    ("numpy", "numpy", "arrays"),
    ("torch", "torch", "GPU backends and training"),
    ("rustworkx", "rustworkx", "graph algorithms"),
    ("psutil", "psutil", "process CPU and memory"),
    ("nvidia-ml-py", "pynvml", "GPU monitoring and energy (NVML)"),
    ("rich", "rich", "terminal output"),
    ("pydantic", "pydantic", "configuration validation"),
    ("matplotlib", "matplotlib", "plots"),
)

# extra name, import name, what it enables, how to get it: extras besides the libraries'
_EXTRAS = (
    ("ray", "ray", "running experiments across machines", "pip install 'codedag[ray]'"),
    (
        "bench",
        "pymetis",
        "METIS partition comparison in benchmarks",
        "pip install 'codedag[bench]'",
    ),
    ("bench", "kornia", "the kornia-vs-cv2 benchmark", "pip install 'codedag[bench]'"),
    (
        "tensorflow",
        "tensorflow",
        "tf.data pipelines (experiment --framework tensorflow)",
        "pip install 'codedag[tensorflow]'",
    ),
)


def _core_packages() -> tuple[tuple[str, str, str], ...]:
    libraries = ((r.distribution, r.module, r.purpose) for r in requirements() if not r.extra)
    return (*_CORE, *libraries)


def _optional_extras() -> tuple[tuple[str, str, str, str], ...]:
    libraries = (
        (r.extra, r.module, r.purpose, f"pip install 'codedag[{r.extra}]'")
        for r in requirements()
        if r.extra
    )
    return (*libraries, *_EXTRAS)


CORE_PACKAGES: Sequence[tuple[str, str, str]] = SequenceView(_core_packages)
"""(distribution, import name, what it is for) of codedag's dependencies and of the libraries
its backends serve (declared by their packages)."""

OPTIONAL_EXTRAS: Sequence[tuple[str, str, str, str]] = SequenceView(_optional_extras)
"""(extra, import name, what it enables, how to get it): the libraries' extras, then the others."""


@dataclass
class Check:
    """One line of the report."""

    section: str
    name: str
    status: str
    value: str
    detail: str = ""


@dataclass
class DoctorReport:
    """All checks plus structured facts for scripts (``--json``)."""

    checks: list[Check] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)

    def add(self, section: str, name: str, status: str, value: str, detail: str = "") -> None:
        """Append a check."""
        self.checks.append(Check(section, name, status, value, detail))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "schema_version": SCHEMA_VERSION,
            "codedag_version": __version__,
            "checks": [asdict(c) for c in self.checks],
            "facts": self.facts,
        }


def _run(command: list[str], timeout_s: float = 5.0) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired):
        return None


def check_python(report: DoctorReport) -> None:
    """Interpreter and codedag versions."""
    report.add("python", "python", OK, f"{platform.python_version()} ({sys.executable})")
    report.add("python", "codedag", OK, __version__)
    report.facts["python"] = {"version": platform.python_version(), "executable": sys.executable}
    packages = {}
    for distribution, module, purpose in CORE_PACKAGES:
        version = distribution_version(distribution)
        packages[distribution] = version
        if version is None and importlib.util.find_spec(module) is not None:
            version = "installed (no metadata)"
        if version is None:
            report.add(
                "packages",
                distribution,
                MISSING,
                "not installed",
                f"needed for {purpose}: pip install {distribution}",
            )
        else:
            report.add("packages", distribution, OK, version)
    report.facts["packages"] = packages


def check_torch(report: DoctorReport) -> None:
    """torch build, and whether CUDA really works (a tiny allocation on the device)."""
    facts: dict[str, Any] = {"installed": False}
    report.facts["torch"] = facts
    try:
        import torch
    except Exception as e:
        report.add(
            "torch", "torch", MISSING, f"not importable: {e}", "everything on the GPU is disabled"
        )
        return
    from codedag.devices.torch_devices import cuda_available, cuda_device_count

    facts.update(installed=True, version=torch.__version__, cuda_build=torch.version.cuda)
    build = f"CUDA {torch.version.cuda} build" if torch.version.cuda else "CPU-only build"
    report.add("torch", "torch", OK, f"{torch.__version__} ({build})")
    available = cuda_available()
    facts["cuda_available"] = available
    if not available:
        why = (
            "this torch is a CPU-only build"
            if not torch.version.cuda
            else "no CUDA device or driver visible"
        )
        report.add(
            "torch",
            "CUDA",
            MISSING,
            "not available",
            f"{why}; migrated ops run through torch on the CPU, GPU timing and GPU tests are skipped",
        )
        facts["cuda_works"] = False
        return
    try:
        value = (torch.ones(4, device="cuda") * 2).sum().item()
        works = value == 8.0
    except Exception as e:
        works = False
        report.add(
            "torch",
            "CUDA",
            WARN,
            f"available but failed: {e}",
            "check the driver and CUDA_VISIBLE_DEVICES",
        )
    facts["cuda_works"] = works
    count = cuda_device_count()
    facts["cuda_device_count"] = count
    if works:
        report.add("torch", "CUDA", OK, f"works on {count} device(s)")


def check_gpus(report: DoctorReport, nvml: Any | None = None) -> None:
    """GPUs through NVML: name, memory, driver, energy counter."""
    from codedag.devices.gpus import detect_gpus, open_gpus

    detection = detect_gpus(nvml)
    gpus = open_gpus(nvml)
    infos = gpus.info()
    gpus.close()
    report.facts["gpus"] = {
        "count": detection.count,
        "source": detection.source,
        "detail": detection.detail,
        "devices": [asdict(i) for i in infos],
    }
    if not infos:
        report.add(
            "gpu",
            "GPUs",
            MISSING,
            "none",
            f"{gpus.reason or detection.detail}; GPU migration, GPU monitoring and GPU energy are unavailable",
        )
        return
    for info in infos:
        report.add(
            "gpu",
            f"GPU {info.index}",
            OK,
            f"{info.name}, {info.memory_total_mb / 1024:.1f} GiB, driver {info.driver}",
        )
        counter = f"GPU {info.index} energy counter"
        if info.energy_counter:
            report.add("gpu", counter, OK, "readable (nvmlDeviceGetTotalEnergyConsumption)")
        else:
            why = f"{info.energy_counter_reason}; GPU energy falls back to integrated power samples"
            report.add("gpu", counter, WARN, "not readable", why)


def check_cpu(report: DoctorReport, reader: Any | None = None, root: Path = Path("/")) -> None:
    """CPU count, container limits from cgroups, container detection."""
    import psutil

    from codedag.devices.cgroups import CgroupReader
    from codedag.devices.container import detect_container
    from codedag.devices.cpus import logical_cpu_count, usable_cpu_count

    reader = reader if reader is not None else CgroupReader()
    cpu_limit = reader.cpu_limit()
    memory_limit = reader.memory_limit()
    total_memory = psutil.virtual_memory().total
    container = detect_container(root)
    logical = logical_cpu_count()
    usable = usable_cpu_count()
    report.facts["cpu"] = {
        "logical_cpus": logical,
        "usable_cpus": usable,
        "cgroup_version": reader.version,
        "cgroup_cpu_limit_cpus": cpu_limit.cpus,
        "cgroup_cpu_limit_source": cpu_limit.source,
        "cgroup_memory_limit_bytes": memory_limit.limit_bytes,
        "cgroup_memory_limit_source": memory_limit.source,
        "memory_total_bytes": total_memory,
        "cgroup_paths": {
            "v1": {k: str(v) for k, v in reader.paths.v1.items()},
            "v2": str(reader.paths.v2) if reader.paths.v2 else None,
        },
        "container": asdict(container),
    }
    report.add("cpu", "CPUs", OK, f"{logical} logical, {usable} usable by this process")
    layout = {
        "hybrid": "hybrid (v1 controllers, v2 at " + str(reader.paths.v2_mount) + ")",
        "v1": "v1",
        "v2": "v2 (unified)",
        "none": "none mounted",
    }[reader.version]
    report.add("cpu", "cgroup layout", OK if reader.version != "none" else INFO, layout)
    cpus = "none" if cpu_limit.cpus is None else f"{cpu_limit.cpus:g} CPUs"
    report.add("cpu", "container CPU limit", OK, cpus, cpu_limit.source)
    limit = memory_limit.limit_bytes
    if limit is None:
        memory, detail = "none", f"{memory_limit.source}; host has {total_memory / 2**30:.1f} GiB"
    else:
        memory, detail = f"{limit / 2**30:.2f} GiB", memory_limit.source
    report.add("cpu", "container memory limit", OK, memory, detail)
    if container.in_container:
        report.add(
            "cpu", "container", INFO, container.runtime or "yes", "; ".join(container.evidence)
        )
    else:
        report.add("cpu", "container", INFO, "no evidence of a container")


def check_energy(report: DoctorReport) -> None:
    """Whether CPU energy can be measured, and whether the governor can be set."""
    from codedag.devices.cpu_energy import is_root, perf_event_paranoid, probe_cpu_energy
    from codedag.devices.governor import governor_status

    probe = probe_cpu_energy()
    governor = governor_status()
    report.facts["energy"] = {
        "cpu_source": probe.source,
        "rapl": probe.rapl,
        "perf": probe.perf,
        "perf_events": probe.perf_events,
        "perf_event_paranoid": perf_event_paranoid(),
        "root": is_root(),
        "governor": asdict(governor) | {"in_effect": governor.in_effect},
    }
    if probe.source == "rapl":
        report.add("energy", "RAPL (powercap)", OK, "readable", probe.rapl)
    else:
        report.add("energy", "RAPL (powercap)", MISSING, "unavailable", probe.rapl)
    if probe.source == "perf":
        report.add("energy", "perf power events", OK, "readable", probe.perf)
    elif probe.source is None:
        report.add("energy", "perf power events", MISSING, "unusable", probe.perf)
    if probe.source is None:
        report.add(
            "energy",
            "CPU energy",
            MISSING,
            "unavailable",
            "codedag mutate records CPU energy as unavailable with this reason; GPU energy (NVML) is unaffected",
        )
    if governor.settable:
        report.add(
            "energy",
            "CPU governor",
            OK,
            f"{governor.in_effect} (settable)",
            ", ".join(governor.available),
        )
    elif governor.current:
        report.add(
            "energy",
            "CPU governor",
            WARN,
            f"{governor.in_effect} (read-only)",
            f"{governor.detail}; codedag mutate -g records the governor in effect instead",
        )
    else:
        report.add(
            "energy",
            "CPU governor",
            MISSING,
            "unavailable",
            f"{governor.detail}; codedag mutate -g only records this",
        )


def check_tools(report: DoctorReport) -> None:
    """graphviz ``dot`` and Docker (client and engine)."""
    tools: dict[str, Any] = {}
    dot = shutil.which("dot")
    if dot:
        result = _run([dot, "-V"])
        version = (result.stderr or result.stdout).strip() if result else "unknown version"
        tools["dot"] = version
        report.add("tools", "graphviz dot", OK, version)
    else:
        tools["dot"] = None
        report.add(
            "tools",
            "graphviz dot",
            MISSING,
            "not found",
            "DAGs are written as DOT only, no SVG; get it with apt-get install graphviz (bin/bootstrap does this on Debian as root)",
        )
    from codedag.experiments.docker import probe_docker

    docker = probe_docker()
    tools["docker_client"] = docker.client
    tools["docker_engine"] = docker.engine
    tools["docker_nvidia_runtime"] = docker.nvidia_runtime
    if docker.client is None:
        report.add(
            "tools",
            "docker client",
            MISSING,
            "not found",
            f"{docker.reason}; codedag env build/run need Docker; use --local to run in this environment",
        )
    else:
        report.add("tools", "docker client", OK, docker.client)
        if docker.engine is not None:
            runtime = "yes" if docker.nvidia_runtime else "no"
            report.add("tools", "docker engine", OK, f"{docker.engine}, nvidia runtime: {runtime}")
        else:
            report.add(
                "tools",
                "docker engine",
                MISSING,
                "not reachable",
                f"{docker.reason}; codedag env build/run need an engine, or use --local",
            )
    report.facts["tools"] = tools


def check_extras(report: DoctorReport) -> None:
    """Which optional extras are installed."""
    extras: dict[str, bool] = {}
    for extra, module, purpose, how in OPTIONAL_EXTRAS:
        present = importlib.util.find_spec(module) is not None
        extras[extra] = extras.get(extra, True) and present  # all of its modules
        name = f"[{extra}] {module}"
        if present:
            report.add("extras", name, OK, distribution_version(module) or "installed", purpose)
        else:
            report.add("extras", name, MISSING, "not installed", f"disables {purpose}; {how}")
    report.facts["extras"] = extras


def run_doctor(nvml: Any | None = None) -> DoctorReport:
    """Run every check and return the report."""
    report = DoctorReport()
    check_python(report)
    check_torch(report)
    check_gpus(report, nvml)
    check_cpu(report)
    check_energy(report)
    check_tools(report)
    check_extras(report)
    return report
