"""SIGTERM and SIGHUP handled like Ctrl-C, so every interruption runs the same cleanup.

``docker stop``, batch schedulers and a closed terminal send SIGTERM or SIGHUP, whose default
action ends the process at once: no ``finally`` block runs, nothing measured is saved, and child
processes are orphaned. Inside :func:`interrupt_on_signals` these signals raise
:class:`Terminated`, a ``KeyboardInterrupt``, so code that already saves its work on Ctrl-C does
the same for them. A process forked inside the block (a DataLoader worker) keeps the default
action: it ends at once, as it would without codedag.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from types import FrameType

HANDLED = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


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


@contextlib.contextmanager
def interrupt_on_signals(signals: tuple[int, ...] = HANDLED) -> Iterator[None]:
    """Within the block, ``signals`` raise :class:`Terminated` in the main thread.

    Off the main thread (where handlers cannot be installed) it does nothing. The previous
    handlers are restored on exit.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    owner = os.getpid()

    def handler(signum: int, frame: FrameType | None) -> None:
        if os.getpid() != owner:  # a forked child: the default action, at once
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        raise Terminated(signum)

    previous = {sig: signal.signal(sig, handler) for sig in signals}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
