"""A DataLoader ``worker_init_fn`` that sets the thread counts of torch, OpenCV and BLAS.

The libraries with a thread pool of their own (OpenCV's) are declared by their packages
(``facts.py``: :class:`~codedag.backends.facts.ThreadPool`): the functions setting and reading
its size, the environment variable it reads when it loads, and whether shrinking it joins its
threads (the fork hazard below).

PyTorch starts each DataLoader worker with one torch thread but leaves OpenCV's and the BLAS
library's thread pools as they are: each worker then runs as many OpenCV and BLAS threads as
there are cores, and N workers fight over the same cores. :class:`WorkerThreads` sets them to a
measured count in every worker, then calls the program's own ``worker_init_fn`` (which is never
dropped, and runs last, so a thread count the program sets itself wins).

Workers started by ``fork`` (Linux's default) inherit the main process's thread pools without
their threads, and two of them must then be handled with care:

* GNU OpenMP (torch's intra-op pool) hangs in a forked child that runs more than one thread when
  the parent has used its pool: torch stays at one thread there (what PyTorch itself sets);
* OpenCV's pthreads pool joins its threads when it shrinks, and a forked child would wait
  forever for threads that only existed in the parent. When a DataLoader whose init is a
  :class:`WorkerThreads` starts its workers, a fork hook stops the parent's OpenCV pool just
  before each fork (it restarts on the parent's next parallel call, with its thread count
  restored), so the child's pool is empty and safe to size. Other forks are left alone.

BLAS threads are set through ``threadpoolctl`` where it is installed (it comes with scikit-learn
and librosa; OpenBLAS is fork-safe); without it only the environment variables a BLAS library
reads when it loads later are set, and :func:`thread_counts` says so. Workers started by
``spawn`` or ``forkserver`` get every count as asked. The class pickles by reference, so it works
with every start method.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import sys
from collections.abc import Callable
from typing import Any

from codedag.backends import libraries
from codedag.backends.facts import ThreadPool

log = logging.getLogger(__name__)

# What the last WorkerThreads call in this process set, for read-back (tests, diagnostics).
_APPLIED: dict[str, Any] = {}
# threadpoolctl's limiter: kept alive so that its limits stay set for the worker's life.
_BLAS_LIMITER: list[Any] = []
# Fork bookkeeping: "forked" (this process is a forked child), "<library>_at_fork" (the library
# was loaded when it forked), "<library>_pool_stopped" (the parent stopped the library's pool
# just before forking), "<library>_restore" (the size to restore in the parent).
_FORK_STATE: dict[str, Any] = {"forked": False}
_HOOKS: list[bool] = []


def _pools() -> list[tuple[str, Any, ThreadPool]]:
    """``(library name, module or None, pool)`` of each library with a pool of its own (the
    module only when the program imported it and it has the pool's functions)."""
    out = []
    for facts, pool in libraries.thread_pools():
        module = sys.modules.get(facts.modules[0])
        usable = module is not None and hasattr(module, pool.set_threads)
        out.append((facts.name, module if usable else None, pool))
    return out


def _forking_for_thread_settings() -> bool:
    """Whether this fork starts the workers of a DataLoader whose init is a WorkerThreads."""
    frame = sys._getframe(2)
    for _ in range(12):
        if frame is None:
            return False
        owner = frame.f_locals.get("self")
        init = getattr(owner, "_worker_init_fn", None)
        if isinstance(init, WorkerThreads) and init.threads is not None:
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


def _before_fork() -> None:
    pools = [p for p in _pools() if p[2].joins_on_shrink]
    for name, _module, _pool in pools:
        _FORK_STATE[f"{name}_restore"] = None
        _FORK_STATE[f"{name}_pool_stopped"] = False
    if not any(module is not None for _, module, _ in pools) or not _forking_for_thread_settings():
        return
    for name, module, pool in pools:
        if module is None:
            continue
        try:
            previous = int(getattr(module, pool.get_threads)())
            getattr(module, pool.set_threads)(1)  # joins the pool's threads here, where they exist
        except Exception:  # pragma: no cover - a broken library: leave its pool alone
            continue
        _FORK_STATE[f"{name}_pool_stopped"] = True
        if previous != 1:
            _FORK_STATE[f"{name}_restore"] = previous


def _after_fork_in_parent() -> None:
    for name, module, pool in _pools():
        previous = _FORK_STATE.pop(f"{name}_restore", None)
        _FORK_STATE[f"{name}_pool_stopped"] = False
        if previous is not None and module is not None:
            with contextlib.suppress(Exception):
                getattr(module, pool.set_threads)(previous)


def _after_fork_in_child() -> None:
    _FORK_STATE["forked"] = True
    for name, module, _pool in _pools():
        _FORK_STATE[f"{name}_at_fork"] = module is not None
        _FORK_STATE.pop(f"{name}_restore", None)


def _install_fork_hooks() -> None:
    """Install the fork hooks once per process (they act only for WorkerThreads' DataLoaders)."""
    if not _HOOKS and hasattr(os, "register_at_fork"):
        os.register_at_fork(
            before=_before_fork,
            after_in_parent=_after_fork_in_parent,
            after_in_child=_after_fork_in_child,
        )
        _HOOKS.append(True)


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
            _install_fork_hooks()
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


def threads_of(init: Any) -> int | None:
    """The thread count a ``worker_init_fn`` sets (None: not a codedag thread setter)."""
    return init.threads if isinstance(init, WorkerThreads) else None


def user_worker_init(loader: Any) -> Any:
    """A DataLoader's own ``worker_init_fn`` (unwrapped from a codedag thread setter)."""
    init = loader.worker_init_fn
    return init.user_init if isinstance(init, WorkerThreads) else init


# Read by the libraries when they load: covers a library the worker imports later (lazily);
# the libraries with a pool of their own add theirs (OPENCV_FOR_THREADS_NUM).
THREAD_ENV_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def thread_env_vars() -> tuple[str, ...]:
    """Every environment variable a thread count is set through."""
    return (*(pool.env for _, pool in libraries.thread_pools()), *THREAD_ENV_VARS)


def set_thread_counts(threads: int) -> dict[str, Any]:
    """Set torch, OpenCV and BLAS thread counts in this process; returns what was set.

    Libraries already loaded are set through their own calls; for those loaded later the
    environment variables they read at load time are set too. OpenCV is not imported here when
    the program has not imported it (a worker that never uses it starts faster). In a forked
    worker, torch stays at one thread and OpenCV is sized only when its pool is known to be
    empty (see the module docstring).
    """
    import torch

    for variable in thread_env_vars():
        os.environ[variable] = str(threads)
    forked = bool(_FORK_STATE["forked"])
    applied: dict[str, Any] = {"threads": threads, "forked": forked}
    if forked and threads > 1:
        torch.set_num_threads(1)
        applied["torch"] = 1
        applied["torch_note"] = "one thread in a forked worker (GNU OpenMP is not fork-safe)"
    else:
        torch.set_num_threads(threads)
        applied["torch"] = threads
    for name, module, pool in _pools():
        inherited = _FORK_STATE.get(f"{name}_at_fork", False)
        stopped = _FORK_STATE.get(f"{name}_pool_stopped", False)
        if module is None:
            applied[name] = f"{threads} ({pool.env}, when imported)"
        elif not forked or not pool.joins_on_shrink or not inherited or stopped:
            getattr(module, pool.set_threads)(threads)
            applied[name] = threads
        else:
            applied[name] = None
            applied[f"{name}_note"] = (
                f"left as inherited: the main process's {name} pool was not stopped"
            )
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        applied["blas"] = None
        applied["blas_note"] = "threadpoolctl is not installed: BLAS threads left as they are"
    else:
        _BLAS_LIMITER.clear()
        # BLAS only: OpenMP is torch's pool here, sized above.
        _BLAS_LIMITER.append(threadpool_limits(limits=threads, user_api="blas"))
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
    for facts, pool in libraries.thread_pools():
        try:
            module = importlib.import_module(facts.modules[0])
            counts[facts.name] = int(getattr(module, pool.get_threads)())
        except (ImportError, AttributeError):  # pragma: no cover - the library is optional
            counts[facts.name] = None
    counts["blas"] = None
    with contextlib.suppress(ImportError):
        from threadpoolctl import threadpool_info

        counts["blas"] = {
            str(info.get("internal_api")): int(info.get("num_threads", 0))
            for info in threadpool_info()
        }
    counts["set_by_codedag"] = dict(_APPLIED)
    return counts
