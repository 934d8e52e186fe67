"""The GPU interface over a fake NVML, and the empty implementation."""

from __future__ import annotations

import pytest

from codedag.devices.fake_nvml import FakeGPU, FakeNVML
from codedag.devices.gpus import (
    EmptyGPUs,
    NvmlGPUs,
    detect_gpus,
    open_gpus,
    visible_device_filter,
)
from codedag.errors import DeviceError


def two_gpus() -> FakeNVML:
    return FakeNVML(
        [
            FakeGPU("NVIDIA H100", memory_used_mb=2048, utilization_pct=90, power_w=300),
            FakeGPU("NVIDIA H200", energy_supported=False, power_w=100, temperature_c=61),
        ]
    )


def test_info_and_samples_of_two_gpus() -> None:
    nvml = two_gpus()
    with NvmlGPUs(nvml, environ={}) as gpus:
        infos = gpus.info()
        assert [i.name for i in infos] == ["NVIDIA H100", "NVIDIA H200"]
        assert infos[0].driver == "550.54.15"
        assert infos[0].energy_counter and not infos[1].energy_counter
        assert "Not Supported" in (infos[1].energy_counter_reason or "")
        samples = gpus.sample()
        assert samples[0].utilization_pct == 90 and samples[0].memory_used_mb == 2048
        assert samples[0].power_w == 300 and samples[1].temperature_c == 61
        nvml.advance(1.5)
        assert gpus.energy_mj() == [450_000, None]
    assert nvml.initialized == 0  # shut down on exit


def test_cuda_visible_devices_restricts_by_index_and_uuid() -> None:
    nvml = two_gpus()
    with NvmlGPUs(nvml, environ={"CUDA_VISIBLE_DEVICES": "1"}) as gpus:
        assert [i.name for i in gpus.info()] == ["NVIDIA H200"]
    with NvmlGPUs(nvml, environ={"CUDA_VISIBLE_DEVICES": "GPU-fake-0000"}) as gpus:
        assert [i.name for i in gpus.info()] == ["NVIDIA H100"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, None), ("", []), ("0,1", ["0", "1"]), ("1,-1,0", ["1"]), ("GPU-ab", ["GPU-ab"])],
)
def test_visible_device_filter(value: str | None, expected: list[str] | None) -> None:
    env = {} if value is None else {"CUDA_VISIBLE_DEVICES": value}
    assert visible_device_filter(env) == expected


def test_nvml_init_failure_is_a_device_error_and_open_gpus_degrades() -> None:
    with pytest.raises(DeviceError, match="not be initialized"):
        NvmlGPUs(FakeNVML(fail_init=True))
    gpus = open_gpus(FakeNVML(fail_init=True))
    assert isinstance(gpus, EmptyGPUs)
    assert gpus.count() == 0 and gpus.sample() == [] and gpus.energy_mj() == []
    assert "initialized" in (gpus.reason or "")


def test_open_gpus_with_no_device_is_empty() -> None:
    assert isinstance(open_gpus(FakeNVML([])), EmptyGPUs)


def test_detect_prefers_nvml_then_visible_devices() -> None:
    detection = detect_gpus(two_gpus(), environ={})
    assert (detection.count, detection.source) == (2, "nvml")
    fallback = detect_gpus(FakeNVML(fail_init=True), environ={"CUDA_VISIBLE_DEVICES": "0,1,2"})
    assert (fallback.count, fallback.source) == (3, "CUDA_VISIBLE_DEVICES")


def test_detect_falls_back_to_torch() -> None:
    import torch

    detection = detect_gpus(FakeNVML(fail_init=True), environ={})
    assert detection.count == (torch.cuda.device_count() if torch.cuda.is_available() else 0)
    assert detection.source in ("torch", "none")


def test_real_nvml_here_never_raises() -> None:
    gpus = open_gpus()
    assert gpus.count() == len(gpus.info())
    gpus.close()
