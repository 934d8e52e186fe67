"""SIGTERM/SIGHUP raise like Ctrl-C inside the block; result writes defer them; held logs."""

from __future__ import annotations

import io
import logging
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from codedag.util.logs import held_logs
from codedag.util.signals import (
    Terminated,
    deferred_interrupts,
    interrupt_on_signals,
    interruption_name,
)

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


def test_sigterm_raises_terminated_and_handlers_are_restored() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Terminated) as info, interrupt_on_signals():
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(1000):  # the handler runs between bytecodes
            pass
    assert isinstance(info.value, KeyboardInterrupt)
    assert info.value.exit_code == 143 and interruption_name(info.value) == "SIGTERM"
    assert signal.getsignal(signal.SIGTERM) is before


def test_deferred_block_completes_then_raises() -> None:
    steps = []
    with pytest.raises(KeyboardInterrupt), interrupt_on_signals():
        with deferred_interrupts():
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):
                pass
            steps.append("written")  # the interruption waited for this
        steps.append("after")  # never reached: raised when the block ended
    assert steps == ["written"]


def test_forked_child_keeps_the_default_sigterm(tmp_path: Path) -> None:
    script = tmp_path / "fork.py"
    script.write_text(
        textwrap.dedent(
            """
            import os, signal, time
            from codedag.util.signals import interrupt_on_signals
            with interrupt_on_signals():
                ready, tell = os.pipe()
                pid = os.fork()
                if pid == 0:
                    os.write(tell, b"x")  # running Python code, handlers in place
                    time.sleep(30)
                    os._exit(0)
                os.read(ready, 1)
                os.kill(pid, signal.SIGTERM)
                _, status = os.waitpid(pid, 0)
                print(os.WIFSIGNALED(status), os.WTERMSIG(status) == signal.SIGTERM)
            """
        )
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["True", "True"], out.stderr


def test_held_logs_show_on_success_and_drop_on_failure() -> None:
    stream = io.StringIO()
    logger = logging.getLogger("codedag.test_held")
    root = logging.getLogger("codedag")
    handler = logging.StreamHandler(stream)
    root.addHandler(handler)
    try:
        with held_logs():
            logger.warning("kept")
            assert stream.getvalue() == ""
        assert "kept" in stream.getvalue()
        with pytest.raises(ValueError), held_logs():
            logger.warning("dropped")
            raise ValueError("the error alone is shown")
        assert "dropped" not in stream.getvalue()
        assert handler in root.handlers
    finally:
        root.removeHandler(handler)


class _SlowFinalizer:
    """Stands for a DataLoader iterator whose ``__del__`` shuts its workers down."""

    def __del__(self) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(10_000):  # the handler runs here, inside __del__
            pass


def test_a_signal_landing_in_a_finalizer_is_delivered_again_not_dropped() -> None:
    import time

    with pytest.raises(Terminated), interrupt_on_signals():
        _SlowFinalizer()  # collected at once: SIGTERM arrives inside its __del__
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:  # the work goes on ... until the signal comes back
            time.sleep(0.01)


def test_a_command_that_swallows_sigterm_does_not_report_success(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import argparse

    from codedag.cli import main as cli_main

    def swallowing(_args: argparse.Namespace) -> int:
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):
                pass
        except KeyboardInterrupt:
            pass  # a library that catches everything
        return 0

    import codedag.cli.doctor as doctor

    monkeypatch.setattr(doctor, "run", swallowing)
    assert cli_main.main(["doctor"]) == 143
    assert "interrupted by SIGTERM" in capsys.readouterr().err
