"""Ctrl-C, SIGTERM and SIGHUP handled alike, so every interruption runs the same cleanup.

``docker stop``, batch schedulers and a closed terminal send SIGTERM or SIGHUP, whose default
action ends the process at once: no ``finally`` block runs, nothing measured is saved, and child
processes are orphaned. Inside :func:`interrupt_on_signals` these signals raise
:class:`Terminated`, a ``KeyboardInterrupt``, so code that already saves its work on Ctrl-C does
the same for them; SIGINT raises ``KeyboardInterrupt`` as Python's own handler does.

:func:`deferred_interrupts` marks a short critical section (writing a results file): a signal that
arrives inside it is raised when the section ends, so the file is complete. A process forked
inside the block (a DataLoader worker) behaves as without codedag: SIGTERM and SIGHUP end it at
once, SIGINT raises ``KeyboardInterrupt`` there.

An exception raised inside a finalizer (``__del__``: a DataLoader iterator shutting its workers
down) or a fork's hooks (between :func:`redeliver_interrupts` calls: the prefix cache's store
waiting for its readers before a DataLoader forks its workers) is printed and dropped by Python,
so a signal that lands there is delivered again a moment later instead; and :func:`interrupted_by` tells the caller that a signal came, in case code it ran
swallowed the exception anyway (a command must not report success after a SIGTERM).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from types import FrameType

HANDLED = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)

_state = threading.local()  # per thread, though handlers only ever run in the main thread
_pending: list[int] = []
_received: list[int] = []
REDELIVER_S = 0.05
"""Delay before a signal that landed in a finalizer is sent again."""


class Terminated(KeyboardInterrupt):
    """A termination signal, raised in the main thread like Ctrl-C's ``KeyboardInterrupt``."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        self.signal_name = signal.Signals(signum).name
        super().__init__(self.signal_name)

    @property
    def exit_code(self) -> int:
        """The shell's convention for a process ended by this signal (143 for SIGTERM)."""
        return 128 + self.signum


def interruption_name(error: BaseException) -> str:
    """``"SIGTERM"``/``"SIGHUP"`` for :class:`Terminated`, else ``"KeyboardInterrupt"``."""
    return error.signal_name if isinstance(error, Terminated) else "KeyboardInterrupt"


def pid_exists(pid: int) -> bool:
    """Whether process ``pid`` exists (signal 0 reaches it, or it belongs to another user); a
    zombie still does."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _raise_for(signum: int) -> None:
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Terminated(signum)


@contextlib.contextmanager
def interrupt_on_signals(signals: tuple[int, ...] = HANDLED) -> Iterator[None]:
    """Within the block, ``signals`` raise in the main thread (see the module docstring).

    Off the main thread (where handlers cannot be installed) it does nothing. The previous
    handlers are restored on exit.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    owner = os.getpid()

    def handler(signum: int, frame: FrameType | None) -> None:
        if os.getpid() != owner:  # a forked child: what it would do without codedag
            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        _received.append(signum)
        if getattr(_state, "defer", 0):
            _pending.append(signum)
            return
        if getattr(_state, "redeliver", 0) or _in_finalizer(frame):  # Python would drop it
            timer = threading.Timer(REDELIVER_S, os.kill, (owner, signum))
            timer.daemon = True
            timer.start()
            return
        _raise_for(signum)

    previous = {sig: signal.signal(sig, handler) for sig in signals}
    _received.clear()
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def redeliver_interrupts(on: bool) -> None:
    """From ``on=True`` to ``on=False`` (nested in pairs), a signal that lands in this thread is
    sent again a moment later instead of raising there: for code whose exceptions Python prints
    and drops, as it does those of a fork's hooks (``os.register_at_fork``).
    """
    _state.redeliver = max(0, getattr(_state, "redeliver", 0) + (1 if on else -1))


def interrupted_by() -> int | None:
    """The first signal the last :func:`interrupt_on_signals` block received, or ``None``."""
    return _received[0] if _received else None


def _in_finalizer(frame: FrameType | None) -> bool:
    """Whether ``frame`` runs inside an object's ``__del__`` (where exceptions are dropped)."""
    while frame is not None:
        if frame.f_code.co_name == "__del__":
            return True
        frame = frame.f_back
    return False


@contextlib.contextmanager
def deferred_interrupts() -> Iterator[None]:
    """Hold signals handled by :func:`interrupt_on_signals` until the block ends, then raise.

    Without those handlers installed (codedag used as a library), signals act as usual.
    """
    _state.defer = getattr(_state, "defer", 0) + 1
    try:
        yield
    finally:
        _state.defer -= 1
        if not _state.defer and _pending and threading.current_thread() is threading.main_thread():
            signum = _pending[0]
            _pending.clear()
            _raise_for(signum)
