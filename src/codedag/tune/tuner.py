"""``tune_loader``: measure a DataLoader's settings and return the plan's ``loader`` section."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from codedag.devices.torch_devices import cuda_available
from codedag.errors import ConfigError
from codedag.plan.loader import LoaderConfirmation, LoaderSection, LoaderSettings, LoaderTrial
from codedag.plan.model import MigrationPlan
from codedag.tune.choice import (
    Candidate,
    confirm_decided,
    first_epoch_beats,
    persistent_decision,
    pick,
)
from codedag.tune.draws import probe_draws
from codedag.tune.limits import as_mb, machine_description, machine_limits
from codedag.tune.measure import Consumer, device_consumer, sleep_consumer
from codedag.tune.options import Progress, TuneOptions, apply_fixed, resolve_fixed
from codedag.tune.search import Search, Trial, settings_key

if TYPE_CHECKING:
    from torch.utils.data import DataLoader
from codedag.tune.variants import (
    build_variant,
    check_loader,
    current_settings,
    describe_changes,
    epoch_length,
)

log = logging.getLogger(__name__)


def _default_device() -> str | None:
    return "cuda:0" if cuda_available() else None


def consumer_for(options: TuneOptions) -> Consumer | None:
    """What runs after each timed batch: the step (or a sleep of its time), after a copy to
    the device when one is named."""
    then: Consumer | None = None
    if options.step_fn is not None:
        then = options.step_fn
    elif options.step_s:
        then = sleep_consumer(options.step_s)
    if options.device and options.device != "cpu":
        return device_consumer(options.device, then)
    return then


def _warm_up(loader: DataLoader[Any]) -> None:
    """One batch in this process first: imports, JIT compilation, caches (inherited by forks)."""
    try:
        next(iter(build_variant(loader, LoaderSettings(), endless=True)))
    except StopIteration:
        raise ConfigError("the DataLoader is empty: it yields no batch") from None
    except Exception as error:
        raise ConfigError(
            f"the DataLoader fails to load a batch: {type(error).__name__}: {error}"
        ) from error


def _trial_record(trial: Trial) -> LoaderTrial:
    run = trial.run
    if run is None:
        return LoaderTrial(
            settings=trial.settings,
            phase=trial.phase,
            status=trial.status,
            note=trial.note,
        )
    se = run.stderr_s
    return LoaderTrial(
        settings=trial.settings,
        phase=trial.phase,
        status=trial.status if run.error is None else "not measured",
        batches=run.batches,
        batches_per_s=run.batches_per_s,
        batch_ms=run.interval_s * 1e3 if run.intervals_s else 0.0,
        stderr_ms=se * 1e3 if se != float("inf") else 0.0,
        wait_ms=run.wait_s * 1e3,
        startup_ms=run.startup_s * 1e3,
        worker_rss_mb=run.worker_rss_bytes / 2**20,
        worker_uss_mb=as_mb(run.worker_uss_bytes),
        note=trial.note,
    )


def tune_loader(
    loader: DataLoader[Any], options: TuneOptions | None = None, **kwargs: Any
) -> LoaderSection:
    """Measure ``loader``'s settings and choose the ones to use; see :mod:`codedag.tune`.

    Args:
        loader: a ``torch.utils.data.DataLoader`` (its dataset, sampler and collate are reused).
        options: what to search (or give its fields as keywords).

    Returns:
        The plan's loader section: the chosen settings, yours, the figures and the reason.

    Raises:
        ConfigError: not a DataLoader, one that cannot load a batch, or bad options.
    """
    options = _own_options(options, kwargs)
    check_loader(loader)
    options.validate()
    started = time.perf_counter()
    if options.device is None:
        options.device = _default_device()
    limits = machine_limits(options.reader)
    options.check_machine(limits.cpus, limits.cpu_source)
    yours = current_settings(loader)
    fixed = resolve_fixed(options.fixed, yours)
    consumer = consumer_for(options)
    margin = options.margin_pct / 100.0
    _warm_up(loader)
    draws = probe_draws(loader)
    step_s = options.step_s
    if step_s is None and options.step_fn is not None:
        step_s = _time_user_step(loader, options)
    progress = ProgressCounter(options.progress)
    search = Search(loader, yours, options, limits, fixed, consumer, progress.tick, step_s)
    progress.total = search.planned_batches() + options.rounds * 2 * options.batches
    search.run()
    candidate = pick(search, step_s, margin)
    chosen, reasons, confirmation = _confirmed(
        loader, yours, candidate, options, consumer, progress.tick
    )
    chosen = _settled(
        loader, chosen, search.trial_of(chosen) or candidate.trial, yours, fixed, margin, reasons
    )
    if search.budget_note:
        reasons.append(search.budget_note)
    changed = list(chosen.differences(yours))
    summary = f"{chosen.label()}: " if changed else f"keep your settings ({yours.label()}): "
    if changed:
        summary += f"changes {describe_changes(chosen, yours)}; "
    section = LoaderSection(
        chosen=chosen,
        yours=yours,
        changed=changed,
        reason=summary + "; ".join(reasons),
        fixed=sorted(fixed),
        override=sorted(set(options.override)),
        dataset=f"{type(loader.dataset).__module__}.{type(loader.dataset).__qualname__}",
        batch_size=loader.batch_size,
        batches_per_epoch=epoch_length(loader),
        cpu_limit=limits.cpus,
        cpu_limit_source=limits.cpu_source,
        max_workers=search.max_workers,
        memory_limit_mb=as_mb(limits.memory_limit_bytes),
        step_ms=None if step_s is None else step_s * 1e3,
        step_source=options.step_source or ("--step-ms" if options.step_s else ""),
        device=options.device or "cpu",
        margin_pct=options.margin_pct,
        trials=[_trial_record(t) for t in search.trials.values()],
        confirmation=confirmation,
        duration_s=time.perf_counter() - started,
        machine=machine_description(limits),
        draws=draws,
        allow_changed_draws=options.allow_changed_draws,
    )
    progress.finish()
    log.info("loader tuning: %s", section.reason)
    return section


def _settled(
    loader: DataLoader[Any],
    chosen: LoaderSettings,
    trial: Trial,
    yours: LoaderSettings,
    fixed: dict[str, Any],
    margin: float,
    reasons: list[str],
) -> LoaderSettings:
    """``chosen`` with persistent workers decided from the measured start-up and the settings
    held fixed applied; the reasons for both are appended to ``reasons``."""
    if "persistent_workers" not in fixed:
        persistent, why = persistent_decision(loader, trial, yours, margin)
        if persistent != chosen.persistent_workers:
            chosen = chosen.model_copy(update={"persistent_workers": persistent})
        if why:
            reasons.append(why)
    if fixed:
        held = ", ".join(f"{key}={value}" for key, value in sorted(fixed.items()))
        reasons.append(f"held fixed as asked: {held}")
    return apply_fixed(chosen, fixed)


def _own_options(options: TuneOptions | None, kwargs: dict[str, Any]) -> TuneOptions:
    """Options given as an object or as keywords, copied: the defaults filled in stay ours."""
    if options is None:
        return TuneOptions(**kwargs)
    if kwargs:
        raise ConfigError("give either options or keyword settings, not both")
    return dataclasses.replace(options)


def _time_user_step(loader: DataLoader[Any], options: TuneOptions) -> float:
    """The user's training step timed on a few real batches; records where the figure came from."""
    from codedag.tune.consumer import time_step

    assert options.step_fn is not None
    batches = []
    for batch in build_variant(loader, LoaderSettings(), endless=True):
        batches.append(batch)
        if len(batches) == 4:
            break
    step_s, options.step_source = time_step(options.step_fn, batches)
    return step_s


