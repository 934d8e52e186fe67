"""GPUs behind one small interface: NVML when it loads, an empty implementation otherwise.

Callers never branch on "is there a GPU": :func:`open_gpus` returns :class:`NvmlGPUs` or
:class:`EmptyGPUs`, both :class:`GPUs`. The NVML module is injectable, so tests use
:mod:`codedag.devices.fake_nvml`. Only the GPUs visible to this process
(``CUDA_VISIBLE_DEVICES``, by index or UUID) are reported.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from types import ModuleType
from typing import Any

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GPUInfo:
    """Static facts of one GPU; ``energy_counter`` tells whether NVML's energy counter reads."""

    index: int
    name: str
    memory_total_mb: float
    driver: str | None
    uuid: str | None
    energy_counter: bool
    energy_counter_reason: str | None = None


@dataclass(frozen=True)
class GPUSample:
    """One reading of one GPU. ``None`` where NVML does not report the quantity."""

    index: int
    utilization_pct: float | None
    memory_used_mb: float | None
    power_w: float | None
    temperature_c: float | None


class GPUs:
    """The interface; :class:`EmptyGPUs` is the no-device implementation."""

    source: str = "none"
    reason: str | None = None

    def count(self) -> int:
        """Number of visible GPUs."""
        return 0

    def info(self) -> list[GPUInfo]:
        """Static facts per GPU."""
        return []

    def sample(self) -> list[GPUSample]:
        """Current utilization, memory, power and temperature per GPU."""
        return []

    def energy_mj(self) -> list[int | None]:
        """NVML total-energy counters in millijoules (``None`` where unsupported)."""
        return []

    def close(self) -> None:
        """Release NVML."""

    def __enter__(self) -> GPUs:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class EmptyGPUs(GPUs):
    """No GPU (or no NVML): every query returns nothing; ``reason`` says why."""

    def __init__(self, reason: str = "no GPU") -> None:
        self.reason = reason


def visible_device_filter(environ: dict[str, str] | None = None) -> list[str] | None:
    """Entries of ``CUDA_VISIBLE_DEVICES`` (indices or UUIDs); ``None`` when unset."""
    env = os.environ if environ is None else environ
    value = env.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return None
    entries = [part.strip() for part in value.split(",") if part.strip()]
    # CUDA stops at the first invalid entry (e.g. -1): nothing after it is visible.
    visible = []
    for entry in entries:
        if entry.lstrip("-").isdigit() and int(entry) < 0:
            break
        visible.append(entry)
    return visible


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class NvmlGPUs(GPUs):
    """GPUs read through NVML (``pynvml`` from nvidia-ml-py, or an injected fake).

    Raises:
        codedag.errors.DeviceError: NVML cannot be loaded or initialized.
    """

    source = "nvml"

    def __init__(
        self, nvml: ModuleType | Any | None = None, environ: dict[str, str] | None = None
    ) -> None:
        from codedag.errors import DeviceError

        if nvml is None:
            try:
                import pynvml
            except ImportError as e:
                raise DeviceError("nvidia-ml-py (pynvml) is not installed") from e
            nvml = pynvml
        self._nvml: Any = nvml
        try:
            nvml.nvmlInit()
        except Exception as e:
            raise DeviceError(f"NVML could not be initialized: {e}") from e
        self._closed = False
        try:
            total = nvml.nvmlDeviceGetCount()
            handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(total)]
            wanted = visible_device_filter(environ)
            if wanted is not None:
                handles = [h for i, h in enumerate(handles) if self._selected(h, i, wanted)]
        except Exception as e:
            self.close()
            raise DeviceError(f"NVML could not list devices: {e}") from e
        self._handles = handles

    def _selected(self, handle: object, index: int, wanted: list[str]) -> bool:
        if str(index) in wanted:
            return True
        try:
            uuid = _text(self._nvml.nvmlDeviceGetUUID(handle))
        except Exception:
            return False
        return any(uuid == w or uuid.startswith(w) for w in wanted if not w.isdigit())

    def count(self) -> int:
        return len(self._handles)

    def _try(self, func: str, *args: Any) -> Any:
        try:
            return getattr(self._nvml, func)(*args)
        except Exception as e:
            log.debug("NVML %s failed: %s", func, e)
            return None

    def info(self) -> list[GPUInfo]:
        driver = self._try("nvmlSystemGetDriverVersion")
        infos = []
        for index, handle in enumerate(self._handles):
            memory = self._try("nvmlDeviceGetMemoryInfo", handle)
            name = self._try("nvmlDeviceGetName", handle)
            uuid = self._try("nvmlDeviceGetUUID", handle)
            energy_ok, energy_reason = True, None
            try:
                self._nvml.nvmlDeviceGetTotalEnergyConsumption(handle)
            except Exception as e:
                energy_ok, energy_reason = False, f"nvmlDeviceGetTotalEnergyConsumption: {e}"
            infos.append(
                GPUInfo(
                    index=index,
                    name=_text(name) if name is not None else "unknown",
                    memory_total_mb=(memory.total / 2**20) if memory is not None else 0.0,
                    driver=_text(driver) if driver is not None else None,
                    uuid=_text(uuid) if uuid is not None else None,
                    energy_counter=energy_ok,
                    energy_counter_reason=energy_reason,
                )
            )
        return infos

    def sample(self) -> list[GPUSample]:
        samples = []
        temperature_sensor = getattr(self._nvml, "NVML_TEMPERATURE_GPU", 0)
        for index, handle in enumerate(self._handles):
            utilization = self._try("nvmlDeviceGetUtilizationRates", handle)
            memory = self._try("nvmlDeviceGetMemoryInfo", handle)
            power_mw = self._try("nvmlDeviceGetPowerUsage", handle)
            temperature = self._try("nvmlDeviceGetTemperature", handle, temperature_sensor)
            samples.append(
                GPUSample(
                    index=index,
                    utilization_pct=float(utilization.gpu) if utilization is not None else None,
                    memory_used_mb=(memory.used / 2**20) if memory is not None else None,
                    power_w=(power_mw / 1000.0) if power_mw is not None else None,
                    temperature_c=float(temperature) if temperature is not None else None,
                )
            )
        return samples

    def energy_mj(self) -> list[int | None]:
        values = []
        for handle in self._handles:
            value = self._try("nvmlDeviceGetTotalEnergyConsumption", handle)
            values.append(int(value) if value is not None else None)
        return values

    def close(self) -> None:
        if not getattr(self, "_closed", True):
            self._closed = True
            try:
                self._nvml.nvmlShutdown()
            except Exception as e:  # shutting down must never raise
                log.debug("nvmlShutdown failed: %s", e)


