"""Whether this process may use CUDA, and so which device a call made here runs on.

DataLoader workers and forked children never initialize CUDA: there (unless the process
initialized CUDA itself) a call planned for CUDA runs on the CPU. Forked CUDA is unusable ("Cannot
re-initialize CUDA in forked subprocess"), and each spawned worker that touches CUDA costs
300-500 MB of GPU memory. Spawned children that are not workers (DDP ranks) may use CUDA.

The answers are cached per process once they are final, and forgotten in a forked child
(:func:`install_fork_hook`).
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading

from codedag.devices.torch_devices import cuda_initialized

_lock = threading.Lock()
_in_child_cache: dict[int, bool] = {}
# plan device -> device used in this process, once that is final; emptied in a forked child.
_effective_cache: dict[str, str] = {}
_fork_hook_installed = False


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
    import torch
    import torch.utils.data

    bad_fork = bool(getattr(torch.cuda, "_is_in_bad_fork", lambda: False)())
    initialized = cuda_initialized() and not bad_fork
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
