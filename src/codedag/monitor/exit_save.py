"""A running mode saved when the process ends during it: an exit hook that ends the mode as
``interrupted`` or ``failed`` and writes everything measured, and optionally SIGTERM turned into
``SystemExit`` while a mode runs, so that ``docker stop`` and batch schedulers save it too."""

from __future__ import annotations

import atexit
import logging
import os
import signal
import sys
import threading
import weakref
from collections.abc import Callable
from typing import Any, Protocol

from codedag.util.signals import interruption_name

log = logging.getLogger("codedag.monitor.experiment")  # what the monitor itself logs


class _Monitor(Protocol):
    @property
    def current_mode(self) -> str | None: ...

    def stop_mode(self, status: str = ..., error: str | None = ...) -> Any: ...

    def close(self) -> None: ...


def ending_status(exc: BaseException) -> tuple[str, str]:
    """The status and error of a mode that ``exc`` ended: ``interrupted`` for Ctrl-C (and
    SIGTERM under the codedag CLI), else ``failed`` with the exception."""
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted", interruption_name(exc)
    return "failed", f"{type(exc).__name__}: {exc}"


class _AtExit:
    """One function registered with :mod:`atexit` at most once, until it is unregistered."""

    def __init__(self, function: Callable[[], None]) -> None:
        self._function = function
        self._registered = False

    def register(self) -> None:
        if not self._registered:
            atexit.register(self._function)
            self._registered = True

    def unregister(self) -> None:
        if self._registered:
            atexit.unregister(self._function)
            self._registered = False


class ExitSave:
    """The exit hooks and SIGTERM handler of one monitor: the mode's, installed while a mode
    runs, and the run's, which closes the monitor at exit if nobody did.

    Args:
        monitor: the monitor (held weakly: the hooks never keep it alive).
        pid: the monitor's process; a forked child exiting saves nothing.
        handle_sigterm: turn SIGTERM into ``SystemExit(143)`` while a mode runs (installed only
            from the main thread, over the default handler).
    """

    def __init__(self, monitor: _Monitor, pid: int, handle_sigterm: bool) -> None:
        self._monitor = weakref.ref(monitor)
        self._pid = pid
        self.handle_sigterm = handle_sigterm
        self._mode_hook = _AtExit(self.on_exit)
        self._run_hook = _AtExit(self._close)
        self._previous_sigterm: Any = None
        self._signal_name: str | None = None

    def install(self) -> None:
        """Install the SIGTERM handler (if asked for) and the exit hook, once."""
        self._install_sigterm()
        self._mode_hook.register()

    def remove(self) -> None:
        """Remove the exit hook and put the previous SIGTERM handler back."""
        self._mode_hook.unregister()
        self._restore_sigterm()

    def close_at_exit(self) -> None:
        """At exit, save a mode still running and close the monitor (in its own process)."""
        self._run_hook.register()

    def keep_open_at_exit(self) -> None:
        """Undo :meth:`close_at_exit` (the monitor was closed)."""
        self._run_hook.unregister()

    def _close(self) -> None:
        monitor = self._monitor()
        if monitor is not None and os.getpid() == self._pid:
            self.on_exit()  # a mode still running is saved as interrupted or failed
            monitor.close()

    def on_exit(self) -> None:
        """End a mode still running as ``interrupted`` or ``failed`` and save it."""
        monitor = self._monitor()
        if monitor is None or monitor.current_mode is None or os.getpid() != self._pid:
            return  # nothing running, or a forked child (e.g. a DataLoader worker) exiting
        exc = getattr(sys, "last_value", None)  # set when an uncaught exception ended main
        if self._signal_name is not None:
            status, error = "interrupted", self._signal_name
        elif exc is None:
            status, error = "interrupted", "process exited during the mode"
        else:
            status, error = ending_status(exc)
        try:
            monitor.stop_mode(status, error)
        except Exception as failure:  # pragma: no cover - never raise at interpreter exit
            log.error("could not save results at exit: %s", failure)

    def _install_sigterm(self) -> None:
        if not self.handle_sigterm or self._previous_sigterm is not None:
            return
        if threading.current_thread() is not threading.main_thread():
            log.warning("handle_sigterm needs start_mode() on the main thread: not installed")
            return
        if signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None):
            log.info("SIGTERM already has a handler: leaving it")
            return
        ref = weakref.ref(self)

        def on_sigterm(signum: int, frame: object) -> None:
            saver = ref()
            if saver is not None and os.getpid() == saver._pid:
                saver._signal_name = "SIGTERM"
            raise SystemExit(128 + signum)

        self._previous_sigterm = signal.signal(signal.SIGTERM, on_sigterm)

    def _restore_sigterm(self) -> None:
        if self._previous_sigterm is None:
            return
        try:
            signal.signal(signal.SIGTERM, self._previous_sigterm)
        except ValueError:  # pragma: no cover - stop_mode from another thread
            log.warning("could not restore the SIGTERM handler (not on the main thread)")
        self._previous_sigterm = None
