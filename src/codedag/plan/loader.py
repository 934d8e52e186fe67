"""The ``loader`` section of a migration plan: DataLoader settings chosen by measurement.

``codedag tune`` (:func:`codedag.tune.tune_loader`) writes it; ``PipelineMigrator`` applies it to
the DataLoaders a program creates while the plan is applied (settings the program did not pass
explicitly; see :mod:`codedag.migrate.loader_settings`), and ``OptimizerManager`` calibrates
placement with the worker count and threads it names. Every figure behind the choice is kept:
each measured setting with its batches per second, the consumer's wait, start-up time and the
memory of its worker processes.

The section is optional: plans without it load as before (``loader`` is ``None``). Its ``warm``
part (:class:`WarmLoader`, optional too) holds the settings for epochs whose samples the prefix
cache already stores: once loading a sample is mostly reading it back, moving it from a worker
process costs more than the read, and fewer workers (often none) load faster. They are measured
with the cache warm (:func:`codedag.tune.warm.tune_warm`) and switched to at run time only after
an epoch whose values the cache stored or served (:mod:`codedag.migrate.warm_loader`).
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

# The DataLoader keywords a loader section may set, in the order tables show them.
TUNABLE_KEYS = ("num_workers", "threads", "prefetch_factor", "persistent_workers", "pin_memory")
DEFAULT_PREFETCH = 2
"""torch's ``prefetch_factor`` when workers are used and none is given."""

# Bounds. A plan may come from elsewhere, and each worker is a process with a copy of the
# dataset: the schema refuses what no machine runs well, and :meth:`LoaderSettings.bounded`
# lowers what this machine's CPU limit does not justify.
MAX_WORKERS = 1024
MAX_THREADS = 1024
MAX_PREFETCH = 64
"""Batches loaded ahead per worker: past a few, only memory grows."""
WORKERS_PER_CPU = 4
"""Workers per CPU the container may use: loaders waiting on files or the network gain from a few
per CPU; more only multiply processes and memory."""


def worker_limit(cpus: float) -> int:
    """The most workers a loader may start on a machine with ``cpus`` usable CPUs."""
    return WORKERS_PER_CPU * max(1, math.floor(cpus + 1e-9))


def thread_limit(cpus: float) -> int:
    """The most threads per worker on a machine with ``cpus`` usable CPUs (one per CPU)."""
    return max(1, math.ceil(cpus - 1e-9))


def known_keys(value: list[str]) -> list[str]:
    """``value`` when every key is a tunable setting (:data:`TUNABLE_KEYS`).

    Raises:
        ValueError: naming the unknown keys.
    """
    unknown = [key for key in value if key not in TUNABLE_KEYS]
    if unknown:
        raise ValueError(f"unknown loader setting(s) {unknown}; known: {list(TUNABLE_KEYS)}")
    return value


