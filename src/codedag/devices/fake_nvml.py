"""A fake NVML module for tests and demos without a GPU.

It implements the part of ``pynvml`` that codedag calls. Each :class:`FakeGPU` reports fixed
utilization, memory, power and temperature; its energy counter integrates the power over the
fake's clock, which tests advance explicitly with :meth:`FakeNVML.advance`.

Example:
    >>> from codedag.devices.fake_nvml import FakeGPU, FakeNVML
    >>> from codedag.devices.gpus import NvmlGPUs
    >>> nvml = FakeNVML([FakeGPU("H100", power_w=300.0)])
    >>> gpus = NvmlGPUs(nvml)
    >>> nvml.advance(2.0)
    >>> gpus.energy_mj()
    [600000]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

NVML_TEMPERATURE_GPU = 0


class NVMLError(Exception):
    """Raised like pynvml's NVMLError."""


@dataclass
class FakeGPU:
    """One fake device."""

    name: str = "NVIDIA H100 80GB HBM3"
    memory_total_mb: float = 81559.0
    memory_used_mb: float = 1024.0
    utilization_pct: float = 50.0
    power_w: float = 250.0
    temperature_c: float = 45.0
    energy_supported: bool = True
    uuid: str = ""
    energy_mj: float = field(default=0.0, repr=False)


class FakeNVML:
    """Module-like object with pynvml's function names; its methods answer as pynvml's do."""

    NVML_TEMPERATURE_GPU = NVML_TEMPERATURE_GPU
    NVMLError = NVMLError

    def __init__(
        self,
        gpus: list[FakeGPU] | None = None,
        driver: str = "550.54.15",
        fail_init: bool = False,
    ) -> None:
        self.gpus = gpus if gpus is not None else [FakeGPU()]
        for index, gpu in enumerate(self.gpus):
            gpu.uuid = gpu.uuid or f"GPU-fake-{index:04d}"
        self.driver = driver
        self.fail_init = fail_init
        self.initialized = 0

    def advance(self, seconds: float) -> None:
        """Let ``seconds`` pass: every energy counter grows by power * time."""
        for gpu in self.gpus:
            gpu.energy_mj += gpu.power_w * seconds * 1000.0

    def _check(self) -> None:
        if self.initialized <= 0:
            raise NVMLError("NVML Shared Library Not Initialized")

    def nvmlInit(self) -> None:
        """Open NVML (fails like a missing library when ``fail_init``)."""
        if self.fail_init:
            raise NVMLError("NVML Shared Library Not Found")
        self.initialized += 1

    def nvmlShutdown(self) -> None:
        """Close NVML once."""
        self._check()
        self.initialized -= 1

    def nvmlSystemGetDriverVersion(self) -> str:
        """The driver version."""
        self._check()
        return self.driver

    def nvmlDeviceGetCount(self) -> int:
        """Number of GPUs, visible or not."""
        self._check()
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeGPU:
        """The handle of GPU ``index``."""
        self._check()
        if not 0 <= index < len(self.gpus):
            raise NVMLError("Invalid Argument")
        return self.gpus[index]

    def nvmlDeviceGetName(self, handle: FakeGPU) -> str:
        """The GPU's name."""
        return handle.name

    def nvmlDeviceGetUUID(self, handle: FakeGPU) -> str:
        """The GPU's UUID (``GPU-fake-0000`` ...)."""
        return handle.uuid

    def nvmlDeviceGetMemoryInfo(self, handle: FakeGPU) -> SimpleNamespace:
        """Total, used and free memory in bytes."""
        total = int(handle.memory_total_mb * 2**20)
        used = int(handle.memory_used_mb * 2**20)
        return SimpleNamespace(total=total, used=used, free=total - used)

    def nvmlDeviceGetUtilizationRates(self, handle: FakeGPU) -> SimpleNamespace:
        """GPU utilization in percent."""
        return SimpleNamespace(gpu=handle.utilization_pct, memory=0)

    def nvmlDeviceGetPowerUsage(self, handle: FakeGPU) -> int:
        """Power in milliwatts."""
        return int(handle.power_w * 1000)

    def nvmlDeviceGetTemperature(self, handle: FakeGPU, sensor: int) -> int:
        """Temperature in degrees Celsius."""
        return int(handle.temperature_c)

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: FakeGPU) -> int:
        """Energy since the fake started, in millijoules (raises where ``energy_supported`` is off)."""
        if not handle.energy_supported:
            raise NVMLError("Not Supported")
        return int(handle.energy_mj)
