"""Which device a migrated call runs on in this process.

* Default device: ``cuda:LOCAL_RANK`` under torchrun, ``cuda:0`` when CUDA exists, else ``cpu``
  (torch backends on the CPU: how CI and CPU-only machines run the migrated path).
* A plan device that does not exist here maps to the default device, with one warning.
* DataLoader workers and forked children never initialize CUDA: there (unless the process
  initialized CUDA itself) the migrated call runs on the CPU. Forked CUDA is unusable ("Cannot
  re-initialize CUDA in forked subprocess"), and each spawned worker that touches CUDA costs
  300-500 MB of GPU memory. Spawned children that are not workers (DDP ranks) may use CUDA.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import sys
import threading

import torch
import torch.utils.data

log = logging.getLogger(__name__)

_lock = threading.Lock()
_in_child_cache: dict[int, bool] = {}
# plan device -> device used in this process, once that is final; emptied in a forked child.
_effective_cache: dict[str, str] = {}
_fork_hook_installed = False


def default_device() -> str:
    """``cuda:LOCAL_RANK`` under torchrun, ``cuda:0`` with CUDA, else ``cpu``.

    With more local ranks than GPUs, rank ``r`` gets ``cuda:(r % device_count)``, as
    :func:`device_for_rank` maps plan devices.
    """
    if not torch.cuda.is_available():
        return "cpu"
    rank = local_rank()
    count = torch.cuda.device_count()
    if rank is not None and count:
        return f"cuda:{rank % count}"
    return "cuda:0"


def local_rank() -> int | None:
    """``LOCAL_RANK`` of torchrun-style launchers, or ``None`` outside them."""
    value = os.environ.get("LOCAL_RANK", "").strip()
    return int(value) if value.isdigit() else None


def device_for_rank(device: str) -> str:
    """Under torchrun, shift a plan's ``cuda:i`` by this process's local rank.

    A plan is written for one process (usually ``cuda:0``); under torchrun every rank has its own
    GPU, so rank ``r`` runs ``cuda:i`` on ``cuda:(i + r) % device_count``. Elsewhere unchanged.
    """
    rank = local_rank()
    if rank is None or not device.startswith("cuda") or not torch.cuda.is_available():
        return device
    count = torch.cuda.device_count()
    index = torch.device(device).index or 0
    return f"cuda:{(index + rank) % count}" if count else device


def device_exists(device: str) -> bool:
    """Whether ``device`` can be used in this process."""
    dev = torch.device(device)
    if dev.type == "cpu":
        return True
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            return False
        return dev.index is None or dev.index < torch.cuda.device_count()
    if dev.type == "mps":
        return bool(torch.backends.mps.is_available())
    return False


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


def _reset_after_fork() -> None:
    _in_child_cache.clear()
    _effective_cache.clear()


def install_fork_hook() -> None:
    """Forget per-process decisions in a forked child (once per process; no-op afterwards)."""
    global _fork_hook_installed
    with _lock:
        if not _fork_hook_installed:
            if hasattr(os, "register_at_fork"):  # no fork on Windows
                os.register_at_fork(after_in_child=_reset_after_fork)
            _fork_hook_installed = True


def must_avoid_cuda() -> bool:
    """Whether this process must not use CUDA: a DataLoader worker or a child process.

    True in a DataLoader worker unless this process already initialized CUDA itself (its own
    worker_init_fn did, in a spawned worker); true in a forked child process where CUDA is not
    initialized yet, and wherever CUDA comes from a fork of an initialized parent. Spawned
    children that are not DataLoader workers (DDP ranks of ``torch.multiprocessing.spawn``) may
    use CUDA.
    """
    return _avoid_cuda()[0]


def _avoid_cuda() -> tuple[bool, bool]:
    """``(must avoid CUDA, whether that is final for this process)``."""
    pid = os.getpid()
    cached = _in_child_cache.get(pid)
    if cached is not None:
        return cached, True
    bad_fork = bool(getattr(torch.cuda, "_is_in_bad_fork", lambda: False)())
    initialized = torch.cuda.is_initialized() and not bad_fork
    worker = torch.utils.data.get_worker_info() is not None
    child = multiprocessing.parent_process() is not None
    # A spawned child (its parent's main module imported as __mp_main__), such as a DDP rank
    # started by torch.multiprocessing.spawn, may initialize CUDA; a forked one may not.
    forked_child = child and "__mp_main__" not in sys.modules
    avoid = bad_fork or ((worker or forked_child) and not initialized)
    final = worker or not child
    if final:
        # Final for this process: a forked child starts afresh through the fork hook, and a
        # DataLoader worker has its worker info set before it fetches the first sample.
        _in_child_cache[pid] = avoid
    return avoid, final


def effective_device(device: str) -> str:
    """The device a migrated call uses in this process: ``cpu`` where CUDA must be avoided.

    Called on every migrated call: the answer is cached per process once it is final.
    """
    used = _effective_cache.get(device)
    if used is not None:
        return used
    if not device.startswith("cuda"):
        _effective_cache[device] = device
        return device
    avoid, final = _avoid_cuda()
    used = "cpu" if avoid else device
    if final:
        _effective_cache[device] = used
    return used


def final_effective_device(device: str) -> str | None:
    """:func:`effective_device` of ``device`` if it is final for this process, else ``None``."""
    return _effective_cache.get(device)
