"""An LMDB environment is never closed under a read of another thread: neither by closing the
store nor by a fork (which closes every environment first). A read hands its decoder a view of
the environment's map; closing the environment unmaps it, and reading the view then ends the
process with SIGSEGV. Each case runs in a process of its own, so such a crash fails the test
instead of ending the test run.

The reading thread holds its view until the main thread lets it go; the main thread first gives
the closing thread half a second to close the environment under it (closing must wait instead:
the read then completes whatever the wait).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="fork, /dev/shm")

READER = textwrap.dedent(
    """
    import functools
    import os
    import sys
    import threading

    import numpy as np

    from codedag.store import environments
    from codedag.store.entry import decode, encode
    from codedag.store.lmdb_tier import LmdbTier
    from codedag.store.tiers import PrefixStore

    # CASE

    SECRET = bytes(range(32))
    tier = LmdbTier("disk", sys.argv[1], 64 << 20)
    store = PrefixStore([tier])
    store._secret = SECRET
    store.begin_run()
    value = np.arange(8 << 20, dtype=np.uint8)
    assert store.put(b"key", value, ()) == "stored"
    read = functools.partial(decode, secret=SECRET, key=b"key")

    inside, go = threading.Event(), threading.Event()
    got = []

    def holding(header, data):  # the view stays in use until the main thread lets it go
        inside.set()
        assert go.wait(60)
        return read(header, data)

    def reading():
        got.append(tier.get(b"key", holding))

    reader = threading.Thread(target=reading)
    reader.start()
    assert inside.wait(60)
    closer = threading.Thread(target=close)
    closer.start()
    closer.join(0.5)  # time to close the environment under the reader, were it allowed to
    go.set()
    reader.join()
    closer.join()
    assert np.array_equal(got[0][0], value)
    assert not environments.opened_here(tier._key)  # closed once the read was over
    assert np.array_equal(store.get(b"key")[0], value)  # and open again on the next use
    """
)

CLOSE_STORE = textwrap.dedent(
    """
    def close():
        store.close()
    """
)

FORK = textwrap.dedent(
    """
    def close():
        pid = os.fork()
        if pid == 0:  # the child opens the store again and reads the value
            found = store.get(b"key")
            os._exit(0 if found is not None and np.array_equal(found[0], value) else 3)
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    """
)


def _run(tmp_path: Path, case: str) -> None:
    script = READER.replace("# CASE\n", case)  # close(): run while the reader holds its view
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "store")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stderr}"


def test_closing_the_store_waits_for_a_read_of_another_thread(tmp_path: Path) -> None:
    _run(tmp_path, CLOSE_STORE)


def test_a_fork_waits_for_a_read_of_another_thread(tmp_path: Path) -> None:
    """DataLoader workers are forked from the main thread while the writer thread may be reading
    a value back; the child then opens the store itself."""
    _run(tmp_path, FORK)


INTERRUPTED_FORK = textwrap.dedent(
    """
    import os
    import signal
    import sys
    import time

    from codedag.store import environments
    from codedag.util.signals import interrupt_on_signals


    class Interrupting:  # told of the fork: Ctrl-C lands while it waits there
        def before_fork(self):
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(10_000):  # the handler runs here, inside the fork's hook
                pass

        def after_fork_in_parent(self):
            pass

        def after_fork_in_child(self):
            pass


    user = Interrupting()
    environments.on_fork(user)
    try:
        with interrupt_on_signals():
            pid = os.fork()
            if pid == 0:
                os._exit(0)
            os.waitpid(pid, 0)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:  # the work goes on until the signal comes back
                time.sleep(0.01)
    except KeyboardInterrupt:
        sys.exit(0)
    sys.exit(3)  # the interruption was dropped
    """
)


def test_an_interruption_landing_in_the_fork_hooks_is_delivered_after_the_fork() -> None:
    """Python drops an exception raised in a fork's hooks: Ctrl-C pressed while the store waits
    there (a DataLoader forking its workers) must still interrupt the program."""
    done = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_FORK], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stderr}"
