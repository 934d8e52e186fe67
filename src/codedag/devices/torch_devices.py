"""torch devices: which exist here, their names, and waiting for the work queued on them.

Every question codedag asks torch about CUDA goes through this module: :func:`cuda_available`,
:func:`cuda_device_count`, :func:`cuda_initialized`, :func:`synchronize`. torch is imported inside
the functions, so importing this module initializes nothing; tests replace ``torch.cuda``'s
functions (``is_available``, ``device_count``, ``synchronize``) to run the CUDA paths' logic on
the CPU.

Device names: ``cpu``, ``cuda`` (the current CUDA device) and ``cuda:N``. The default device is
``cuda:LOCAL_RANK`` under torchrun, ``cuda:0`` with CUDA, else ``cpu`` (torch backends on the CPU:
how CI and CPU-only machines run the migrated path).
"""

from __future__ import annotations

import platform
import sys
from collections.abc import Callable
from typing import Any

from codedag.devices.cpus import cpu_model
from codedag.devices.distributed import local_rank
from codedag.version import distribution_version


def cuda_available() -> bool:
    """Whether torch can use CUDA here (a CUDA build, a driver and at least one device)."""
    import torch

    return bool(torch.cuda.is_available())


def cuda_device_count() -> int:
    """CUDA devices torch can use; 0 without CUDA. Creates no CUDA context."""
    import torch

    return int(torch.cuda.device_count()) if cuda_available() else 0


def cuda_initialized() -> bool:
    """Whether torch is imported and has initialized CUDA in this process.

    Never imports torch and never initializes CUDA: a process that has not imported torch has
    not used CUDA through it.
    """
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    try:
        return bool(torch.cuda.is_initialized())
    except Exception:  # pragma: no cover - broken CUDA installs
        return False


def gpu_name(index: int | None = None) -> str:
    """The name torch gives CUDA device ``index`` (the current device when ``None``)."""
    import torch

    return str(torch.cuda.get_device_name(index))


def device_exists(device: str) -> bool:
    """Whether ``device`` can be used in this process.

    Raises:
        RuntimeError: ``device`` is not a torch device name.
    """
    import torch

    dev = torch.device(device)
    if dev.type == "cpu":
        return True
    if dev.type == "cuda":
        if not cuda_available():
            return False
        return dev.index is None or dev.index < torch.cuda.device_count()
    if dev.type == "mps":
        return bool(torch.backends.mps.is_available())
    return False


def default_device() -> str:
    """``cuda:LOCAL_RANK`` under torchrun, ``cuda:0`` with CUDA, else ``cpu``.

    With more local ranks than GPUs, rank ``r`` gets ``cuda:(r % device_count)``, as
    :func:`device_for_rank` maps plan devices.
    """
    if not cuda_available():
        return "cpu"
    rank = local_rank()
    count = cuda_device_count()
    if rank is not None and count:
        return f"cuda:{rank % count}"
    return "cuda:0"


def device_for_rank(device: str) -> str:
    """Under torchrun, shift a plan's ``cuda:i`` by this process's local rank.

    A plan is written for one process (usually ``cuda:0``); under torchrun every rank has its own
    GPU, so rank ``r`` runs ``cuda:i`` on ``cuda:(i + r) % device_count``. Elsewhere unchanged.
    """
    import torch

    rank = local_rank()
    if rank is None or not device.startswith("cuda") or not cuda_available():
        return device
    count = cuda_device_count()
    index = torch.device(device).index or 0
    return f"cuda:{(index + rank) % count}" if count else device


def resolve_device(requested: str, fallback: str) -> tuple[str, str | None]:
    """Map a plan device onto one that exists here.

    Returns:
        ``(device, warning)``; the warning is ``None`` when ``requested`` exists.
    """
    try:
        if device_exists(requested):
            return requested, None
    except RuntimeError:
        pass
    return fallback, f"plan device {requested!r} does not exist here; using {fallback!r}"


