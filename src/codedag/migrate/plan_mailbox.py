"""DataLoader workers that started before the plan was made receive it where they run.

A plan made while an epoch runs (``codedag run`` plans after the first batch) or after it
(persistent workers serve every epoch with the code they started with) never reaches workers
that are running already: a forked worker inherited the functions as they were, one started
afresh imported them anew. So the loader's workers are started with a :class:`MailboxInWorker`
as their ``worker_init_fn``: after the program's own, it makes each fetch of the worker's
dataset fetcher first look for the plan in a :class:`Mailbox` (one ``stat`` of a file that is
not there yet: about a microsecond per batch). Once the process that plans posts it, each
worker applies it before its next fetch (as a worker started afresh applies a plan it receives:
:class:`~codedag.migrate.spawned_workers.WorkerPlan`; batched chains run per sample there) and
stops looking; where no plan comes, the post says so and the workers stop looking too.

A worker's random draws are the same as without codedag: applying draws nothing, and Python's,
NumPy's and torch's generators are put back after it all the same. The mailbox is a private
folder (0700, :func:`tempfile.mkdtemp`); its file is read only when it is a regular file of
this user's, not through a link, and within a size cap.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the run time is imported in a worker only when a plan comes
    from codedag.migrate.spawned_workers import WorkerPlan

PLAN_FILE = "plan.pickle"
MAX_BYTES = 64 << 20


class Mailbox:
    """A private folder where the process that plans leaves what its running workers apply."""

    def __init__(self) -> None:
        self.path = Path(tempfile.mkdtemp(prefix="codedag-plan-mailbox-"))
        self.posted = False
        self.delivered = False  # a plan was posted, not nothing

    def worker_init(self, own: Callable[[int], Any] | None) -> MailboxInWorker:
        """The ``worker_init_fn`` that makes a worker look here before each fetch, after
        ``own`` (the program's; None: it had none)."""
        return MailboxInWorker(str(self.path), own)

    def post(self, plan: WorkerPlan | None) -> None:
        """Leave ``plan`` for the workers (None: no plan comes; they stop looking). Once."""
        if self.posted:
            return
        self.posted = True
        try:
            data = pickle.dumps(plan)
        except Exception:  # a setting that cannot travel: the workers run on unchanged
            plan, data = None, pickle.dumps(None)
        from codedag.migrate.spawned_workers import write_private

        with contextlib.suppress(OSError):  # a folder removed meanwhile: the workers run on
            write_private(self.path / PLAN_FILE, data)
            self.delivered = plan is not None

    def close(self) -> None:
        """Remove the folder (workers still looking find nothing and run on unchanged)."""
        shutil.rmtree(self.path, ignore_errors=True)


class MailboxInWorker:
    """A DataLoader ``worker_init_fn``: the program's own, then the mailbox watch (picklable:
    a worker started afresh receives it pickled).

    Args:
        folder: the :class:`Mailbox`'s folder.
        own: the program's ``worker_init_fn`` (None: it had none).
    """

    def __init__(self, folder: str, own: Callable[[int], Any] | None) -> None:
        self.folder = folder
        self.own = own

    def __call__(self, worker_id: int) -> None:
        if self.own is not None:
            self.own(worker_id)
        _watch(Path(self.folder) / PLAN_FILE)


def _fetcher_classes() -> tuple[type, ...]:
    from torch.utils.data._utils import fetch

    return (fetch._MapDatasetFetcher, fetch._IterableDatasetFetcher)


def _watch(path: Path) -> None:
    """Make each fetch in this worker look for the plan at ``path`` first."""
    originals = {cls: cls.__dict__["fetch"] for cls in _fetcher_classes()}

    def unwatch() -> None:
        for cls, fetch in originals.items():
            cls.fetch = fetch  # type: ignore[attr-defined]

    def looking(cls: type) -> Callable[..., Any]:
        def fetch(self: Any, possibly_batched_index: Any) -> Any:
            _look(path, unwatch)
            current = cls.__dict__["fetch"]  # the plan's, once applied; else the original
            if current is fetch:
                current = originals[cls]
            return current(self, possibly_batched_index)

        return fetch

    for cls in originals:
        cls.fetch = looking(cls)  # type: ignore[attr-defined]


def _look(path: Path, unwatch: Callable[[], None]) -> None:
    """Apply the plan once it is posted (the watch removed first: the plan patches the fetch)."""
    try:
        info = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return
    except OSError:  # the folder is gone or unreadable: no plan will come
        unwatch()
        return
    unwatch()
    plan = _read(path, info)
    if plan is not None:
        from codedag.migrate import random_states
        from codedag.migrate.spawned_workers import apply_in_worker

        states = random_states.capture()
        try:
            apply_in_worker(plan)
        finally:
            random_states.restore(states)


def _read(path: Path, info: os.stat_result) -> WorkerPlan | None:
    """The posted plan; None where it is none, or the file is not one this user's process
    wrote into its private folder (a link, another owner, too large, not a plan)."""
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_size > MAX_BYTES:
        return None
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(descriptor, "rb") as handle:
            plan = pickle.loads(handle.read(MAX_BYTES + 1))
    except Exception:  # unreadable: the worker runs on with the libraries' own functions
        return None
    from codedag.migrate.spawned_workers import WorkerPlan

    return plan if isinstance(plan, WorkerPlan) else None
