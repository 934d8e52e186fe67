"""``codedag mutate --executor ray`` on a real local Ray cluster (no mock), and the executor's
checks that need no cluster (these run without Ray).

One head on 127.0.0.1 with 2 CPUs serves the whole module: a 4-experiment session of a bundled
example equals a local one, Ctrl-C and SIGTERM cancel every task and leave no process, and a task
whose worker is killed runs again and says so.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO

import psutil
import pytest
from ray_cluster import Cluster, local_cluster

from codedag.energy.config import bundled_path
from codedag.energy.ray_executor import RayExecutor, _ray, _remove_if_empty, check_reachable
from codedag.energy.store import ResultsDB
from codedag.errors import ConfigError, ExperimentError


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    pytest.importorskip("ray", reason="the ray extra is not installed")
    with local_cluster(num_cpus=2) as running:
        yield running


def mutate(cluster: Cluster, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "codedag", "mutate", *args],
        env=cluster.env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def start_mutate(cluster: Cluster, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "codedag", "mutate", *args],
        env=cluster.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


class Output:
    """Everything a running process writes to stdout and stderr, read as it comes."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.out: list[str] = []
        self.err: list[str] = []
        self._threads = [
            threading.Thread(target=self._read, args=(stream, lines), daemon=True)
            for stream, lines in ((proc.stdout, self.out), (proc.stderr, self.err))
        ]
        for thread in self._threads:
            thread.start()

    @staticmethod
    def _read(stream: IO[str] | None, lines: list[str]) -> None:
        assert stream is not None
        for line in stream:
            lines.append(line)

    def finish(self) -> tuple[str, str]:
        """Both streams in full, once the process has closed them."""
        for thread in self._threads:
            thread.join(30)
        return "".join(self.out), "".join(self.err)


