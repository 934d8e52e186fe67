"""Sinks chosen by name: ``tensorboard``, ``tensorboard:DIR``, ``mlflow``, ``mlflow:URI``.

The names are what ``ExperimentMonitor(sinks=[...])``, ``codedag demo --sink`` and the scaffolded
experiments' ``experiment_config.json`` (``"sinks"``) accept. A name codedag does not know is a
:class:`~codedag.errors.ConfigError`; a sink whose package is missing is one warning and left
out, so the run and its other outputs go on. A spec is shown only with its URI's credentials
masked (:func:`~codedag.util.text.redact_uri`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from pathlib import Path

from codedag.errors import ConfigError
from codedag.monitor.sinks.base import Sink
from codedag.util.text import redact_uri

log = logging.getLogger(__name__)


def _tensorboard(arg: str) -> Sink:
    from codedag.monitor.sinks.tensorboard import TensorBoardSink

    return TensorBoardSink(Path(arg) if arg else None)


def _mlflow(arg: str) -> Sink:
    from codedag.monitor.sinks.mlflow import MlflowSink

    return MlflowSink(arg or None)


SINKS: dict[str, tuple[Callable[[str], Sink], str]] = {
    "tensorboard": (_tensorboard, "TensorBoard event files (tensorboard:DIR picks the log folder)"),
    "mlflow": (_mlflow, "an MLflow run per mode (mlflow:URI picks the tracking URI)"),
}
"""Sink name -> (factory taking the text after ``name:``, what it writes)."""


def check_spec(spec: str) -> str:
    """``spec`` when its name is known.

    Raises:
        ConfigError: an unknown name.
    """
    name = spec.partition(":")[0].strip().lower()
    if name not in SINKS:
        raise ConfigError(
            f"unknown sink {redact_uri(repr(spec))}: expected one of {', '.join(SINKS)} (optionally NAME:ARGUMENT)"
        )
    return spec


def make_sinks(specs: Iterable[Sink | str]) -> list[Sink]:
    """Sinks from instances and names; one whose package is missing is warned about and skipped.

    Raises:
        ConfigError: an unknown sink name.
    """
    out: list[Sink] = []
    for spec in specs:
        if isinstance(spec, Sink):
            out.append(spec)
            continue
        if not isinstance(spec, str):
            raise ConfigError(f"a sink is a Sink or a name, got {type(spec).__name__}")
        name, _, arg = check_spec(spec).partition(":")
        factory = SINKS[name.strip().lower()][0]
        try:
            out.append(factory(arg.strip()))
        except ConfigError as error:
            log.warning("sink %s left out: %s", redact_uri(repr(spec)), redact_uri(error))
    return out
