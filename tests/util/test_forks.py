"""Fork hooks run by stage: a child's resets come before what reads the reset state."""

from __future__ import annotations

import os

import pytest

from codedag.util import forks


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_a_report_hook_registered_first_still_runs_after_every_reset() -> None:
    order: list[str] = []

    def report() -> None:
        order.append("report")

    def reset() -> None:
        order.append("reset")

    def failing_reset() -> None:
        raise RuntimeError("a hook that fails")

    forks.on_fork(after_in_child=report, stage=forks.REPORT)
    forks.on_fork(after_in_child=failing_reset)
    forks.on_fork(after_in_child=reset)
    forks.on_fork(after_in_child=reset)  # once, however often it is given
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: say what ran, in which order
        os.write(write, ",".join(order).encode())
        os._exit(0)
    os.close(write)
    try:
        got = os.read(read, 1024).decode()
    finally:
        os.close(read)
        os.waitpid(pid, 0)
        forks._after_in_child[:] = [
            (s, h) for s, h in forks._after_in_child if h not in (report, reset, failing_reset)
        ]
    assert got == "reset,report"
    assert order == []  # the parent ran none of them
