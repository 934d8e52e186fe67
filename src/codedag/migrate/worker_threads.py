"""A DataLoader ``worker_init_fn`` that sets the thread counts of torch, OpenCV and BLAS.

PyTorch starts each DataLoader worker with one torch thread but leaves OpenCV's and the BLAS
library's thread pools as they are: each worker then runs as many OpenCV and BLAS threads as
there are cores, and N workers fight over the same cores. :class:`WorkerThreads` sets all three
to a measured count in every worker, then calls the program's own ``worker_init_fn`` (which is
never dropped, and runs last, so a thread count the program sets itself wins).

It pickles by reference (a module-level class holding plain values and the program's function),
so it works with ``fork``, ``spawn`` and ``forkserver`` workers alike. BLAS threads are set through
``threadpoolctl`` where it is installed (it comes with scikit-learn and librosa); without it only
the environment variables read by a BLAS library loaded later are set, and :func:`thread_counts`
says so.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

# What the last WorkerThreads call in this process set, for read-back (tests, diagnostics).
_APPLIED: dict[str, Any] = {}
# threadpoolctl's limiter: kept alive so that its limits stay set for the worker's life.
_BLAS_LIMITER: list[Any] = []


class WorkerThreads:
    """``worker_init_fn(worker_id)``: set thread counts, then call the program's own init.

    Args:
        threads: threads for torch, OpenCV and BLAS in each worker (``None``: leave them).
        user_init: the DataLoader's own ``worker_init_fn``, called afterwards.
    """

    def __init__(self, threads: int | None, user_init: Callable[[int], Any] | None = None) -> None:
        if threads is not None and (
            not isinstance(threads, int) or isinstance(threads, bool) or threads < 1
        ):
            raise ValueError(f"threads must be a positive integer or None, got {threads!r}")
        if isinstance(user_init, WorkerThreads):  # wrapping twice keeps one layer
            user_init = user_init.wrapped
        self.threads = threads
        self.user_init: Callable[[int], Any] | None = user_init
        if threads is not None:
            # Imported here so that forked workers inherit it instead of each importing it.
            with contextlib.suppress(ImportError):
                import threadpoolctl  # noqa: F401

    @property
    def wrapped(self) -> Callable[[int], Any] | None:
        """The program's own ``worker_init_fn`` (``None`` when it had none)."""
        return self.user_init

    def __call__(self, worker_id: int) -> None:
        if self.threads is not None:
            set_thread_counts(self.threads)
        if self.user_init is not None:
            self.user_init(worker_id)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, WorkerThreads)
            and other.threads == self.threads
            and other.user_init is self.user_init
        )

    def __hash__(self) -> int:
        return hash((self.threads, id(self.user_init)))

    def __repr__(self) -> str:
        user = getattr(self.user_init, "__qualname__", repr(self.user_init))
        return f"WorkerThreads(threads={self.threads}, then {user})"


# Read by the libraries when they load: covers a library the worker imports later (lazily).
THREAD_ENV_VARS = (
    "OPENCV_FOR_THREADS_NUM",
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
)


def set_thread_counts(threads: int) -> dict[str, Any]:
    """Set torch, OpenCV and BLAS/OpenMP thread counts in this process; returns what was set.

    Libraries already loaded are set through their own calls; for those loaded later the
    environment variables they read at load time are set too. OpenCV is not imported here when
    the program has not imported it (a worker that never uses it starts faster).
    """
    import os

    import torch

    for name in THREAD_ENV_VARS:
        os.environ[name] = str(threads)
    torch.set_num_threads(threads)
    applied: dict[str, Any] = {"threads": threads, "torch": threads}
    cv2 = sys.modules.get("cv2")
    if cv2 is not None and hasattr(cv2, "setNumThreads"):
        cv2.setNumThreads(threads)
        applied["cv2"] = threads
    else:
        applied["cv2"] = f"{threads} (OPENCV_FOR_THREADS_NUM, when imported)"
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        applied["blas"] = None
        applied["blas_note"] = "threadpoolctl is not installed: BLAS threads left as they are"
    else:
        _BLAS_LIMITER.clear()
        _BLAS_LIMITER.append(threadpool_limits(limits=threads))
        applied["blas"] = threads
    _APPLIED.clear()
    _APPLIED.update(applied)
    return applied


def thread_counts() -> dict[str, Any]:
    """The thread counts in effect in this process: torch, OpenCV, BLAS libraries.

    ``blas`` maps each loaded BLAS/OpenMP library (``openblas``, ``mkl``, ``openmp``...) to its
    thread count, or is ``None`` without threadpoolctl. ``set_by_codedag`` is what the last
    :class:`WorkerThreads` call in this process set (empty when none ran).
    """
    import torch

    counts: dict[str, Any] = {"torch": torch.get_num_threads()}
    try:
        import cv2

        counts["cv2"] = int(cv2.getNumThreads())
    except ImportError:  # pragma: no cover - opencv is a dependency of codedag
        counts["cv2"] = None
    counts["blas"] = None
    with contextlib.suppress(ImportError):
        from threadpoolctl import threadpool_info

        counts["blas"] = {
            str(info.get("internal_api")): int(info.get("num_threads", 0))
            for info in threadpool_info()
        }
    counts["set_by_codedag"] = dict(_APPLIED)
    return counts
