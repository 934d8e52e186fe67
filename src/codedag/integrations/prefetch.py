"""Import the planner in a background thread while a script's first batches train.

Most of a first ``codedag run``'s fixed cost is importing the planning modules and building the
backends' registry; the training step that runs meanwhile spends most of its time in torch's
kernels, which let another thread run. :func:`start` begins it (once per process) and
:func:`settle` waits for it to end: before the planner is imported in the script's thread (so
two threads never import codedag's modules at once) and before a DataLoader forks its workers (a
child forked mid-import would find that module's lock held forever). An import that fails is
left for the planner to meet, and report, when it imports the module itself.
"""

from __future__ import annotations

import importlib
import logging
import sys
import threading

from codedag.util.gc_pause import gc_paused

log = logging.getLogger(__name__)

PLANNING_MODULES = (
    "codedag.integrations.autoplan",
    "codedag.trace.tracer",
    "codedag.trace.dataloader",
    "codedag.optimize.manager",
    "codedag.migrate.api",
    "codedag.trace.recorder",
    "codedag.calibrate.run",
    "codedag.calibrate.store_costs",
    "codedag.backends.batched.backends",
)
"""What tracing, planning and applying import (with the backends' registry, and the backends of
the libraries the script imported). None of them imports a module of torch's own; the backends
of an imported library import some of its modules (``PIL.ImageFilter``), which Python's lock
per module keeps safe beside a script importing the same module meanwhile."""

_ALWAYS_IMPORTED = ("numpy", "torch", "random", "scipy")
"""Libraries every script with torch has imported, or that many import for other work than
their samples (SciPy, through scikit-learn, librosa, metrics): importing them says nothing of
the samples."""

_thread: threading.Thread | None = None


def likely_to_plan() -> bool:
    """Whether the script imported a library codedag accelerates besides numpy, torch and
    ``random`` (cv2, PIL, librosa, ...): then its samples likely call it and a plan will be
    made. Only whether to import in the background depends on it, never what is planned."""
    from codedag.backends.libraries import library_facts

    return any(
        module in sys.modules
        for facts in library_facts()
        for module in facts.modules
        if module not in _ALWAYS_IMPORTED
    )


def _run() -> None:
    with gc_paused():  # a GC pass over the script's heap per few thousand new objects: 0.1-0.3 s
        _import_planner()


def _import_planner() -> None:
    for name in PLANNING_MODULES:
        try:
            importlib.import_module(name)
        except Exception as error:  # the planner imports it again and reports why
            log.debug("importing %s in the background failed: %s", name, error)
            return
    try:  # the registry, with the ops packages of the libraries the script imported (under
        # its own lock): planning admits their calls
        from codedag.backends.registry import default_registry

        default_registry().load_imported()
    except Exception as error:
        log.debug("building the registry in the background failed: %s", error)


def start() -> None:
    """Start importing :data:`PLANNING_MODULES` in a background thread (once per process)."""
    global _thread
    if _thread is None:
        _thread = threading.Thread(target=_run, name="codedag-prefetch", daemon=True)
        _thread.start()


def settle() -> None:
    """Wait for the background import to end (at once when none was started)."""
    if _thread is not None:
        _thread.join()


def settled() -> bool:
    """Whether the background import has ended, or none was started (never waits)."""
    return _thread is None or not _thread.is_alive()