def require_device(text: str, flag: str = "--device") -> str:
    """``text`` as a device that exists here: ``cpu`` or ``cuda:N`` (``cuda`` means ``cuda:0``).

    Args:
        text: what the user asked for.
        flag: how the user named it, for the messages.

    Raises:
        ConfigError: ``text`` is not a device name, or not a cpu or cuda device.
        DeviceError: CUDA is not available here, or there is no such GPU.
    """
    import torch

    from codedag.errors import ConfigError, DeviceError

    try:
        device = torch.device(text)
    except (RuntimeError, ValueError):
        raise ConfigError(
            f"{flag} {text!r} is not a device; expected cpu, cuda or cuda:N"
        ) from None
    if device.type == "cpu":
        return "cpu"
    if device.type != "cuda":
        raise ConfigError(f"{flag} {text!r}: only cpu and cuda devices are supported")
    if not cuda_available():
        raise DeviceError(
            f"{flag} {text}: CUDA is not available on this machine (torch {torch.__version__}, "
            f"CUDA build: {torch.version.cuda or 'none'}); use {flag} cpu to run on the CPU"
        )
    index = device.index or 0
    count = cuda_device_count()
    if index >= count:
        raise DeviceError(
            f"{flag} {text}: no such GPU here ({count} CUDA device(s): cuda:0 to cuda:{count - 1})"
        )
    return f"cuda:{index}"


def _nothing_queued() -> None:
    """The CPU runs each call to its end: nothing to wait for."""


def device_sync(device: Any) -> Callable[[], None]:
    """The function that waits for ``device``'s queued work (nothing to wait for on the CPU).

    Bound once, for loops that wait on every pass (timing a call, a step): on the CPU it costs
    one empty call.
    """
    import torch

    dev = torch.device(device) if device is not None else torch.device("cuda")
    if dev.type == "cuda":
        return lambda: torch.cuda.synchronize(dev)
    if dev.type == "mps":
        return torch.mps.synchronize
    return _nothing_queued


def synchronize(device: object = "cuda") -> None:
    """Wait until the work queued on ``device`` is done.

    Args:
        device: ``cuda`` (the current CUDA device), ``cuda:N``, ``mps`` or ``cpu`` (a name or a
            ``torch.device``); the CPU has nothing to wait for.
    """
    device_sync(device)()


def device_name(device: str) -> str:
    """A description of ``device`` that identifies its speed: CPU model and torch threads, or
    the GPU's name and compute capability."""
    import torch

    if device.startswith("cuda"):
        index = torch.device(device).index or 0
        major, minor = torch.cuda.get_device_capability(index)
        return f"{gpu_name(index)} (sm_{major}{minor})"
    if device == "mps":
        return f"Apple MPS ({platform.machine()})"
    return f"{cpu_model()} ({torch.get_num_threads()} torch threads, {sys.platform})"


def torch_facts() -> dict[str, Any]:
    """torch's version, its CUDA build, and the CUDA devices in use (``cuda_in_use``).

    Never imports torch and never initializes CUDA: when the program has not imported torch, the
    version comes from the installed package's metadata.
    """
    torch = sys.modules.get("torch")
    if torch is None:
        return {
            "torch": distribution_version("torch"),
            "cuda": None,
            "cudnn": None,
            "cuda_in_use": False,
        }
    facts: dict[str, Any] = {
        "torch": getattr(torch, "__version__", None),
        "cuda": getattr(getattr(torch, "version", None), "cuda", None),
        "cudnn": None,
        "cuda_in_use": False,
    }
    try:
        facts["cuda_in_use"] = bool(torch.cuda.is_initialized())
        if facts["cuda_in_use"]:
            facts["cudnn"] = torch.backends.cudnn.version()
            facts["cuda_devices"] = [
                torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())
            ]
    except Exception as error:  # pragma: no cover - broken CUDA installs
        facts["cuda_error"] = str(error)
    return facts
