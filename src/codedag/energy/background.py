"""A background training load for parallel mode, always stopped.

The background command runs again and again (each run in its own process group) until the
foreground experiment ends; :meth:`BackgroundLoad.stop` ends the running group (TERM, then KILL)
and is called on every exit path, including Ctrl-C and errors, by the context manager.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from codedag.energy.process import REGISTRY, ProcessRegistry, run_command
from codedag.errors import ExperimentError

log = logging.getLogger(__name__)


class BackgroundLoad:
    """Runs ``argv`` in a loop in a thread until stopped; output goes to ``log_path`` only."""

    def __init__(
        self,
        argv: Sequence[str],
        log_path: Path,
        env: Mapping[str, str] | None = None,
        registry: ProcessRegistry = REGISTRY,
    ) -> None:
        self.argv = list(argv)
        self.log_path = log_path
        self.env = env
        self.registry = registry
        self.runs = 0
        self.failures = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                result = run_command(
                    self.argv, self.log_path, env=self.env, stop=self._stop, registry=self.registry
                )
            except ExperimentError as error:
                log.error("background load cannot start: %s", error)
                self.failures += 1
                return
            self.runs += 1
            if result.exit_code not in (0, None):
                self.failures += 1
                if self._stop.wait(1.0):  # do not spin on a command that fails at once
                    return

    def start(self) -> BackgroundLoad:
        """Start the loop thread."""
        self._thread = threading.Thread(target=self._loop, name="background-load", daemon=True)
        self._thread.start()
        log.info("background load started: %s", " ".join(self.argv))
        return self

    def stop(self) -> None:
        """End the running command's group and the loop; returns when both are gone."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        log.info("background load stopped after %d run(s)", self.runs)

    def info(self) -> dict[str, object]:
        """What ran in the background, for experiment.json."""
        return {"command": self.argv, "runs": self.runs, "failures": self.failures}

    def __enter__(self) -> BackgroundLoad:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