TunableKeys = Annotated[list[str], AfterValidator(known_keys)]
"""Loader settings named by key, checked by :func:`known_keys`."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True, validate_assignment=True)


class LoaderSettings(_Model):
    """One combination of DataLoader settings.

    Attributes:
        num_workers: worker processes (0: samples load in the consuming process).
        threads: threads per worker for torch, OpenCV and BLAS, set by a ``worker_init_fn``
            before the program's own one runs; ``None`` leaves the libraries' defaults (torch
            uses one thread in workers, OpenCV and BLAS as many as there are cores).
        prefetch_factor: batches loaded in advance per worker (``None``: torch's default, 2).
        persistent_workers: keep the workers (and their copy of the dataset) between epochs.
        pin_memory: copy batches into page-locked memory for faster host-to-GPU copies.
    """

    num_workers: int = Field(default=0, ge=0, le=MAX_WORKERS)
    threads: int | None = Field(default=None, ge=1, le=MAX_THREADS)
    prefetch_factor: int | None = Field(default=None, ge=1, le=MAX_PREFETCH)
    persistent_workers: bool = False
    pin_memory: bool = False

    def normalized(self) -> LoaderSettings:
        """The same settings spelled one way: torch's default prefetch (2) as ``None``, and
        what ``num_workers=0`` ignores reset to its default."""
        if self.num_workers:
            if self.prefetch_factor == DEFAULT_PREFETCH:
                return self.model_copy(update={"prefetch_factor": None})
            return self
        return LoaderSettings(pin_memory=self.pin_memory)

    def bounded(self, cpus: float) -> tuple[LoaderSettings, list[str]]:
        """These settings within what ``cpus`` usable CPUs justify, and what was lowered.

        Returns:
            ``(settings, changes)``: ``changes`` says each lowered value and its limit.
        """
        update: dict[str, int] = {}
        limits = {"num_workers": worker_limit(cpus), "threads": thread_limit(cpus)}
        for key, limit in limits.items():
            value = getattr(self, key)
            if value is not None and value > limit:
                update[key] = limit
        changes = [
            f"{key}={getattr(self, key)} lowered to {value}" for key, value in update.items()
        ]
        return (self.model_copy(update=update) if update else self), changes

    def label(self) -> str:
        """A short description: ``2 workers x 1 thread, prefetch 4, persistent``."""
        if not self.num_workers:
            text = "in-process (0 workers)"
        else:
            threads = "default threads" if self.threads is None else f"{self.threads} thread"
            if self.threads not in (None, 1):
                threads += "s"
            text = f"{self.num_workers} worker{'s' if self.num_workers > 1 else ''} x {threads}"
            if self.prefetch_factor not in (None, DEFAULT_PREFETCH):
                text += f", prefetch {self.prefetch_factor}"
            if self.persistent_workers:
                text += ", persistent"
        if self.pin_memory:
            text += ", pinned"
        return text

    def differences(self, other: LoaderSettings) -> dict[str, tuple[Any, Any]]:
        """``key -> (mine, other's)`` for every setting that differs."""
        mine, theirs = self.normalized(), other.normalized()
        return {
            key: (getattr(mine, key), getattr(theirs, key))
            for key in TUNABLE_KEYS
            if getattr(mine, key) != getattr(theirs, key)
        }


TrialStatus = Literal["measured", "stopped early", "over memory", "not measured"]


class LoaderTrial(_Model):
    """The measurement of one setting.

    Attributes:
        settings: what was measured.
        phase: which part of the search measured it (``yours``, ``workers``, ``threads``, ...).
        status: ``measured``; ``stopped early`` (clearly slower than the best so far, by the
            statistic in ``note``); ``over memory`` (its workers would not fit the memory limit).
        batches: timed batches (start-up excluded).
        batches_per_s: delivered batches per second (with the consumer, when one was given).
        batch_ms: median over cycles of the mean time between batches.
        stderr_ms: standard error of ``batch_ms`` (from the quartiles).
        wait_ms: the consumer's mean wait in ``next()`` per batch.
        startup_ms: time from ``iter(loader)`` to the first batch (worker start included).
        worker_rss_mb: resident memory of the worker processes together.
        worker_uss_mb: memory unique to the workers (what they copied), where readable.
        note: why it stopped, or what else the reader should know.
    """

    settings: LoaderSettings
    phase: str = ""
    status: TrialStatus = "measured"
    batches: int = Field(default=0, ge=0)
    batches_per_s: float = Field(default=0.0, ge=0)
    batch_ms: float = Field(default=0.0, ge=0)
    stderr_ms: float = Field(default=0.0, ge=0)
    wait_ms: float = Field(default=0.0, ge=0)
    startup_ms: float = Field(default=0.0, ge=0)
    worker_rss_mb: float = Field(default=0.0, ge=0)
    worker_uss_mb: float | None = None
    note: str = ""


class LoaderConfirmation(_Model):
    """The chosen settings against the program's own, timed in alternating rounds.

    Attributes:
        rounds: rounds per side (A B A B ...).
        yours_batches_per_s: the program's settings.
        chosen_batches_per_s: the candidate's.
        ratio: chosen / yours batches per second.
        stderr_ratio: standard error of the ratio.
        first_epoch_batches: the batches of the loader's epoch (0: unknown).
        yours_first_epoch_s: the program's settings, ``iter()`` to the epoch's last batch (its
            start-up included; batches past those timed at the measured rate), median.
        chosen_first_epoch_s: the candidate's.
        yours_first_epochs_s: the program's first epoch in each round.
        chosen_first_epochs_s: the candidate's.
    """

    rounds: int = Field(default=0, ge=0)
    yours_batches_per_s: float = Field(default=0.0, ge=0)
    chosen_batches_per_s: float = Field(default=0.0, ge=0)
    ratio: float = Field(default=1.0, ge=0)
    stderr_ratio: float = Field(default=0.0, ge=0)
    first_epoch_batches: int = Field(default=0, ge=0)
    yours_first_epoch_s: float = Field(default=0.0, ge=0)
    chosen_first_epoch_s: float = Field(default=0.0, ge=0)
    yours_first_epochs_s: list[float] = Field(default_factory=list)
    chosen_first_epochs_s: list[float] = Field(default_factory=list)

    @property
    def first_epoch_ratio(self) -> float | None:
        """How much faster the candidate loads a first epoch (above 1: faster); None without
        the figures (an epoch of unknown length, or a plan written before they were kept)."""
        if not (self.first_epoch_batches and self.yours_first_epoch_s):
            return None
        if not self.chosen_first_epoch_s:
            return None
        return self.yours_first_epoch_s / self.chosen_first_epoch_s


RESEEDED_DRAWS = ("random", "numpy.random", "torch")
"""The random states torch's worker loop seeds from the loader's base seed (Python's ``random``,
NumPy's global state, torch's default generator): draws from them stay the same with persistent
workers re-seeded each epoch."""

WARM_READY_SHARE = 0.9
"""The share of an epoch's lookups the prefix cache must have stored or served before the next
epoch uses the warm settings, and the share of hits a warm epoch must keep to stay warm."""


class WarmLoader(_Model):
    """Loader settings for epochs whose samples the prefix cache already holds.

    Attributes:
        chosen: the settings for such epochs.
        changed: the keys where ``chosen`` differs from the section's ``chosen`` (empty: the
            same settings suit both).
        reason: the choice in words, with its figures.
        batches: the fixed batches every setting was timed on, each stored beforehand.
        hit_rate: the share of those batches' lookups that were hits while timing.
        ready_share: the share of an epoch's lookups that must have been stored or served
            before the next epoch switches (and the share of hits that keeps it switched).
        trials: every measured setting, timed with the cache warm.
        confirmation: ``chosen`` against the section's ``chosen``, side by side (``yours``
            there is the cold choice).
        duration_s: how long the measurement took.
    """

    chosen: LoaderSettings
    changed: TunableKeys = Field(default_factory=list)
    reason: str = ""
    batches: int = Field(default=0, ge=0)
    hit_rate: float = Field(default=0.0, ge=0, le=1)
    ready_share: float = Field(default=WARM_READY_SHARE, gt=0, le=1)
    trials: list[LoaderTrial] = Field(default_factory=list)
    confirmation: LoaderConfirmation | None = None
    duration_s: float = Field(default=0.0, ge=0)


class LoaderSection(_Model):
    """The ``loader`` section of a migration plan.

    Attributes:
        basis: ``measured`` (timed on this machine).
        chosen: the settings the plan applies.
        yours: the settings the DataLoader had when it was tuned.
        changed: the keys where ``chosen`` differs from ``yours`` (the ones the plan sets).
        reason: the choice in words, with its figures.
        fixed: keys held at a given value during the search (``--fix``).
        override: keys the plan sets even where the program passes them explicitly.
        dataset: qualified type name of the Dataset tuned; DataLoaders over other Dataset
            types are left alone (``None``: every DataLoader).
        batch_size: the DataLoader's batch size.
        batches_per_epoch: its length, where the sampler has one.
        cpu_limit: CPUs the container may use (cgroup quota, cpuset, affinity: the smallest).
        cpu_limit_source: where that figure came from.
        max_workers: the largest worker count searched.
        memory_limit_mb: the container's memory limit, when it has one.
        step_ms: the consumer's time per step the loader has to keep up with, when known.
        step_source: where ``step_ms`` came from (``--step-ms``, a results file, a function).
        device: where batches were copied during the measurement (``cpu``: no copy).
        margin_pct: a change is made only when it is faster by more than this and the noise.
        trials: every measured setting.
        confirmation: the chosen settings against yours, side by side.
        duration_s: how long the tuning took.
        machine: CPU model and count of the machine that measured.
        warm: the settings for epochs the prefix cache serves, measured with it warm (``None``:
            not measured; the section's ``chosen`` serves every epoch).
        draws: what the samples draw random numbers from (:data:`RESEEDED_DRAWS`: the global
            states a worker is seeded with; any other entry: a generator the data set holds, or
            a sample that differs when loaded twice with the same seeds); empty: nothing; ``None``:
            not known (a plan written before it was probed), taken as drawing.
        allow_changed_draws: apply the settings even where they change the random draws a
            sample gets (another worker count, workers that keep their state across epochs).
    """

    basis: Literal["measured"] = "measured"
    chosen: LoaderSettings
    yours: LoaderSettings
    changed: TunableKeys = Field(default_factory=list)
    reason: str = ""
    fixed: TunableKeys = Field(default_factory=list)
    override: TunableKeys = Field(default_factory=list)
    dataset: str | None = None
    batch_size: int | None = None
    batches_per_epoch: int | None = None
    cpu_limit: float | None = None
    cpu_limit_source: str = ""
    max_workers: int = Field(default=0, ge=0, le=MAX_WORKERS)
    memory_limit_mb: float | None = None
    step_ms: float | None = Field(default=None, ge=0)
    step_source: str = ""
    device: str = "cpu"
    margin_pct: float = Field(default=5.0, ge=0)
    trials: list[LoaderTrial] = Field(default_factory=list)
    confirmation: LoaderConfirmation | None = None
    duration_s: float = Field(default=0.0, ge=0)
    machine: str = ""
    warm: WarmLoader | None = None
    draws: list[str] | None = None
    allow_changed_draws: bool = False

    @property
    def keeps_yours(self) -> bool:
        """Whether the plan leaves the DataLoader as the program configured it."""
        return not self.changed

    @property
    def settles_explicit(self) -> bool:
        """Whether measured settings replace ones the program passes explicitly: when no
        sample draws random numbers, or the plan allows changed draws (else only ``override``)."""
        return self.draws == [] or self.allow_changed_draws

    def draw_blocker(self, key: str, value: Any) -> str | None:
        """Why setting ``key`` to ``value`` would change the random draws a sample gets (or the
        sampler's order), or ``None``.

        Threads, prefetch and pinned memory never do. Another worker count loads samples in
        other workers, seeded otherwise, unless no sample draws. Persistent workers are
        re-seeded at each epoch's start as fresh workers are (the migrator does it), which
        covers the global states only, not a generator the data set holds; workers made fresh
        each epoch where the program kept them draw the loader's seed anew each epoch, which
        shifts the sampler's draws too.
        """
        if self.allow_changed_draws or key not in ("num_workers", "persistent_workers"):
            return None
        if key == "persistent_workers" and not value:
            return (
                "your workers keep their random state across epochs; fresh ones are seeded anew "
                "each epoch, from another draw of the loader's generator"
            )
        if self.draws is None:
            return "the plan does not say whether samples draw random numbers (tune it again)"
        if key == "num_workers":
            if not self.draws:
                return None
            return (
                f"samples draw random numbers ({', '.join(self.draws)}): another worker count "
                "loads them in other workers, with other draws"
            )
        held = [draw for draw in self.draws if draw not in RESEEDED_DRAWS]
        if not held:
            return None
        return (
            f"samples draw from {', '.join(held)}, which workers kept across epochs would not "
            "start again each epoch"
        )

    def batches_per_s(self, settings: LoaderSettings) -> float | None:
        """The measured batches per second of ``settings`` (a trial or the confirmation)."""
        wanted = settings.normalized().model_dump()
        for trial in self.trials:
            if trial.batches and trial.settings.normalized().model_dump() == wanted:
                return trial.batches_per_s
        confirmation = self.confirmation
        if confirmation is not None and confirmation.rounds:
            if wanted == self.chosen.normalized().model_dump():
                return confirmation.chosen_batches_per_s
            if wanted == self.yours.normalized().model_dump():
                return confirmation.yours_batches_per_s
        return None

    def forgone(self, kept: LoaderSettings) -> str:
        """The gain given up by running ``kept`` instead of ``chosen``, in measured figures."""
        tuned, held = self.batches_per_s(self.chosen), self.batches_per_s(kept)
        text = f"tuned {self.chosen.label()}"
        text += f": {tuned:.1f} batches/s" if tuned is not None else ""
        text += f"; kept {kept.label()}"
        if held is not None:
            return text + f": {held:.1f} batches/s"
        yours = self.batches_per_s(self.yours)
        if yours is None:
            return text + " (not measured)"
        return text + f" (not measured; yours, {self.yours.label()}: {yours:.1f} batches/s)"

    def kept_settings(self, keys: list[str]) -> LoaderSettings:
        """``chosen`` with ``keys`` put back to the program's own values (``yours``)."""
        return self.chosen.model_copy(update={key: getattr(self.yours, key) for key in keys})

    def kept_for_draws(self) -> dict[str, str]:
        """``key -> why`` for each changed setting the plan keeps as the program set it because
        changing it would change the random draws a sample gets."""
        out: dict[str, str] = {}
        for key in self.changed:
            why = self.draw_blocker(key, getattr(self.chosen, key))
            if why is not None:
                out[key] = why
        return out

    def kept(self, explicit: set[str] | frozenset[str] | None = None) -> dict[str, str]:
        """``key -> why`` for each changed setting the migrator will keep as the program sets
        it: those that would change the random draws, and those in ``explicit`` (the keys the
        program passes) that the plan does not replace."""
        out = self.kept_for_draws()
        if self.settles_explicit:
            return out
        for key in self.changed:
            if explicit and key in explicit and key not in self.override and key != "threads":
                out.setdefault(key, "your code passes it explicitly")
        return out

    def kept_line(self, explicit: set[str] | frozenset[str] | None = None) -> str | None:
        """One line on what :meth:`kept` keeps, with the gain forgone (``None``: nothing)."""
        kept = self.kept(explicit)
        if not kept:
            return None
        reasons = "; ".join(f"{key}: {why}" for key, why in kept.items())
        return (
            f"not applied: {', '.join(kept)} stay as your DataLoader sets them ({reasons}); "
            f"the gain forgone: {self.forgone(self.kept_settings(list(kept)))}"
        )

    @property
    def switches_when_warm(self) -> bool:
        """Whether epochs the prefix cache serves run with other settings than the first."""
        return self.warm is not None and bool(self.warm.changed)
