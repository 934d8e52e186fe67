"""``tune_warm``: the loader settings for epochs the prefix cache serves, measured with it warm.

A plan's loader section is tuned on the pipeline as it runs in its first epoch. From the second
epoch on, the prefix cache hands back stored values and a sample may cost less to load than to
move from a worker process to the training process (pickled into shared memory and read back):
the settings that suit the first epoch are then not those that suit the others. This measures
them where they apply:

1. the plan is applied with its prefix cache in a store of its own (a temporary folder, removed
   afterwards: the user's store is never touched);
2. a fixed set of the DataLoader's batches (a few, within a memory bound, in the sampler's
   order) is loaded once in this process, which stores their values;
3. those batches, repeated, are timed with the section's chosen settings and with loading in
   process (no workers, whose batches need no moving), in alternating rounds, with the same
   consumer as the loader tuning (a step, a sleep, a copy to the device);
4. in-process loading is chosen only when it is faster beyond the margin and the noise, and when
   the timed batches were hits (at least the share a run needs to switch): a chain the cache
   gives up, or batches it could not hold, measure no warm epoch. A gain beyond the margin but
   within the noise is measured once more, with twice the rounds, before the workers are kept.

The result is the section's ``warm`` part (:class:`codedag.plan.loader.WarmLoader`), which
``PipelineMigrator`` switches to for epochs the cache serves (:mod:`codedag.migrate.warm_loader`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codedag.errors import ConfigError
from codedag.plan import MigrationPlan
from codedag.plan.loader import WARM_READY_SHARE, LoaderSettings, LoaderTrial, WarmLoader
from codedag.tune.choice import confirm_decided
from codedag.tune.options import TuneOptions
from codedag.tune.stats import median_s
from codedag.tune.tuner import ProgressCounter, consumer_for
from codedag.tune.variants import build_variant, check_loader, current_settings, epoch_length

if TYPE_CHECKING:
    from torch.utils.data import DataLoader

    from codedag.migrate.api import PipelineMigrator

SUBSET_BYTES = 256 << 20
"""The most bytes of stored values the timed batches may hold."""
SUBSET_BATCHES = 8
"""The most batches timed (repeated as often as a trial needs)."""


def tune_warm(
    loader: DataLoader[Any],
    plan: Mapping[str, Any] | MigrationPlan,
    options: TuneOptions | None = None,
    judge_after: int | None = None,
) -> WarmLoader:
    """Measure the loader settings for epochs ``plan``'s prefix cache serves.

    Args:
        loader: the DataLoader the plan's loader section was tuned on.
        plan: a plan with a ``cache`` section that caches a chain (and usually a ``loader``
            section; without one the DataLoader's own settings are the first epoch's).
        options: the consumer, rounds, batches and margin (those of the loader tuning).
        judge_after: values stored before the cache judges whether storing pays (default: the
            run's; see :class:`~codedag.migrate.cache.runtime.CacheSettings`).

    Returns:
        The section's ``warm`` part: in-process loading when measured faster, else the first
        epoch's settings (``changed`` empty), with the figures.

    Raises:
        ConfigError: not a DataLoader, a plan that caches nothing, or a loader without batches.
    """
    check_loader(loader)
    options = options or TuneOptions()
    options.validate()
    started = time.perf_counter()
    model = plan if isinstance(plan, MigrationPlan) else MigrationPlan.from_dict(plan)
    if model.cache is None or not model.cache.cached_chains:
        raise ConfigError("the plan caches nothing: warm loader settings need a prefix cache")
    cold = model.loader.chosen if model.loader is not None else current_settings(loader)
    if not cold.num_workers:
        return WarmLoader(
            chosen=cold,
            reason="the first epoch already loads in process: nothing to switch",
            duration_s=time.perf_counter() - started,
        )
    candidate = LoaderSettings(pin_memory=cold.pin_memory)
    batches = _fixed_batches(loader, _per_sample_bytes(model), cold.num_workers)
    template = _template(loader, batches)
    consumer = consumer_for(options)
    progress = ProgressCounter(options.progress)
    progress.total = len(batches) + options.rounds * 2 * options.batches

    def more_batches(count: int) -> None:
        progress.total += count

    with _applied(model, judge_after) as migrator:
        for _ in build_variant(template, LoaderSettings(), endless=False):
            progress.tick("storing the timed batches")
        before = migrator.cache.progress()
        theirs, yours, confirmation, faster, again = confirm_decided(
            template, cold, candidate, options, consumer, progress.tick, False, more_batches
        )
        seen = migrator.cache.progress().since(before)
    hit_rate = seen.hits / seen.lookups if seen.lookups else 0.0
    warm = hit_rate >= WARM_READY_SHARE  # else the timing did not measure a warm epoch
    chosen = candidate if faster and warm else cold
    side = (
        f"with the cache warm ({len(batches)} stored batches, {hit_rate:.0%} hits), "
        f"{candidate.label()} loaded {confirmation.chosen_batches_per_s:.2f} batches/s against "
        f"{confirmation.yours_batches_per_s:.2f} with {cold.label()} "
        f"({confirmation.ratio:.2f}x ± {confirmation.stderr_ratio:.2f}, "
        f"{confirmation.rounds} alternating rounds)"
    )
    progress.finish()
    return WarmLoader(
        chosen=chosen,
        changed=list(chosen.differences(cold)),
        reason=f"{_verdict(chosen, cold, warm, hit_rate, options.margin_pct)}; {side}"
        + (f"; {again}" if again else ""),
        batches=len(batches),
        hit_rate=hit_rate,
        trials=[_trial(cold, yours), _trial(candidate, theirs)],
        confirmation=confirmation,
        duration_s=time.perf_counter() - started,
    )


def _verdict(
    chosen: LoaderSettings, cold: LoaderSettings, warm: bool, hit_rate: float, margin_pct: float
) -> str:
    """The warm decision in words: load ``chosen``, or keep ``cold`` and why."""
    if chosen is not cold:
        return f"load {chosen.label()}"
    if not warm:
        return (
            f"keep {cold.label()}: only {hit_rate:.0%} of the timed lookups were hits (the "
            "cache gave the chain up, or did not hold the batches)"
        )
    return (
        f"keep {cold.label()}: in process was not faster by more than {margin_pct:g} % and "
        "the noise"
    )


def _per_sample_bytes(plan: MigrationPlan) -> float:
    cache = plan.cache
    assert cache is not None
    if cache.dataset_len:
        return cache.bytes_total / cache.dataset_len
    return float(sum(c.cut.bytes_per_sample for c in cache.cached_chains if c.cut))


def _fixed_batches(loader: DataLoader[Any], per_sample: float, workers: int) -> list[Any]:
    """The first batches of one epoch, as many as fit :data:`SUBSET_BYTES` (at least two
    cycles of the workers, at most :data:`SUBSET_BATCHES` and the epoch)."""
    sampler = loader.batch_sampler if loader.batch_sampler is not None else loader.sampler
    if sampler is None:
        raise ConfigError("the DataLoader has no sampler: an iterable data set is not cached")
    per_batch = max(1.0, per_sample * (loader.batch_size or 1))
    wanted = max(2 * workers, min(SUBSET_BATCHES, math.floor(SUBSET_BYTES / per_batch)))
    length = epoch_length(loader)
    if length is not None:
        wanted = min(wanted, length)
    batches = []
    for batch in sampler:
        batches.append(batch)
        if len(batches) >= wanted:
            break
    if not batches:
        raise ConfigError("the DataLoader is empty: it yields no batch")
    return batches


def _template(loader: DataLoader[Any], batches: list[Any]) -> DataLoader[Any]:
    """``loader`` over ``batches`` only (its collate, generator and worker init kept)."""
    from torch.utils.data import DataLoader

    kwargs: dict[str, Any] = {
        "dataset": loader.dataset,
        "collate_fn": loader.collate_fn,
        "worker_init_fn": loader.worker_init_fn,
        "multiprocessing_context": loader.multiprocessing_context,
        "generator": loader.generator,
        "pin_memory": loader.pin_memory,
    }
    if loader.batch_sampler is not None:
        kwargs["batch_sampler"] = batches
    else:
        kwargs.update(batch_size=None, sampler=batches)
    return DataLoader(**kwargs)


@contextlib.contextmanager
def _applied(plan: MigrationPlan, judge_after: int | None) -> Iterator[PipelineMigrator]:
    """``plan`` (its loader section left out) applied with a store in a temporary folder."""
    from codedag.migrate.api import PipelineMigrator
    from codedag.migrate.cache.runtime import CacheSettings
    from codedag.store.tiers import StoreSettings

    data = plan.to_dict()
    data["loader"] = None
    folder = Path(tempfile.mkdtemp(prefix="codedag-warm-"))
    try:
        store = StoreSettings(folder=folder / "cache", ram_budget_bytes=2 * SUBSET_BYTES)
        settings = CacheSettings(store=store)
        if judge_after is not None:
            settings = dataclasses.replace(settings, judge_after=judge_after)
        migrator = PipelineMigrator(data, guard=False, cache=settings)
        with migrator:
            yield migrator
        migrator.cache.store.clear()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _trial(settings: LoaderSettings, intervals_s: list[float]) -> LoaderTrial:
    interval = median_s(intervals_s) if intervals_s else 0.0
    return LoaderTrial(
        settings=settings,
        phase="warm",
        status="measured" if intervals_s else "not measured",
        batches=len(intervals_s) * max(1, settings.num_workers),
        batches_per_s=1.0 / interval if interval > 0 else 0.0,
        batch_ms=interval * 1e3,
    )
