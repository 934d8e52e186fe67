"""torch devices on fakes: availability, names, the default device under torchrun, checking what
a user asked for, and waiting for queued work."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

import codedag.devices.torch_devices as torch_devices
from codedag.errors import ConfigError, DeviceError


@pytest.fixture
def two_gpus(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """torch sees two CUDA devices; ``torch.cuda.synchronize`` records what it was asked for."""
    waited: list[object] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=None: f"Fake GPU {index}")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index=None: (9, 0))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: waited.append(device))
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    return waited


@pytest.fixture
def no_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    monkeypatch.delenv("LOCAL_RANK", raising=False)


def test_availability_and_count_follow_torch(two_gpus: list[object]) -> None:
    assert torch_devices.cuda_available() is True
    assert torch_devices.cuda_device_count() == 2
    assert torch_devices.gpu_name(1) == "Fake GPU 1"


def test_without_cuda_there_is_no_cuda_device(
    no_cuda: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 3)  # a count without CUDA is moot
    assert torch_devices.cuda_available() is False
    assert torch_devices.cuda_device_count() == 0
    assert torch_devices.default_device() == "cpu"
    assert not torch_devices.device_exists("cuda:0")
    assert torch_devices.device_exists("cpu")


def test_devices_that_exist(two_gpus: list[object]) -> None:
    assert torch_devices.device_exists("cuda") and torch_devices.device_exists("cuda:1")
    assert not torch_devices.device_exists("cuda:2")
    with pytest.raises(RuntimeError):
        torch_devices.device_exists("gpu0")


def test_default_device_follows_local_rank(no_cuda: None, monkeypatch: pytest.MonkeyPatch) -> None:
    assert torch_devices.default_device() == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    monkeypatch.setenv("LOCAL_RANK", "2")
    assert torch_devices.default_device() == "cuda:2"
    monkeypatch.setenv("LOCAL_RANK", "6")  # more ranks than GPUs: they share round robin
    assert torch_devices.default_device() == "cuda:2"
    monkeypatch.delenv("LOCAL_RANK")
    assert torch_devices.default_device() == "cuda:0"


def test_torchrun_ranks_shift_plan_devices(
    two_gpus: list[object], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    monkeypatch.setenv("LOCAL_RANK", "3")
    assert torch_devices.device_for_rank("cuda:0") == "cuda:3"
    assert torch_devices.device_for_rank("cuda:2") == "cuda:1"
    assert torch_devices.device_for_rank("cpu") == "cpu"
    monkeypatch.delenv("LOCAL_RANK")
    assert torch_devices.device_for_rank("cuda:0") == "cuda:0"


def test_plan_devices_resolve_to_ones_that_exist(two_gpus: list[object]) -> None:
    assert torch_devices.resolve_device("cuda:1", "cpu") == ("cuda:1", None)
    device, warning = torch_devices.resolve_device("cuda:3", "cuda:0")
    assert device == "cuda:0" and warning == (
        "plan device 'cuda:3' does not exist here; using 'cuda:0'"
    )
    assert torch_devices.resolve_device("tpu:0", "cpu")[0] == "cpu"  # not even a device name


def test_a_requested_device_is_checked_and_named_canonically(two_gpus: list[object]) -> None:
    assert torch_devices.require_device("cpu") == "cpu"
    assert torch_devices.require_device("cuda") == "cuda:0"
    assert torch_devices.require_device("cuda:1") == "cuda:1"
    with pytest.raises(DeviceError, match=r"--device cuda:2: no such GPU here \(2 CUDA device"):
        torch_devices.require_device("cuda:2")
    with pytest.raises(ConfigError, match="'bogus' is not a device; expected cpu, cuda or cuda:N"):
        torch_devices.require_device("bogus")
    with pytest.raises(ConfigError, match="'cuda:-1' is not a device"):
        torch_devices.require_device("cuda:-1")
    with pytest.raises(ConfigError, match="--target-device 'meta': only cpu and cuda"):
        torch_devices.require_device("meta", flag="--target-device")


def test_a_cuda_device_without_cuda_says_how_to_run(no_cuda: None) -> None:
    with pytest.raises(DeviceError, match="CUDA is not available on this machine") as caught:
        torch_devices.require_device("cuda")
    assert "use --device cpu" in str(caught.value) and torch.__version__ in str(caught.value)
    assert torch_devices.require_device("cpu") == "cpu"


def test_synchronize_waits_on_the_named_cuda_device(two_gpus: list[object]) -> None:
    torch_devices.synchronize("cuda:1")
    torch_devices.synchronize(torch.device("cuda", 0))
    torch_devices.synchronize()  # the current CUDA device
    torch_devices.synchronize("cpu")  # nothing queued on the CPU: torch is not asked
    assert [(d.type, d.index) for d in two_gpus] == [  # type: ignore[attr-defined]
        ("cuda", 1),
        ("cuda", 0),
        ("cuda", None),
    ]


def test_a_bound_sync_waits_each_time_and_is_free_on_the_cpu(
    two_gpus: list[object], monkeypatch: pytest.MonkeyPatch
) -> None:
    sync = torch_devices.device_sync("cuda:1")
    sync()
    sync()
    assert len(two_gpus) == 2
    cpu_sync = torch_devices.device_sync("cpu")
    cpu_sync()
    assert len(two_gpus) == 2
    assert cpu_sync is torch_devices.device_sync("cpu")  # one shared empty function
    mps_waits: list[str] = []
    monkeypatch.setattr(torch.mps, "synchronize", lambda: mps_waits.append("mps"))
    torch_devices.synchronize("mps")
    assert mps_waits == ["mps"]


def test_device_names_identify_their_speed(two_gpus: list[object]) -> None:
    assert torch_devices.device_name("cuda:1") == "Fake GPU 1 (sm_90)"
    cpu = torch_devices.device_name("cpu")
    assert f"{torch.get_num_threads()} torch threads" in cpu and sys.platform in cpu


def test_cuda_initialized_follows_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    assert torch_devices.cuda_initialized()
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    assert not torch_devices.cuda_initialized()


def test_torch_facts_in_a_process_that_uses_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=None: "Fake GPU")
    monkeypatch.setattr(torch.backends.cudnn, "version", lambda: 90100)
    facts = torch_devices.torch_facts()
    assert facts["torch"] == torch.__version__ and facts["cuda_in_use"] is True
    assert facts["cudnn"] == 90100 and facts["cuda_devices"] == ["Fake GPU"]


def test_nothing_is_imported_or_initialized_by_asking_without_torch() -> None:
    """A program that never imported torch: no CUDA in use, torch's version from its metadata,
    and importing every devices module imports neither torch nor pynvml."""
    code = (
        "import sys, importlib, pkgutil, codedag.devices as d\n"
        "for m in pkgutil.iter_modules(d.__path__):\n"
        "    importlib.import_module('codedag.devices.' + m.name)\n"
        "from codedag.devices.torch_devices import cuda_initialized, torch_facts\n"
        "facts = torch_facts()\n"
        "print(cuda_initialized(), facts['cuda_in_use'], bool(facts['torch']))\n"
        "print([m for m in ('torch', 'pynvml') if m in sys.modules])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.split("\n")[:2] == ["False False True", "[]"]