class ProgressCounter:
    """Counts the batches timed so far against the planned total for a progress callback."""

    def __init__(self, report: Progress | None) -> None:
        self.report = report
        self.done = 0
        self.total = 1

    def tick(self, what: str) -> None:
        self.done += 1
        if self.report is not None:
            self.report(min(self.done, self.total), self.total, what)

    def finish(self) -> None:
        if self.report is not None:
            self.report(self.total, self.total, "done")


def _confirmed(
    loader: DataLoader[Any],
    yours: LoaderSettings,
    candidate: Candidate,
    options: TuneOptions,
    consumer: Consumer | None,
    tick: Callable[[str], None],
) -> tuple[LoaderSettings, list[str], LoaderConfirmation | None]:
    """The candidate timed against your settings side by side: what to use, why, the figures.

    Your settings are kept unless the candidate is faster beyond the margin and the noise, and
    also loads a first epoch faster: by more than the margin at the medians and in every round
    (:func:`~codedag.tune.choice.first_epoch_beats`; they are also kept when the
    candidate is your settings, or nothing could be timed).
    """
    chosen = candidate.trial.settings
    if settings_key(chosen) == settings_key(yours) or not candidate.trial.usable:
        return yours, [candidate.why], None
    _theirs, _mine, confirmation, faster, again = confirm_decided(
        loader, yours, chosen, options, consumer, tick
    )
    side = (
        f"side by side in {confirmation.rounds} alternating rounds: "
        f"{confirmation.chosen_batches_per_s:.2f} batches/s against "
        f"{confirmation.yours_batches_per_s:.2f} with your settings "
        f"({confirmation.ratio:.2f}x ± {confirmation.stderr_ratio:.2f})"
    )
    ratio = confirmation.first_epoch_ratio
    if ratio is not None:
        side += (
            f"; a first epoch of {confirmation.first_epoch_batches} batches, start-up included, "
            f"in {confirmation.chosen_first_epoch_s:.2f} s against "
            f"{confirmation.yours_first_epoch_s:.2f} s"
        )
    if again:
        side += f" ({again})"
    margin = options.margin_pct / 100.0
    if faster:
        if first_epoch_beats(confirmation, margin) is not False:
            return chosen, [candidate.why, side], confirmation
        kept = (
            f"the candidate was {chosen.label()} ({candidate.why}); {side}: faster once "
            f"running, but not over a first epoch by more than {options.margin_pct:g} % and in "
            "every round, so your settings are kept"
        )
        return yours, [kept], confirmation
    kept = (
        f"the candidate was {chosen.label()} ({candidate.why}), but {side}: not faster "
        f"by more than {options.margin_pct:g} % and the noise, so your settings are kept"
    )
    return yours, [kept], confirmation


def plan_with_loader(
    existing: MigrationPlan | Mapping[str, Any] | None, section: LoaderSection, source: str = "plan"
) -> MigrationPlan:
    """A plan holding ``section``: ``existing`` (a plan model, or its dict validated here) with
    its loader section replaced and everything else kept, or a new plan that places no call.

    Raises:
        SchemaError: ``existing`` is not a valid plan.
    """
    from codedag.version import __version__

    if existing is None:
        plan = MigrationPlan(
            codedag_version=__version__,
            context_device_map={},
            notes=[
                "loader settings only (codedag tune): no call is placed; `codedag optimize "
                "--loader` this plan to place calls measured with the tuned loader"
            ],
        )
    else:
        plan = MigrationPlan.from_dict(existing, source)  # a plan model is used as it is
    return plan.model_copy(update={"loader": section})  # the plan given is kept
