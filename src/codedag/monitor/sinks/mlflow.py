"""MLflow: a parent run for the monitor's run, a nested run per mode, metrics with steps.

The parent run (named after the run folder, in the experiment named after the monitor's
experiment) carries the run's facts as tags and its files as artifacts under ``codedag/`` (the
results file, figures, and what :meth:`~codedag.monitor.experiment.ExperimentMonitor.log_artifact`
adds: a migration plan, a report). Each mode is a nested run with the mode's config and CPU limit
as parameters, the per-step and logged figures (a point every ``min_interval_s`` of training, the
mean in between), every resource sample, and the summary figures (``summary/...``) at the end;
its status is ``FINISHED``, ``KILLED`` (interrupted) or ``FAILED``. Names: :mod:`.names`.

Everything that talks to the tracking server runs on the sink's own thread, every
``send_interval_s``: the training thread only appends to a list, a server that is slow or down
never holds it up, and its failure is one warning (the sink then stops; the run goes on).
``tracking_uri=None`` is ``MLFLOW_TRACKING_URI`` when set, else a store of the run's own
(:func:`run_store`: ``<run dir>/mlflow.db``, artifacts in ``<run dir>/mlruns``), never the current
folder.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from codedag.errors import ConfigError
from codedag.monitor.probes import ResourceSample
from codedag.monitor.records import MetricRecord, ModeEnd, ModeInfo, RunInfo, StepRecord
from codedag.monitor.resources import sample_rows
from codedag.monitor.sinks.base import Sink
from codedag.monitor.sinks.names import LIMITS, STEP, TRAIN, resource_name, summary_name
from codedag.monitor.sinks.window import MetricWindow, Point, StepWindow
from codedag.util.io import link_error, own_file
from codedag.util.text import redact_uri

log = logging.getLogger(__name__)

STATUS = {"completed": "FINISHED", "interrupted": "KILLED", "failed": "FAILED"}
MAX_METRICS = 1000  # per log_batch call (MLflow's limit)
MAX_PARAMS = 100
MAX_PARAM_CHARS = 6000
ENVIRONMENT_TAGS = ("host", "platform", "python", "torch", "cuda", "codedag", "cpu_source")

STORE_FILE = "mlflow.db"
ARTIFACTS_FOLDER = "mlruns"

# (mode, key, value, epoch milliseconds, step)
MetricRow = tuple[str, str, float, int, int]


def _step_rows(mode: str, origin: float, point: Point) -> list[MetricRow]:
    """The rows of one point of the per-step figures (``origin``: the mode's start, epoch s)."""
    ms = int((origin + point.time_s) * 1000)
    return [(mode, STEP[k].mlflow, v, ms, point.step) for k, v in point.values.items()]


def _metric_row(mode: str, origin: float, name: str, point: Point) -> MetricRow:
    """The row of one point of a logged value."""
    ms = int((origin + point.time_s) * 1000)
    return (mode, TRAIN[name].mlflow, point.values[name], ms, max(point.step, 0))


def _require_mlflow() -> None:
    try:
        import mlflow  # noqa: F401
    except ImportError as error:
        raise ConfigError("the mlflow sink needs MLflow: pip install 'codedag[mlflow]'") from error


def flat_params(config: dict[str, Any], prefix: str = "") -> dict[str, str]:
    """A nested config as MLflow parameters: ``a.b`` keys, values as text (cut to 6000)."""
    out: dict[str, str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(flat_params(value, f"{name}."))
        else:
            out[name] = str(value)[:MAX_PARAM_CHARS]
    return out


def run_store(run_dir: Path) -> tuple[str, str]:
    """The tracking URI and artifact location of a store inside ``run_dir``.

    A SQLite file (``run_dir/mlflow.db``, which MLflow's client reads with SQLAlchemy) and its
    artifacts in ``run_dir/mlruns``, both absolute so the current folder plays no part.
    """
    folder = Path(run_dir).absolute()
    return f"sqlite:///{(folder / STORE_FILE).as_posix()}", (folder / ARTIFACTS_FOLDER).as_uri()


def claim_run_store(run_dir: Path) -> None:
    """Make the store of :func:`run_store` in ``run_dir`` safe to hand to MLflow, which opens it
    by name: its database a file of its own (made empty when absent) and its artifact folder no
    link, so nothing planted there points MLflow's writes at another file or folder.

    Raises:
        WriteError: either is a link (its target is untouched), or a hard-linked or special file.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    own_file(run_dir / STORE_FILE)
    artifacts = run_dir / ARTIFACTS_FOLDER
    if artifacts.is_symlink():
        raise link_error(artifacts)


class MlflowSink(Sink):
    """Records the run in MLflow from a thread of its own.

    Args:
        tracking_uri: where to log (``http://...``, ``sqlite:///mlflow.db``, ``databricks``);
            ``None``: ``MLFLOW_TRACKING_URI`` when set, else :func:`run_store` of the run's
            folder (chosen when the run opens).
        experiment_name: MLflow experiment; ``None``: the monitor's experiment name.
        min_interval_s: seconds of training between two points of the per-step figures.
        send_interval_s: seconds between two sends to the tracking server (a send to a local
            SQLite store costs about 10 ms of CPU plus 0.13 ms per value: every 10 s keeps the
            sink near 0.3 % of one CPU).
        close_timeout_s: how long :meth:`close` waits for the last sends.
        client_factory: builds the client from the tracking URI (``MlflowClient`` by default).

    Raises:
        ConfigError: MLflow is not installed.
    """

    name = "mlflow"

    def __init__(
        self,
        tracking_uri: str | None = None,
        experiment_name: str | None = None,
        *,
        min_interval_s: float = 1.0,
        send_interval_s: float = 10.0,
        close_timeout_s: float = 30.0,
        client_factory: Callable[[str | None], Any] | None = None,
    ) -> None:
        if client_factory is None:
            _require_mlflow()
        self.tracking_uri = tracking_uri
        self.artifact_location: str | None = None
        # No URI anywhere: the store goes into the run's folder, known when the run opens.
        self._store_in_run = tracking_uri is None and not os.environ.get("MLFLOW_TRACKING_URI")
        self._run_dir: Path | None = None
        self.experiment_name = experiment_name
        self.min_interval_s = float(min_interval_s)
        self.send_interval_s = float(send_interval_s)
        self.close_timeout_s = float(close_timeout_s)
        self._factory = client_factory
        self.parent_run_id: str | None = None
        self._experiment_id: str | None = None
        self.mode_run_ids: dict[str, str] = {}
        self._ops: deque[Callable[[Any], None]] = deque()
        self._rows: list[MetricRow] = []
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closing = False
        self._failed = False
        self._thread: threading.Thread | None = None
        self._windows: dict[str, tuple[StepWindow, MetricWindow, float]] = {}

    # ------------------------------------------------------------ the caller's side
    def _op(self, op: Callable[[Any], None]) -> None:
        if self._failed:
            return
        self._ops.append(op)
        if self._thread is None and not (self._store_in_run and self._run_dir is None):
            self._thread = threading.Thread(target=self._loop, name="codedag-mlflow", daemon=True)
            self._thread.start()

    def _add(self, rows: list[MetricRow]) -> None:
        if rows and not self._failed:
            with self._lock:
                self._rows.extend(rows)

    def open_run(self, run: RunInfo) -> None:
        experiment = self.experiment_name or run.experiment_name
        tags = {
            f"codedag.{k}": str(run.environment[k])[:5000]
            for k in ENVIRONMENT_TAGS
            if run.environment.get(k) is not None
        }
        tags["codedag.run_dir"] = str(run.run_dir)
        if self._store_in_run:
            self._run_dir = Path(run.run_dir)
            self.tracking_uri, self.artifact_location = run_store(self._run_dir)
        where = {"artifact_location": self.artifact_location} if self.artifact_location else {}

        def create(client: Any) -> None:
            found = client.get_experiment_by_name(experiment)
            experiment_id = (
                found.experiment_id
                if found is not None
                else client.create_experiment(experiment, **where)
            )
            self._experiment_id = experiment_id
            parent = client.create_run(experiment_id, tags=tags, run_name=run.run_dir.name)
            self.parent_run_id = parent.info.run_id

        self._op(create)

    def start_mode(self, mode: ModeInfo) -> None:
        self._windows[mode.name] = (
            StepWindow(self.min_interval_s),
            MetricWindow(self.min_interval_s),
            mode.started_at,
        )
        params = flat_params(mode.config)
        for key, value in (
            ("cpu_limit_cpus", mode.cpu_limit_cpus),
            ("cpu_capacity_cpus", mode.cpu_capacity_cpus),
            ("resource_interval_s", mode.resource_interval_s),
        ):
            params[LIMITS[key].mlflow if key in LIMITS else key] = str(value)

        def create(client: Any) -> None:
            from mlflow.entities import Param

            tags = {"mlflow.parentRunId": self.parent_run_id, "codedag.mode": mode.name}
            child = client.create_run(
                self._experiment_id,
                start_time=int(mode.started_at * 1000),
                tags=tags,
                run_name=mode.name,
            )
            run_id = child.info.run_id
            items = [Param(k, v) for k, v in params.items()]
            for i in range(0, len(items), MAX_PARAMS):
                client.log_batch(run_id, params=items[i : i + MAX_PARAMS])
            self.mode_run_ids[mode.name] = run_id

        self._op(create)

    def log_steps(self, mode: str, steps: Sequence[StepRecord]) -> None:
        window = self._windows.get(mode)
        if window is not None:
            self._add([r for p in window[0].add(steps) for r in _step_rows(mode, window[2], p)])

    def log_metrics(self, mode: str, rows: Sequence[MetricRecord]) -> None:
        window = self._windows.get(mode)
        if window is not None:
            self._add([_metric_row(mode, window[2], n, p) for n, p in window[1].add(rows)])

    def log_resources(self, mode: str, sample: ResourceSample) -> None:
        if mode not in self._windows:
            return
        ms = int(sample.timestamp * 1000)
        step = int(sample.timestamp - self._windows[mode][2])  # seconds into the mode
        rows: list[MetricRow] = []
        for series, value in sample_rows(sample):
            names = resource_name(series)
            if names is not None:
                rows.append((mode, names.mlflow, value, ms, step))
        self._add(rows)

    def end_mode(self, end: ModeEnd) -> None:
        window = self._windows.get(end.name)
        if window is None:
            return
        steps, metrics, origin = window
        last = end.steps - 1 if end.steps else 0
        point = steps.drain()
        rows = _step_rows(end.name, origin, point) if point is not None else []
        rows += [_metric_row(end.name, origin, n, p) for n, p in metrics.drain()]
        now = int(time.time() * 1000)
        rows.extend(
            (end.name, summary_name(k).mlflow, v, now, last) for k, v in end.figures.items()
        )
        self._add(rows)
        status = STATUS.get(end.status, "FINISHED")

        def finish(client: Any) -> None:
            self._send(client)
            run_id = self.mode_run_ids.get(end.name)
            if run_id is not None:
                client.set_terminated(run_id, status=status)

        self._op(finish)

    def log_artifact(self, path: Path) -> None:
        path = Path(path)

        def upload(client: Any) -> None:
            if self.parent_run_id is None or not path.exists():
                return
            if path.is_dir():
                client.log_artifacts(self.parent_run_id, str(path), f"codedag/{path.name}")
            else:
                client.log_artifact(self.parent_run_id, str(path), "codedag")

        self._op(upload)

    def flush(self) -> None:
        self._wake.set()

    def close(self) -> None:
        def finish(client: Any) -> None:
            self._send(client)
            if self.parent_run_id is not None:
                client.set_terminated(self.parent_run_id, status="FINISHED")

        self._op(finish)
        self._closing = True
        self._wake.set()
        thread = self._thread
        if thread is None:  # no run was opened: nothing to send, no store to create
            self._ops.clear()
            return
        thread.join(self.close_timeout_s)
        if thread.is_alive():
            log.warning(
                "MLflow (%s) did not take the run's last records within %.0f s: %d operations "
                "and %d metric values not sent",
                redact_uri(self.tracking_uri or "MLflow's default tracking URI"),
                self.close_timeout_s,
                len(self._ops),
                len(self._rows),
            )

    # ------------------------------------------------------------ the sink's thread
    def _client(self) -> Any:
        if self._factory is not None:
            return self._factory(self.tracking_uri)
        from mlflow.tracking import MlflowClient

        if self._run_dir is not None:
            claim_run_store(self._run_dir)
        return MlflowClient(tracking_uri=self.tracking_uri)

    def _loop(self) -> None:
        try:
            client = self._client()
            while True:
                while self._ops:
                    self._ops.popleft()(client)
                self._send(client)
                if self._closing and not self._ops:
                    return
                self._wake.wait(self.send_interval_s)
                self._wake.clear()
        except Exception as error:
            self._failed = True
            self._ops.clear()
            with self._lock:
                self._rows.clear()
            log.warning(
                "the mlflow sink failed (%s: %s); it records nothing more, the run goes on",
                type(error).__name__,
                redact_uri(str(error).splitlines()[0][:300]) if str(error) else "",
            )

    def _send(self, client: Any) -> None:
        """Send every buffered value whose mode's run exists."""
        from mlflow.entities import Metric

        with self._lock:
            rows, self._rows = self._rows, []
        waiting = [r for r in rows if r[0] not in self.mode_run_ids]
        by_run: dict[str, list[Any]] = {}
        for mode, key, value, ms, step in rows:
            run_id = self.mode_run_ids.get(mode)
            if run_id is not None:
                by_run.setdefault(run_id, []).append(Metric(key, value, ms, step))
        try:
            for run_id, metrics in by_run.items():
                for i in range(0, len(metrics), MAX_METRICS):
                    client.log_batch(run_id, metrics=metrics[i : i + MAX_METRICS])
        finally:
            if waiting:
                with self._lock:
                    self._rows[:0] = waiting
