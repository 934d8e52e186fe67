"""SIGTERM and SIGINT during ``codedag demo``: every measured batch kept, mode interrupted, no
DataLoader worker left behind.

The CLI runs through a small launcher that prints a line after each measured batch (nothing else
changes), so the signal is sent at a known point: after batch 2 of the mode under test, while
batch 3 is being loaded or trained.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import select
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest

from codedag.cli.main import main
from codedag.monitor.results import load_results

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

LAUNCHER = textwrap.dedent(
    """
    import faulthandler
    import sys
    from collections import Counter

    from codedag.cli.main import main

    faulthandler.enable()  # a crash prints every thread's stack to stderr, which the test shows
    from codedag.monitor.experiment import ExperimentMonitor

    counts = Counter()
    end_batch = ExperimentMonitor.end_batch

    def announcing_end_batch(self, n_samples=0):
        end_batch(self, n_samples)
        counts[self.current_mode] += 1
        print("batch", self.current_mode, counts[self.current_mode], flush=True)

    ExperimentMonitor.end_batch = announcing_end_batch
    raise SystemExit(main(sys.argv[1:]))
    """
)


CASES = [  # (mode signalled, signal, DataLoader workers)
    ("baseline", "SIGTERM", 2),
    ("baseline", "SIGINT", 0),
    ("optimization", "SIGTERM", 0),
    ("optimization", "SIGINT", 2),
]


class Demo:
    """One launched demo, signalled after batch 2 of ``mode``."""

    def __init__(self, tmp_path: Path, mode: str, signame: str, workers: int) -> None:
        self.mode, self.signame, self.workers = mode, signame, workers
        self.out = tmp_path / f"{mode}_{signame}_{workers}"
        command = [sys.executable, str(tmp_path / "launch.py"), "demo", "--batches", "4"]
        command += ["--batch-size", "2", "--workers", str(workers), "--device", "cpu"]
        command += ["--out", str(self.out), "--no-tune"]  # the signals hit training, not tuning
        env = {**os.environ, "OMP_NUM_THREADS": "1"}  # four demos share the cores
        self.stderr_path = tmp_path / f"{mode}_{signame}_{workers}.stderr"
        with open(self.stderr_path, "w") as stderr:  # a file: a full pipe would stall the demo
            self.proc = subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=stderr, bufsize=0, env=env
            )
        assert self.proc.stdout is not None
        self.fd = self.proc.stdout.fileno()
        self.pending = b""
        self.children: list[psutil.Process] = []
        self.signalled = False

    def read(self) -> None:
        """Read what is there (unbuffered: select sees every line); signal after batch 2."""
        chunk = os.read(self.fd, 4096)
        if not chunk:  # EOF: ended (a failure if the signal was never sent)
            self.signalled = True
            return
        self.pending += chunk
        *lines, self.pending = self.pending.split(b"\n")
        for line in lines:
            text = line.decode().strip()
            if self.signalled or not text.startswith(f"batch {self.mode} "):
                continue
            # every process seen at batches 1 and 2: one snapshot at batch 2, taken on a loaded
            # machine, has listed one of two running workers
            known = {p.pid for p in self.children}
            found = psutil.Process(self.proc.pid).children(recursive=True)
            self.children += [p for p in found if p.pid not in known]
            if text == f"batch {self.mode} 2":
                self.proc.send_signal(getattr(signal, self.signame))
                self.signalled = True

    def check(self) -> None:
        try:
            self.proc.communicate(timeout=120)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        err = self.stderr_path.read_text()
        case = f"{self.mode}/{self.signame}/workers={self.workers}"
        expected_code = 143 if self.signame == "SIGTERM" else 130
        assert self.proc.returncode == expected_code, f"{case}: exit {self.proc.returncode}\n{err}"
        # codedag's own report is one line; a DataLoader worker (or torch's fd-sharing thread)
        # interrupted mid-handshake may still print its own traceback after it (docs say so)
        ours = [line for line in err.splitlines() if line.startswith("codedag demo:")]
        assert ours and ours[-1].startswith("codedag demo: interrupted"), f"{case}\n{err}"
        if self.workers:
            assert len(self.children) >= self.workers, case  # the workers were running
        _, alive = psutil.wait_procs(self.children, timeout=0.5)
        assert alive == [], case  # ended with the demo, not seconds later
        results = load_results(self.out / "results.json")
        modes = ["baseline"] if self.mode == "baseline" else ["baseline", "optimization"]
        assert list(results["modes"]) == modes, case
        interrupted = results["modes"][self.mode]
        assert interrupted["status"] == "interrupted", case
        reason = "SIGTERM" if self.signame == "SIGTERM" else "KeyboardInterrupt"
        assert interrupted["error"] == reason, case
        measured = interrupted["summary"]["num_batches"]
        assert measured >= 2, case
        csv_rows = (self.out / interrupted["files"]["batches"]).read_text().splitlines()[1:]
        assert len(csv_rows) == measured == len(interrupted["batch_times"]), case
        if self.mode == "optimization":
            assert results["modes"]["baseline"]["status"] == "completed", case
            assert results["modes"]["baseline"]["summary"]["num_batches"] == 4, case
        # what the JSON says is what report --rebuild recomputes from the raw streams
        rebuilt = io.StringIO()
        with contextlib.redirect_stdout(rebuilt):  # in-process: one interpreter start less
            code = main(["report", str(self.out), "--rebuild", "--json", "--no-plots"])
        assert code == 0, case
        rows = {r["mode"]: r for r in json.loads(rebuilt.getvalue())["modes"]}
        assert rows[self.mode]["num_batches"] == measured, case
        assert rows[self.mode]["status"] == "interrupted", case


@pytest.mark.slow
def test_interrupted_demo_keeps_every_batch_and_leaves_no_worker(tmp_path: Path) -> None:
    """The four cases run side by side (each is mostly start-up and waiting)."""
    (tmp_path / "launch.py").write_text(LAUNCHER)
    demos = [Demo(tmp_path, *case) for case in CASES]
    try:
        pending = list(demos)
        while pending:
            ready, _, _ = select.select([d.fd for d in pending], [], [], 120)
            assert ready, "no demo printed anything for 120 s"
            for demo in [d for d in pending if d.fd in ready]:
                demo.read()
            pending = [d for d in pending if not d.signalled]
        for demo in demos:
            demo.check()
    finally:
        for demo in demos:
            if demo.proc.poll() is None:
                demo.proc.kill()