def wait_for(predicate, timeout_s: float = 90.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def processes_running(path: Path) -> list[psutil.Process]:
    """Live processes whose command line names ``path``, and all their descendants."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        if proc.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        if str(path) in " ".join(proc.info["cmdline"] or []):
            found.append(proc)
            try:
                found += proc.children(recursive=True)
            except psutil.Error:
                continue
    return found


def task_workers(cluster: Cluster) -> list[psutil.Process]:
    out = []
    for proc in cluster.workers():
        try:
            if "run_on_node" in " ".join(proc.cmdline()):
                out.append(proc)
        except psutil.Error:
            continue
    return out


def rows_of(session: Path) -> list[dict[str, str]]:
    """summary.csv's rows in experiment order (it lists them as they finish)."""
    with open(session / "summary.csv") as handle:
        return sorted(csv.DictReader(handle), key=lambda row: row["experiment_id"])


def small_bundled_config(tmp_path: Path) -> Path:
    """The bundled examples, one torch thread, 64 training samples: seconds per run."""
    data = json.loads(bundled_path("models_config.json").read_text())
    repo = data["repositories"]["examples"]
    repo["path"] = str(bundled_path("examples"))
    repo["required_args"] = ["--threads", "1", "--train-samples", "64", "--test-samples", "32"]
    path = tmp_path / "models.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.slow
def test_two_experiments_on_ray_equal_a_local_session(cluster: Cluster, tmp_path: Path) -> None:
    config = small_bundled_config(tmp_path)
    plan = ["-r", "examples", "-m", "mnist_cnn", "-mt", "learning_rate,dropout", "-n", "2"]
    plan += ["-s", "11", "--models-config", str(config), "--cooldown", "0", "--no-echo", "--json"]

    def timed(*args: str) -> tuple[subprocess.CompletedProcess[str], float]:
        started = time.monotonic()
        return mutate(cluster, *plan, *args), time.monotonic() - started

    # the two sessions run side by side (one thread per run: the results do not depend on it)
    with ThreadPoolExecutor(2) as pool:
        ray_args = ["--executor", "ray", "--address", cluster.address]
        ray_future = pool.submit(timed, *ray_args, "--results-dir", str(tmp_path / "ray"))
        local, local_s = timed("--results-dir", str(tmp_path / "local"))
        on_ray, ray_s = ray_future.result()
    assert on_ray.returncode == 0, on_ray.stderr[-3000:]
    assert local.returncode == 0, local.stderr[-3000:]
    print(f"2 experiments side by side: ray {ray_s:.1f} s, local {local_s:.1f} s")

    (ray_run,) = (tmp_path / "ray").glob("run_*")
    (local_run,) = (tmp_path / "local").glob("run_*")
    ray_rows, local_rows = rows_of(ray_run), rows_of(local_run)
    assert len(ray_rows) == 2 and list(ray_rows[0]) == list(local_rows[0])
    assert [r["experiment_id"] for r in ray_rows] == [r["experiment_id"] for r in local_rows]
    # Same plan, same seeds, one thread: the same hyperparameters and the same trained models.
    for ray_row, local_row in zip(ray_rows, local_rows):
        for column, value in local_row.items():
            if column.startswith(("hyperparam_", "perf_")) or column == "training_success":
                assert ray_row[column] == value, column
    stored = ResultsDB(tmp_path / "ray").experiments(session=ray_run.name)
    assert len(stored) == 2 and all(r["training_success"] for r in stored)
    for ray_row in ray_rows:
        name = ray_row["experiment_id"]
        remote = json.loads((ray_run / name / "experiment.json").read_text())
        here = json.loads((local_run / name / "experiment.json").read_text())
        assert set(remote) == set(here)
        assert (ray_run / name / "training.log").read_text().count("Training complete") == 1
        assert (ray_run / name / "energy" / "cpu_energy.json").is_file()
        assert remote["executor"] == "ray" and here["executor"] == "local"
        assert remote["node"]["ip"] == "127.0.0.1" and remote["node"]["ray_node_id"]
        assert remote["node_failures"] == [] and remote["slot"] == "cpu" and remote["gpu"] is None
    info = json.loads((ray_run / "session.json").read_text())
    assert info["status"] == "completed" and info["executor"]["kind"] == "ray"
    assert info["executor"]["nodes"][0]["cpus"] == 2
    assert json.loads(on_ray.stdout)["executor"] == "ray"


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_interrupt_cancels_every_task_and_leaves_no_process(
    cluster: Cluster, tmp_path: Path, toy: Path, sig: signal.Signals
) -> None:
    settings = tmp_path / "settings.json"
    sleepy = {"repo": "toy", "model": "sleepy", "hyperparameters": {"epochs": 120}}
    settings.write_text(
        json.dumps(
            {
                "experiment_name": "interrupt",
                "mode": "default",
                "max_retries": 0,
                "executor": {"kind": "ray", "address": cluster.address},
                "experiments": [{"repo": "toy", "model": "ok"}, sleepy, sleepy, sleepy],
            }
        )
    )
    results = tmp_path / "results"
    session = start_mutate(
        cluster, "-ec", str(settings), "--models-config", str(toy), "--results-dir",
        str(results), "--cooldown", "0",
    )  # fmt: skip
    script = tmp_path / "toy" / "sleepy.py"
    try:
        # two sleepy runs at once (2 CPUs), each with a grandchild; the third one is queued
        wait_for(lambda: len(processes_running(script)) >= 4, what="two sleepy runs")
        training = processes_running(script)
        session.send_signal(sig)
        _, err = session.communicate(timeout=60)
    finally:
        if session.poll() is None:
            session.kill()
    assert session.returncode == 130, err[-3000:]
    assert "cancelling" in err and "interrupted" in err
    wait_for(lambda: all(gone(p.pid) for p in training), 20, "the training processes to end")
    assert processes_running(script) == []
    wait_for(lambda: task_workers(cluster) == [], 20, "the task workers to end")
    (run_dir,) = results.glob("run_*")
    assert [r["experiment_id"] for r in rows_of(run_dir)] == ["toy_ok_001"]
    info = json.loads((run_dir / "session.json").read_text())
    assert info["status"] == "interrupted" and info["finished_experiments"] == 1
    assert sorted(p.name for p in run_dir.iterdir() if p.is_dir()) == ["toy_ok_001"]


VICTIM = """
import os, pathlib, subprocess, sys, time
marker = pathlib.Path(__file__).with_name("victim.ran")
if not marker.exists():  # the first run waits to be killed with its worker
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    marker.write_text(f"{os.getppid()} {os.getpid()} {child.pid}")
    time.sleep(600)
print("Test Accuracy: 80.00%")
print("Training complete")
"""


def test_a_task_whose_worker_is_killed_runs_again(
    cluster: Cluster, tmp_path: Path, toy: Path
) -> None:
    (tmp_path / "toy" / "victim.py").write_text(VICTIM)
    config = json.loads(toy.read_text())
    config["repositories"]["toy"]["models"]["victim"] = {"train_script": "victim.py"}
    toy.write_text(json.dumps(config))
    session = start_mutate(
        cluster, "-r", "toy", "-m", "victim", "--models-config", str(toy), "--executor", "ray",
        "--address", cluster.address, "--results-dir", str(tmp_path / "results"), "--json",
        "--cooldown", "0",
    )  # fmt: skip
    output = Output(session)
    marker = tmp_path / "toy" / "victim.ran"
    try:
        # the training script reports its worker (its parent), itself and its child
        wait_for(lambda: marker.exists() and len(marker.read_text().split()) == 3, what="a run")
        worker, first_run, grandchild = map(int, marker.read_text().split())
        assert "ray::" in " ".join(psutil.Process(worker).cmdline())
        # the session has taken the task's "started" message: it knows where the task runs
        wait_for(lambda: "toy_victim_001 on " in "".join(output.err), what="the task's start")
        os.kill(worker, signal.SIGKILL)
        session.wait(timeout=120)
    finally:
        if session.poll() is None:
            session.kill()
    out, err = output.finish()
    assert session.returncode == 0, err[-3000:]
    (record,) = json.loads(out)["experiments"]
    assert record["training_success"] and record["performance_metrics"] == {"accuracy": 80.0}
    (failure,) = record["node_failures"]
    assert failure["error"].startswith("WorkerCrashedError")
    assert failure["node"]["ip"] == "127.0.0.1"
    assert "submitting it again" in err
    # the watchdog ended the killed worker's training group, grandchild included
    wait_for(lambda: gone(first_run) and gone(grandchild), 60, "the first run to end")


def test_a_task_no_node_can_hold_is_refused_before_the_session(
    cluster: Cluster, tmp_path: Path
) -> None:
    done = mutate(
        cluster, "-r", "examples", "-m", "mnist_cnn", "--executor", "ray", "--address",
        cluster.address, "--cpus-per-experiment", "3", "--results-dir", str(tmp_path / "r"),
    )  # fmt: skip
    assert done.returncode == 2
    assert "no node of the Ray cluster has that many (the largest has 2)" in done.stderr
    assert not list((tmp_path / "r").glob("run_*"))  # no session was started


# ---------------------------------------------------------------- without a cluster (no Ray)
def test_bad_executor_settings_are_refused_at_once() -> None:
    with pytest.raises(ConfigError, match="node_retries must be >= 0"):
        RayExecutor(node_retries=-1)
    with pytest.raises(ConfigError, match="cpus_per_experiment must be > 0"):
        RayExecutor(cpus_per_experiment=0)
    executor = RayExecutor("10.0.0.1:6379")
    assert executor.slots() == [] and not executor.runs_here
    assert executor.describe() == {"kind": "ray", "address": "10.0.0.1:6379"}


def test_an_address_nobody_listens_on_fails_fast_with_the_way_out() -> None:
    with socket.socket() as probe:  # a port that was free a moment ago
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(ExperimentError, match="cannot reach the Ray cluster at ray://"):
        check_reachable(f"ray://127.0.0.1:{port}", timeout_s=1.0)
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        check_reachable(f"127.0.0.1:{server.getsockname()[1]}", timeout_s=1.0)
    check_reachable("auto")  # left to Ray


def test_only_folders_without_files_are_removed(tmp_path: Path) -> None:
    empty, used = tmp_path / "exp1", tmp_path / "exp2"
    (empty / "energy").mkdir(parents=True)
    (used / "energy").mkdir(parents=True)
    (used / "energy" / "cpu_energy.json").write_text("{}")
    _remove_if_empty(empty)
    _remove_if_empty(used)
    assert not empty.exists() and used.exists()


def test_a_missing_ray_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    with pytest.raises(ConfigError, match="pip install 'codedag\\[ray\\]'"):
        _ray()
