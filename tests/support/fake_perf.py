"""A fake ``perf`` program: counts fixed joules per power event and prints them on SIGINT."""

from __future__ import annotations

import sys
import time
from pathlib import Path

SCRIPT = """#!{python}
import signal, sys, time
from pathlib import Path

COUNTS = {counts!r}
args = sys.argv[1:]
out = Path(args[args.index("-o") + 1])
events = args[args.index("-e") + 1].split(",")


def stop(*_):
    lines = ["# started on a fake perf", ""]
    for event in events:
        name = event.removeprefix("power/").removesuffix("/")
        if name in COUNTS:
            lines.append(f"{{COUNTS[name]}},Joules,{{event}},1000,100.00,,")
        else:
            lines.append(f"<not counted>,Joules,{{event}},0,100.00,,")
    out.write_text("\\n".join(lines) + "\\n")
    sys.exit(0)


signal.signal(signal.SIGINT, stop)
Path({ready!r}).touch()
while True:
    time.sleep(0.01)
"""


def write_fake_perf(folder: Path, counts: dict[str, float]) -> tuple[Path, Path]:
    """An executable fake perf in ``folder`` and the file it creates once it counts."""
    ready = folder / "perf.ready"
    path = folder / "perf"
    path.write_text(SCRIPT.format(python=sys.executable, counts=counts, ready=str(ready)))
    path.chmod(0o755)
    return path, ready


def wait_for(path: Path, timeout_s: float = 20.0) -> None:
    """Wait until ``path`` exists (the fake perf has installed its SIGINT handler)."""
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear within {timeout_s} s")
        time.sleep(0.01)
