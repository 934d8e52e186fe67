"""What a loader tuning searches, how long it measures, and what it holds fixed."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from codedag.errors import ConfigError
from codedag.plan.loader import (
    MAX_PREFETCH,
    MAX_THREADS,
    MAX_WORKERS,
    TUNABLE_KEYS,
    WORKERS_PER_CPU,
    LoaderSettings,
    thread_limit,
    worker_limit,
)

Progress = Callable[[int, int, str], None]
"""``progress(done, total, what)`` in batches."""

MAX_BATCHES = 10_000
MAX_ROUNDS = 100
_UPPER = {"num_workers": MAX_WORKERS, "threads": MAX_THREADS, "prefetch_factor": MAX_PREFETCH}


@dataclass
class TuneOptions:
    """Settings of :func:`codedag.tune.tune_loader`.

    Attributes:
        max_workers: the largest worker count tried (default: the CPUs the container may use).
        prefetch_factors: ``prefetch_factor`` values tried at the best worker count.
        fixed: settings held at a value (``{"num_workers": 4}``); a key mapped to ``None``
            is held at the DataLoader's own value.
        override: settings the plan sets even where the program passes them explicitly.
        allow_changed_draws: the plan applies settings that change the random draws a sample
            gets (another worker count, workers kept across epochs) instead of keeping yours.
        step_s: the consumer's time per training step; the loader is fast enough when the
            step waits less than 5 % of it for data.
        step_source: where ``step_s`` came from (for the plan).
        step_fn: a step to run on each batch instead of sleeping ``step_s`` (its time is
            measured when ``step_s`` is not given).
        device: copy every batch to this device while timing (``pin_memory`` is tuned only
            with a CUDA device); default: ``cuda:0`` when CUDA exists, else no copy.
        batches: batches timed per setting (raised to cover 3 cycles of the workers).
        trial_s: a setting is timed at most this long once 3 cycles are measured.
        rounds: alternating rounds of the final comparison with your settings.
        margin_pct: a change is made only when it is faster than your settings by more than
            this and more than the measurement noise.
        budget_s: no new setting is started after this long.
        reader: the cgroup reader (tests pass one over a fake tree).
        progress: ``progress(done, total, what)``.
    """

    max_workers: int | None = None
    prefetch_factors: tuple[int, ...] = (2, 4)
    fixed: Mapping[str, Any] = field(default_factory=dict)
    override: tuple[str, ...] = ()
    allow_changed_draws: bool = False
    step_s: float | None = None
    step_source: str = ""
    step_fn: Callable[[Any], Any] | None = None
    device: str | None = None
    batches: int = 12
    trial_s: float = 4.0
    rounds: int = 3
    margin_pct: float = 5.0
    budget_s: float = 300.0
    reader: Any = None
    progress: Progress | None = None

    def validate(self) -> None:
        """Raise :class:`ConfigError` naming the first setting that cannot work."""
        if self.max_workers is not None and (
            not isinstance(self.max_workers, int) or self.max_workers < 0
        ):
            raise ConfigError(f"max_workers must be an integer >= 0, got {self.max_workers!r}")
        for name, most in (("batches", MAX_BATCHES), ("rounds", MAX_ROUNDS)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= most:
                raise ConfigError(f"{name} must be an integer in [1, {most}], got {value!r}")
        for name in ("trial_s", "budget_s"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and 0 < value < math.inf):
                raise ConfigError(f"{name} must be a positive number of seconds, got {value!r}")
        if not (0 <= self.margin_pct < 100):
            raise ConfigError(f"margin_pct must be in [0, 100), got {self.margin_pct!r}")
        if self.step_s is not None and not (0 <= self.step_s < math.inf):
            raise ConfigError(f"the step time must be >= 0 seconds, got {self.step_s!r}")
        if any(not isinstance(p, int) or not 1 <= p <= MAX_PREFETCH for p in self.prefetch_factors):
            raise ConfigError(
                f"prefetch factors must be integers in [1, {MAX_PREFETCH}]: {self.prefetch_factors}"
            )
        for key in list(self.fixed) + list(self.override):
            if key not in TUNABLE_KEYS:
                raise ConfigError(
                    f"unknown loader setting {key!r}; known: {', '.join(TUNABLE_KEYS)}"
                )

    def check_machine(self, cpus: float, source: str = "") -> None:
        """Refuse worker and thread counts this machine's CPU limit does not justify.

        Each worker is a process: ``max_workers`` and a fixed ``num_workers`` may be at most
        :data:`~codedag.plan.loader.WORKERS_PER_CPU` per usable CPU, a fixed ``threads`` one
        per CPU.

        Raises:
            ConfigError: naming the setting, the limit and where the CPU figure came from.
        """
        where = f"{cpus:g} CPUs usable" + (f": {source}" if source else "")
        workers = worker_limit(cpus)
        asked = {"max_workers": self.max_workers, "num_workers": self.fixed.get("num_workers")}
        for name, value in asked.items():
            if isinstance(value, int) and value > workers:
                raise ConfigError(
                    f"{name}={value} is more than {workers} workers, the limit here "
                    f"({WORKERS_PER_CPU} per CPU, {where})"
                )
        threads = self.fixed.get("threads")
        if isinstance(threads, int) and threads > thread_limit(cpus):
            raise ConfigError(
                f"threads={threads} is more than {thread_limit(cpus)}, the limit here "
                f"(one thread per CPU, {where})"
            )


def apply_fixed(settings: LoaderSettings, fixed: Mapping[str, Any]) -> LoaderSettings:
    """``settings`` with the fixed keys set (values from :func:`resolve_fixed`)."""
    update = dict(fixed)
    if not update:
        return settings
    try:
        return LoaderSettings.model_validate({**settings.model_dump(), **update})
    except ValueError as e:
        raise ConfigError(f"fixed loader settings {dict(update)}: {e}") from None


def parse_fixed(items: list[str]) -> dict[str, Any]:
    """``["num_workers=4", "pin_memory=false", "threads"]`` -> ``{"num_workers": 4, ...}``.

    A bare key holds the DataLoader's own value; ``threads=default`` means the libraries'
    defaults, ``prefetch_factor=default`` torch's.

    Raises:
        ConfigError: an unknown key or a value of the wrong kind.
    """
    fixed: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip().replace("-", "_")
        if key not in TUNABLE_KEYS:
            raise ConfigError(f"--fix {item!r}: unknown setting; known: {', '.join(TUNABLE_KEYS)}")
        if not sep:
            fixed[key] = None
            continue
        text = text.strip().lower()
        if key in ("persistent_workers", "pin_memory"):
            if text not in ("true", "false", "1", "0", "yes", "no", "on", "off"):
                raise ConfigError(f"--fix {item!r}: expected true or false")
            fixed[key] = text in ("true", "1", "yes", "on")
        elif key in ("threads", "prefetch_factor") and text in ("default", "none"):
            fixed[key] = "default"
        else:
            try:
                value = int(text)
            except ValueError:
                raise ConfigError(f"--fix {item!r}: expected an integer") from None
            low = 0 if key == "num_workers" else 1
            if not low <= value <= _UPPER[key]:
                raise ConfigError(f"--fix {item!r}: must be >= {low} and <= {_UPPER[key]}")
            fixed[key] = value
    return fixed


def resolve_fixed(fixed: Mapping[str, Any], yours: LoaderSettings) -> dict[str, Any]:
    """Fixed keys with their values: bare keys take yours, ``"default"`` becomes ``None``."""
    out: dict[str, Any] = {}
    for key, value in fixed.items():
        if value is None:
            out[key] = getattr(yours, key)
        elif value == "default":
            out[key] = None
        else:
            out[key] = value
    return out