def open_gpus(nvml: ModuleType | Any | None = None) -> GPUs:
    """NVML GPUs when NVML loads and sees at least one device, else :class:`EmptyGPUs`."""
    from codedag.errors import DeviceError

    try:
        gpus = NvmlGPUs(nvml)
    except DeviceError as e:
        return EmptyGPUs(str(e))
    if gpus.count() == 0:
        gpus.close()
        return EmptyGPUs("NVML reports no visible GPU")
    return gpus


@dataclass(frozen=True)
class GPUDetection:
    """How many GPUs this process can use, and how that was found out."""

    count: int
    source: str  # "nvml", "CUDA_VISIBLE_DEVICES", "torch" or "none"
    names: list[str]
    detail: str


def detect_gpus(
    nvml: ModuleType | Any | None = None, environ: dict[str, str] | None = None
) -> GPUDetection:
    """Count usable GPUs: NVML first, then ``CUDA_VISIBLE_DEVICES``, then torch.

    ``CUDA_VISIBLE_DEVICES`` alone cannot prove a GPU exists; it is used only when NVML is not
    loadable and counts what the launcher assigned. torch is asked last because importing it is
    slow; ``torch.cuda.device_count()`` does not create a CUDA context.
    """
    from codedag.errors import DeviceError

    env = os.environ if environ is None else environ
    nvml_reason = ""
    try:
        with NvmlGPUs(nvml, environ=dict(env)) as gpus:
            infos = gpus.info()
            return GPUDetection(len(infos), "nvml", [i.name for i in infos], "NVML")
    except DeviceError as e:
        nvml_reason = str(e)
    visible = visible_device_filter(dict(env))
    if visible:
        return GPUDetection(
            len(visible),
            "CUDA_VISIBLE_DEVICES",
            [],
            f"{nvml_reason}; counted CUDA_VISIBLE_DEVICES={env.get('CUDA_VISIBLE_DEVICES')}",
        )
    from codedag.devices.torch_devices import cuda_device_count, gpu_name

    try:
        count = cuda_device_count()
    except Exception as e:  # a broken torch install must not break detection
        return GPUDetection(0, "none", [], f"{nvml_reason}; torch: {e}")
    if count:
        names = [gpu_name(i) for i in range(count)]
        return GPUDetection(count, "torch", names, f"{nvml_reason}; torch.cuda")
    return GPUDetection(0, "none", [], f"{nvml_reason}; torch sees no CUDA device")
