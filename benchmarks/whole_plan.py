"""The whole plan against the pipeline's own settings, side by side, epoch 1 and epochs 2+.

For each example pipeline and worker count, one data set is built and loaded for ``--epochs``
epochs (one seeded DataLoader per run, iterated once per epoch as a training loop does, and the
global random generators seeded with the epoch number, so every variant sees the same sample
order and the same augmentation draws) in these variants:

* ``own``: the pipeline's own DataLoader;
* ``tuned`` (with ``--tune``): the loader settings ``codedag tune`` chooses, alone;
* ``plan``: codedag's whole plan applied by ``PipelineMigrator``: the tuned loader (with
  ``--tune``, and the settings measured with the cache warm for the epochs it serves), the
  prefix cache, the lookup tables of element-wise runs (a normalization after the cut), placement
  and batched chains where calibration measured them faster. Each run starts on an empty cache
  folder, so its epoch 1 is a true first epoch.

Variants are interleaved in ``--rounds`` rounds (own tuned plan, plan tuned own, ...), so all see
the same machine state (each after a full garbage collection, so that none left by tracing or
an earlier variant falls in the next); a figure is the median over rounds and the spread (lowest
to highest round) is printed beside it. An epoch is timed whole, from ``iter(loader)`` to its last batch
(DataLoader workers start every epoch, as they do without ``persistent_workers``; with them,
in the first epoch only). Printed per
pipeline: samples/s of epoch 1 and of epochs 2+ for each variant, their ratios to ``own``, whether
every batch of every epoch equals ``own``'s bit for bit (when the plan changes the worker count,
a run of the pipeline's own code with the plan's worker count in each epoch: the augmentations
that draw from a worker's random state change with it): ``yes``; ``tol`` where they differ by
no more than the loosest declared tolerance of a call the plan runs through a torch backend
allows on the batches' scale (one more untimed run then prints the largest difference and those
tolerances); ``NO`` where they differ by more, or with nothing placed to allow it; and the
memory: the RAM tier at its largest (the blocks its file holds in shared memory), the
anonymous memory of the loading processes beyond ``own``'s at its largest (proportional:
``Pss_Anon``, so a page a forked worker still shares with its parent counts once, not once per
process as ``RssAnon`` would), and the budget. Memory is sampled in one more run of ``own`` and
of ``plan`` after the timed rounds, never during them: reading ``smaps_rollup`` every 100 ms
walks the page tables of every loading process and slowed the timed epochs by up to 15 %.
Beside samples/s, the CPU time per sample of this process and its workers (own / plan): on a
machine shared with other work it moves far less than wall time, and shows what the plan costs
or saves in work. Then the geometric means over pipelines, and for each pipeline the
cache's hits and misses and the most the cache alone can give when loading is CPU-bound: the
pipeline's CPU time per sample over what is left of it once every hit saves what the plan
expects. It measures; it asserts nothing.

``--step-ms MS`` sleeps ``MS`` after each batch in every variant, as a training loop waits while
an accelerator runs its step (this process's CPU idle): loading that keeps up with the step
costs the epoch nothing, so what the plan changes shows only where loading is the bottleneck.
With ``--tune`` the tuning is told the step, and keeps it fed at the least cost. Its trials are
short (6 batches, 2 rounds) to keep the run short, except those of the settings for warm epochs
(12 batches, the tuner's default: stored batches are cheap to time, and 2 workers then give
more than 3 cycles per round to judge).

``--bytes`` loads nothing: for each pipeline it traces one batch, plans it, and prints each cached
chain's cut (its call, dtype, shape), the bytes stored per value and per sample, and the
smallest value the cut could move back to (between the source and the cut, among those whose hit
saves time: :func:`codedag.optimize.cache_bytes.smaller_value`), with the traced time of the
calls after it and what the cut's larger value adds to reading back and storing, as the
store's costs were measured. The bytes are the trace's; the times are the plan's figures.

``--torch-threads`` (default 1) sets torch's intra-op threads in every variant alike: on a machine
shared with other work, OpenMP threads spinning for a core turn epochs of a few hundred
milliseconds into noise; 0 keeps torch's own setting. Run::

    python benchmarks/whole_plan.py --workers 0 2 --samples 256 --rounds 3 [--tune]
    python benchmarks/whole_plan.py --bytes --pipelines demo_image letterbox
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gc
import math
import os
import random
import resource
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import xxhash

from codedag.experiments import pipelines
from codedag.experiments.pipelines.loaders import build_loader
from codedag.measure import round_order

PIPELINES = (
    "demo_image",
    "letterbox",
    "yolo_mosaic",
    "pil_recipe",
    "compose",
    "volume",
    "demo_audio",
    "mel",
    # decode-heavy, from files on disk: the prefix cache's file sources
    "pil_with",
    "audio_files",
    "yolo_files",
)


@dataclass
class Run:
    """One variant's epochs in one round: samples/s and CPU ms per sample of each epoch."""

    rates: list[float]
    cpu_ms: list[float]
    digests: list[list[bytes]]
    tier_peak_bytes: int = 0
    private_peak_bytes: int = 0
    cache: dict[str, Any] = field(default_factory=dict)
    tables: dict[str, Any] = field(default_factory=dict)
    loader: dict[str, Any] | None = None


class MemoryPeak:
    """The largest RAM tier and anonymous memory (proportional) of this process and its
    children, sampled every 100 ms while entered (children read from ``/proc``, not a scan of
    every process)."""

    def __init__(self, tier: Path | None) -> None:
        self.tier = tier
        self.tier_bytes = 0
        self.private_bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> MemoryPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._measure()

    def _sample(self) -> None:
        while not self._stop.wait(0.1):
            self._measure()

    def _measure(self) -> None:
        from codedag.devices.memory import allocated_bytes

        if self.tier is not None and self.tier.exists():
            self.tier_bytes = max(self.tier_bytes, allocated_bytes(self.tier))
        total = 0
        for pid in (os.getpid(), *_children(os.getpid())):
            with contextlib.suppress(OSError, ValueError):
                total += _anonymous_bytes(pid)
        self.private_bytes = max(self.private_bytes, total)


def _children(pid: int) -> list[int]:
    out: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as children:
                out.extend(int(c) for c in children.read().split())
    return out


def _anonymous_bytes(pid: int) -> int:
    """``Pss_Anon`` of a process (its anonymous pages, each shared page divided among the
    processes that map it), else ``RssAnon`` where the kernel has no ``smaps_rollup``."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            for line in rollup:
                if line.startswith("Pss_Anon:"):
                    return int(line.split()[1]) * 1024
    except FileNotFoundError:
        pass
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    return 0


_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def _live_cpu_s(pid: int) -> float:
    """CPU seconds of a running process so far (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICKS_PER_S  # utime, stime


def _cpu_s() -> float:
    """CPU seconds (user and system) of this process, of its children that ended, and of those
    still running (persistent DataLoader workers outlive an epoch)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    ended = resource.getrusage(resource.RUSAGE_CHILDREN)
    live = sum(_live_cpu_s(pid) for pid in _children(os.getpid()))
    return me.ru_utime + me.ru_stime + ended.ru_utime + ended.ru_stime + live


def _digests(batch: Any) -> list[bytes]:
    leaves = batch if isinstance(batch, list | tuple) else [batch]
    out = []
    for leaf in leaves:
        if isinstance(leaf, torch.Tensor):  # no copy on the host; one copy back from a device
            out.append(xxhash.xxh3_128_digest(leaf.detach().cpu().contiguous().numpy()))
    return out


def to_device(batch: Any, device: str | None) -> Any:
    """The batch's tensors moved to ``device`` as a training loop moves them (``None``, the
    CPU: the batch as it is)."""
    if device is None or torch.device(device).type == "cpu":
        return batch
    if isinstance(batch, torch.Tensor):
        return batch.to(device)
    if isinstance(batch, list | tuple):
        return type(batch)(to_device(leaf, device) for leaf in batch)
    return batch


def run_epochs(
    make: Callable[[int], Any],
    epochs: int,
    step_s: float = 0.0,
    device: str | None = None,
    on_batch: Callable[[Any], None] | None = None,
) -> tuple[list[float], list[float], list[list[bytes]]]:
    """Samples/s and CPU ms per sample of each epoch (the workers' CPU included, ended or
    persistent), and the batches' digests; ``step_s``: a sleep after each batch, the
    accelerator's step (this process's CPU idle meanwhile); ``device``: each batch is moved
    there, as a training loop does (an epoch ends when the device has finished);
    ``on_batch``: called with each batch (moved)."""
    rates, cpu_ms, digests = [], [], []
    cuda = device is not None and torch.device(device).type == "cuda"
    loader = make(0)
    for epoch in range(epochs):
        random.seed(epoch)
        np.random.seed(epoch)
        torch.manual_seed(epoch)
        count = 0
        cpu = _cpu_s()
        started = time.perf_counter()
        for batch in loader:
            batch = to_device(batch, device)
            first = batch[0] if isinstance(batch, list | tuple) else batch
            count += len(first)
            digests.append(_digests(batch))
            if on_batch is not None:
                on_batch(batch)
            if step_s:
                time.sleep(step_s)
        if cuda:
            torch.cuda.synchronize(device)
        rates.append(count / (time.perf_counter() - started))
        cpu_ms.append((_cpu_s() - cpu) * 1e3 / count)
    del loader  # persistent workers end here
    return rates, cpu_ms, digests


@dataclass
class Case:
    """One pipeline at one worker count: its data set, tuned section and plan."""

    name: str
    workers: int
    make: Callable[[int], Any]
    tuned: Any | None
    plan: dict[str, Any]
    budget_bytes: int | None
    step_s: float = 0.0
    device: str = "cpu"


def loader_maker(
    name: str, workers: int, samples: int, batch: int, options: dict[str, Any] | None = None
) -> Callable[[int], Any]:
    """Pipeline ``name``'s data set, built once, and a function that makes its DataLoader
    seeded with an epoch (``options`` go to the pipeline's factory)."""
    own = pipelines.make_loader(
        name, batch_size=batch, num_workers=workers, seed=0, n=samples, **(options or {})
    )
    dataset, collate = own.dataset, own.collate_fn

    def make(epoch: int) -> Any:
        return build_loader(
            dataset, batch_size=batch, num_workers=workers, seed=epoch, collate_fn=collate
        )

    return make


def prepare(
    name: str,
    workers: int,
    samples: int,
    batch: int,
    tune: bool,
    budget_bytes: int | None,
    options: dict[str, Any] | None = None,
    step_s: float = 0.0,
    device: str = "cpu",
    batched: str | None = None,
) -> Case:
    """Build the data set (``options`` go to the pipeline's factory), tune the loader
    (optional; told the step's time when there is one), trace one batch and plan for
    ``device`` (placement and batched chains there where calibration measures them faster;
    ``batched="never"``: none planned)."""
    from codedag.optimize.manager import OptimizerManager
    from codedag.trace.tracer import trace_dataloader

    make = loader_maker(name, workers, samples, batch, options)
    tuned = None
    options = None
    if tune:
        from codedag.tune import TuneOptions, tune_loader

        options = TuneOptions(batches=6, rounds=2, trial_s=2.0, budget_s=60, step_s=step_s or None)
        tuned = tune_loader(make(0), options)
        tuned.override = list(tuned.changed)
    tracer, _ = trace_dataloader(make(0))
    manager = OptimizerManager(
        cache="auto",
        loader=tuned,
        target_device=device,
        cache_budget_bytes=budget_bytes,
        batched=batched,
    )
    plan = manager.optimize(tracer.dag)["migration_plan"]
    if options is not None and (plan.get("cache") or {}).get("chains"):
        # warm batches are hits, cheap to time: the tuner's default trial length, so that 2
        # workers give more than 3 cycles per round to judge against
        warm_options = dataclasses.replace(options, batches=TuneOptions().batches)
        plan["loader"] = _with_warm(make(0), plan, warm_options)
    return Case(name, workers, make, tuned, plan, budget_bytes, step_s, device)


def _with_warm(loader: Any, plan: dict[str, Any], options: Any) -> dict[str, Any]:
    """The plan's loader section with settings measured for the epochs the cache serves (the
    benchmark passes ``num_workers`` explicitly: the plan overrides what it changes)."""
    from codedag.plan import MigrationPlan
    from codedag.tune.warm import tune_warm

    model = MigrationPlan.from_dict(plan)
    if model.loader is None or not model.cache or not model.cache.cached_chains:
        return plan["loader"]
    model.loader.warm = tune_warm(loader, model, options)
    model.loader.override = sorted(set(model.loader.override) | set(model.loader.warm.changed))
    print(f"  {model.loader.warm.reason}", flush=True)
    return model.loader.model_dump(mode="json")


def _memory(tier: Path | None, sampled: bool) -> contextlib.AbstractContextManager[Any]:
    """The memory sampler, or nothing: reading ``smaps_rollup`` walks the page tables of
    every loading process, a cost that grows with what they map (the RAM tier's file), so
    timed runs go without it."""
    peak = MemoryPeak(tier)  # its thread starts when entered: unentered, it reads zeros
    return peak if sampled else contextlib.nullcontext(peak)


def _own(case: Case, epochs: int, sampled: bool = False) -> Run:
    with _memory(None, sampled) as memory:
        rates, cpu_ms, digests = run_epochs(case.make, epochs, case.step_s, case.device)
    return Run(rates, cpu_ms, digests, private_peak_bytes=memory.private_bytes)


def _tuned(case: Case, epochs: int, sampled: bool = False) -> Run:
    from codedag.migrate.api import PipelineMigrator

    plan = {"context_device_map": {}, "loader": case.tuned.model_dump(mode="json")}
    with PipelineMigrator(plan, guard=False), _memory(None, sampled) as memory:
        rates, cpu_ms, digests = run_epochs(case.make, epochs, case.step_s, case.device)
    return Run(rates, cpu_ms, digests, private_peak_bytes=memory.private_bytes)


def run_plan(
    case: Case,
    epochs: int,
    sampled: bool = False,
    on_batch: Callable[[Any], None] | None = None,
    store_share: float | None = None,
) -> Run:
    """The plan applied (an empty cache folder: epoch 1 is a true first epoch), its epochs
    loaded (``on_batch``: called with each batch; ``store_share``: the prefix cache's, None for
    its default)."""
    from codedag.migrate.api import PipelineMigrator
    from codedag.migrate.cache.runtime import CacheSettings
    from codedag.store.tiers import StoreSettings, ram_folder

    folder = Path(tempfile.mkdtemp(prefix="codedag-whole-plan-"))
    try:
        store = StoreSettings(folder=folder / "cache", ram_budget_bytes=case.budget_bytes)
        settings = CacheSettings(store=store)
        if store_share is not None:
            settings = CacheSettings(store=store, store_share=store_share)
        migrator = PipelineMigrator(case.plan, case.device, guard=False, cache=settings)
        with migrator, _memory(ram_folder(folder / "cache"), sampled) as memory:
            rates, cpu_ms, digests = run_epochs(
                case.make, epochs, case.step_s, case.device, on_batch
            )
        run = Run(rates, cpu_ms, digests, memory.tier_bytes, memory.private_bytes)
        stats = migrator.get_stats().model_dump(mode="json")
        run.cache, run.tables, run.loader = stats["cache"], stats["tables"], stats["loader"]
        migrator.cache.store.clear()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return run


def reference_digests(
    case: Case, epochs: int, on_batch: Callable[[Any], None] | None = None
) -> list[list[bytes]]:
    """The batches' digests of the pipeline's own code, without the cache, loaded with the
    plan's loader settings in every epoch (its warm ones from the second epoch on, as if the
    cache served every epoch): what the plan's batches must equal, since the augmentations that
    draw from a worker's random state change with the worker count."""
    from codedag.migrate.cache.runtime import CacheProgress
    from codedag.migrate.loader_settings import LoaderSettingsPatch

    patch = LoaderSettingsPatch.from_plan(case.plan)
    if patch is None:
        return run_epochs(case.make, epochs, device=case.device, on_batch=on_batch)[2]
    served = iter(range(1, 1 << 30))

    def every_value_served() -> CacheProgress:
        count = next(served) << 30
        return CacheProgress(count, count, count, 0)

    patch.watch_cache(every_value_served)
    patch.apply()
    try:
        return run_epochs(case.make, epochs, device=case.device, on_batch=on_batch)[2]
    finally:
        patch.restore()


@dataclass
class Difference:
    """How far the plan's batches are from the reference's where they are not bit-identical."""

    largest: float  # the largest absolute difference of any element of any batch
    scale: float  # the reference's largest magnitude, for scale
    placed: dict[str, Any]  # each call the plan runs through a torch backend: its tolerance


def largest_difference(case: Case, epochs: int) -> Difference:
    """One more untimed run of the reference and of the plan, every batch kept (only pipelines
    whose batches differ get here): the largest difference, and the placed calls' declared
    tolerances, which are what allows one."""
    from codedag.backends.tolerances import tolerance_for

    batches: list[list[torch.Tensor]] = []

    def keep(batch: Any) -> None:
        batches.append([t.detach().cpu().double() for t in _tensors(batch)])

    if case.plan.get("loader"):
        reference_digests(case, epochs, on_batch=keep)
    else:
        run_epochs(case.make, epochs, device=case.device, on_batch=keep)
    largest, scale, seen = 0.0, 0.0, iter(batches)

    def compare(batch: Any) -> None:
        nonlocal largest, scale
        for want, got in zip(next(seen), _tensors(batch)):
            got = got.detach().cpu().double()
            if want.shape != got.shape:
                largest = math.inf
                continue
            if want.numel():
                largest = max(largest, float((want - got).abs().nan_to_num(math.inf).max()))
                scale = max(scale, float(want.abs().max()))

    run_plan(case, epochs, on_batch=compare)
    placed = {
        c["function"]: tolerance_for(c["function"])
        for c in case.plan.get("calls", [])
        if c.get("migrate")
    }
    return Difference(largest, scale, placed)


def _tensors(batch: Any) -> list[torch.Tensor]:
    leaves = batch if isinstance(batch, list | tuple) else [batch]
    return [leaf for leaf in leaves if isinstance(leaf, torch.Tensor)]


VARIANTS: dict[str, Callable[[Case, int, bool], Run]] = {
    "own": _own,
    "tuned": _tuned,
    "plan": run_plan,
}


def _later(rates: list[float]) -> float:
    return statistics.fmean(rates[1:]) if len(rates) > 1 else rates[0]


def _ratio(runs: list[Run], own: list[Run], pick: Callable[[list[float]], float]) -> list[float]:
    """Per round, this variant's rate over own's (rounds paired)."""
    return [pick(r.rates) / pick(o.rates) for r, o in zip(runs, own)]


def _span(values: list[float]) -> str:
    return f"{statistics.median(values):5.2f} ({min(values):.2f}-{max(values):.2f})"


def _rounds(case: Case, variants: list[str], rounds: int, epochs: int) -> dict[str, list[Run]]:
    """The timed rounds, then one more of ``own`` and ``plan`` with memory sampled (untimed)."""
    runs: dict[str, list[Run]] = {v: [] for v in variants}
    for r in range(rounds):
        for variant in round_order(variants, r):
            # the collector's pending work, left by tracing, planning and earlier variants,
            # is not this variant's: a full collection of this process's heap takes ~90 ms,
            # a fifth of a 128-sample epoch, and fell in whichever variant came next
            gc.collect()
            runs[variant].append(VARIANTS[variant](case, epochs, False))
    runs["own_memory"] = [_own(case, epochs, True)]
    runs["plan_memory"] = [VARIANTS["plan"](case, epochs, True)]
    return runs


def _row(case: Case, runs: dict[str, list[Run]]) -> dict[str, Any]:
    own, plan = runs["own"], runs["plan"]
    own_memory, plan_memory = runs["own_memory"][0], runs["plan_memory"][0]
    first = lambda rates: rates[0]  # noqa: E731
    row: dict[str, Any] = {
        "pipeline": case.name,
        "workers": case.workers,
        "own_e1": statistics.median(r.rates[0] for r in own),
        "own_later": statistics.median(_later(r.rates) for r in own),
        "plan_e1": statistics.median(r.rates[0] for r in plan),
        "plan_later": statistics.median(_later(r.rates) for r in plan),
        "e1": _ratio(plan, own, first),
        "later": _ratio(plan, own, _later),
        "cpu_e1": [o.cpu_ms[0] / p.cpu_ms[0] for p, o in zip(plan, own)],
        "cpu_later": [_later(o.cpu_ms) / _later(p.cpu_ms) for p, o in zip(plan, own)],
    }
    if "tuned" in runs:
        row["tuned_e1"] = _ratio(runs["tuned"], own, first)
        row["tuned_later"] = _ratio(runs["tuned"], own, _later)
    reference = own[0].digests
    if case.plan.get("loader"):
        reference = reference_digests(case, len(own[0].rates))
    row["same"] = all(p.digests == reference for p in (*plan, plan_memory))
    row["same_against"] = "own" if reference is own[0].digests else "settings"
    row["difference"] = None if row["same"] else largest_difference(case, len(own[0].rates))
    tier = plan_memory.tier_peak_bytes
    private = plan_memory.private_peak_bytes - own_memory.private_peak_bytes
    cache = plan[-1].cache
    budgets = cache.get("budget_bytes", {}) if cache.get("enabled") else {}
    row.update(
        tier_mb=tier / 1e6,
        private_mb=max(0, private) / 1e6,
        budget_mb=budgets.get("ram", 0) / 1e6,
        hits=cache.get("hits", 0),
        misses=cache.get("misses", {}),
        left_for_later=cache.get("not_stored_later", 0),
        tables=plan[-1].tables,
    )
    section = case.plan.get("cache") or {}
    chains = [c for c in section.get("chains", []) if c.get("cached")]
    own_cpu_ms = statistics.median(_later(o.cpu_ms) for o in own)
    saved_ms = section.get("saved_ns_per_sample", 0) / 1e6 if chains else 0.0
    row.update(own_cpu_ms=own_cpu_ms, saved_ms=saved_ms, bound=_cache_bound(own_cpu_ms, saved_ms))
    row["cut"] = ", ".join(c["cut"]["step"].rsplit(".", 1)[-1] for c in chains) or "-"
    row["loader"] = loader_line(plan[-1].loader, case.plan.get("loader"))
    return row


def loader_line(stats: dict[str, Any] | None, section: dict[str, Any] | None) -> str:
    """What the plan did to the DataLoader settings in one run, in words: the settings applied
    (``get_stats()["loader"]``), those kept as the pipeline passes them and those kept so that
    every sample gets its random draws, each with why.

    Args:
        stats: the loader patch's ``stats()`` (``None``: no loader settings were patched).
        section: the plan's loader section (``None``: not tuned).
    """
    from codedag.plan.loader import LoaderSection, LoaderSettings

    if section is None:
        return "loader: not tuned (--tune), the pipeline's own settings"
    model = LoaderSection.model_validate(section)
    if stats is None:
        why = model.reason or f"the plan keeps {model.yours.label()}"
        return f"loader: kept as the pipeline sets it: {why}"
    chosen = LoaderSettings.model_validate(stats["settings"])
    changed = ", ".join(stats["changed"]) or "nothing"
    parts = [
        f"loader: {chosen.label()} applied to {stats['applied']} of {stats['dataloaders']} "
        f"DataLoaders (changed: {changed})"
    ]
    if stats["kept_explicit"]:
        parts.append(
            f"kept explicit {_counted(stats['kept_explicit'])}: the pipeline passes them and "
            "the plan does not override them"
        )
    if stats["kept_for_draws"]:
        reasons = model.kept_for_draws()
        why = "; ".join(
            f"{key}: {reasons.get(key.removeprefix('warm '), 'it would change the random draws')}"
            for key in stats["kept_for_draws"]
        )
        parts.append(f"kept for the random draws {_counted(stats['kept_for_draws'])} ({why})")
    if stats.get("overridden"):
        if model.draws == []:
            why = "no sample draws random numbers"
        elif model.allow_changed_draws:
            why = "the plan allows changed draws"
        else:
            why = "the plan overrides them"
        parts.append(f"replaced explicit {_counted(stats['overridden'])} ({why})")
    warm = stats.get("warm")
    if warm:
        parts.append(
            f"warm {', '.join(warm['changed']) or 'nothing'} in {warm['warm_epochs']} epoch(s)"
        )
    return "; ".join(parts)


def _counted(counts: dict[str, int]) -> str:
    """``num_workers x2, persistent_workers x1``: each key with the DataLoaders it was in."""
    return ", ".join(f"{key} x{count}" for key, count in counts.items())


HEADER = (
    f"{'pipeline':<11} {'w':>1}  {'own e1':>6} {'own e2+':>7}  {'plan e1':>7} {'plan e2+':>8}  "
    f"{'e1 x (range)':>16} {'e2+ x (range)':>17}  {'cpu e1 x':>8} {'cpu e2+ x':>9}  {'same':<4}  "
    f"{'tier MB':>7} {'+anon MB':>8} {'budget MB':>9}  cut"
)


def _print(row: dict[str, Any]) -> None:
    same = ("yes" if row["same"] else _near(row["difference"])) + (
        "*" if row["same_against"] == "settings" else ""
    )
    print(
        f"{row['pipeline']:<11} {row['workers']:>1}  {row['own_e1']:6.1f} {row['own_later']:7.1f}"
        f"  {row['plan_e1']:7.1f} {row['plan_later']:8.1f}  {_span(row['e1']):>16} "
        f"{_span(row['later']):>17}  {statistics.median(row['cpu_e1']):8.2f} "
        f"{statistics.median(row['cpu_later']):9.2f}  {same:<4}  {row['tier_mb']:7.1f} "
        f"{row['private_mb']:8.1f} {row['budget_mb']:9.0f}  {row['cut']}",
        flush=True,
    )
    print(f"{'':<14}{row['loader']}", flush=True)
    if "tuned_e1" in row:
        print(
            f"{'':<14}tuned alone: e1 {_span(row['tuned_e1'])}, e2+ {_span(row['tuned_later'])}",
            flush=True,
        )


def _near(difference: Difference | None) -> str:
    """``tol`` where the batches differ by no more than the loosest declared tolerance of a
    placed call allows on the batches' scale, ``NO`` otherwise (nothing placed to allow it, or
    a larger difference)."""
    if difference is None:
        return "NO"
    allowed = max(
        (t.atol + (t.rtol + t.scale_rtol) * difference.scale for t in difference.placed.values()),
        default=0.0,
    )
    return "tol" if difference.largest <= allowed else "NO"


def _difference_line(row: dict[str, Any]) -> str | None:
    """What a ``tol`` or ``NO`` row's batches differ by, and the placed calls' tolerances."""
    d: Difference | None = row.get("difference")
    if d is None:
        return None
    calls = "; ".join(
        f"{name} (atol {t.atol:g}, rtol {t.rtol:g}, scale_rtol {t.scale_rtol:g})"
        for name, t in d.placed.items()
    )
    return (
        f"{row['pipeline']} w{row['workers']}: batches differ from the reference by at most "
        f"{d.largest:.3g} (its values up to {d.scale:.3g}); "
        + (f"calls placed on a torch backend: {calls}" if calls else "no call is placed")
    )


def _cache_bound(own_cpu_ms: float, saved_ms: float) -> float:
    """The most the cache alone can speed epochs 2+ up when loading is CPU-bound: the
    pipeline's CPU time per sample over what is left when every hit saves what the plan
    expects (its calibrated prefix time less the read)."""
    left = own_cpu_ms - saved_ms
    return own_cpu_ms / left if left > 0 else math.inf


BYTES_HEADER = (
    f"{'pipeline':<11} {'chain':<7} {'n':>3}  {'cut (dtype shape)':<44} {'KB/value':>9} "
    f"{'KB/sample':>9}  {'smallest before the cut (dtype)':<36} {'KB/value':>9} {'x':>5} "
    f"{'after ms':>8} {'+read ms':>8} {'+write ms':>9}"
)


def print_bytes(name: str, plan: dict[str, Any]) -> None:
    """Each cached chain's cut of ``plan`` and the smallest value before it (``--bytes``): its
    bytes, the traced time of the calls after it, and what the cut's larger value adds to
    reading back and storing at the store's measured costs."""
    from codedag.optimize.cache import MIN_SAVING
    from codedag.optimize.cache_bytes import smaller_value, steps_ns
    from codedag.plan.cache import CacheSection

    section = CacheSection.model_validate(plan.get("cache") or {})
    if not section.cached_chains:
        print(f"{name:<11} {'-':<7} {'':>3}  {section.note[:120]}", flush=True)
    for chain in section.cached_chains:
        cut = chain.cut
        assert cut is not None
        per_sample = chain.sources / max(1, section.samples)
        described = f"{cut.step.rsplit('.', 1)[-1]} ({cut.dtype} {tuple(cut.shape)})"
        line = (
            f"{name:<11} {chain.id:<7} {per_sample:3.2g}  {described:<44} "
            f"{cut.bytes_per_sample / 1e3:9.1f} {cut.bytes_per_sample * per_sample / 1e3:9.1f}  "
        )
        small = smaller_value(chain.candidates, cut, MIN_SAVING)
        if small is None:
            line += "none: the cut's value is the smallest that saves time"
        else:
            ratio = cut.bytes_per_sample / max(1, small.bytes_per_sample)
            what = f"{small.step.rsplit('.', 1)[-1]} ({small.dtype})"
            line += (
                f"{what:<36} {small.bytes_per_sample / 1e3:9.1f} {ratio:5.2f} "
                f"{steps_ns(small, cut) / 1e6:8.3f} {(cut.read_ns - small.read_ns) / 1e6:8.3f} "
                f"{(cut.write_ns - small.write_ns) / 1e6:9.3f}"
            )
        print(line, flush=True)


def _bytes_main(args: argparse.Namespace, budget: int | None) -> None:
    """``--bytes``: each pipeline traced and planned (no loading timed, no batched chains: they
    do not move a cut), its cuts' bytes."""
    print(
        f"{args.samples} samples, batches of {args.batch_size}; n: values per sample; KB: "
        "10^3 bytes; x: the cut's bytes over the smaller value's; after ms: traced time of the "
        "calls after the smaller value up to the cut; +read / +write ms: what the cut's larger "
        "value adds to reading back and to storing once (the store's measured costs)"
    )
    print(BYTES_HEADER)
    for name in args.pipelines:
        case = prepare(
            name, args.workers[0], args.samples, args.batch_size, False, budget, batched="never"
        )
        print_bytes(name, case.plan)


def _geomean(values: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values))


@contextlib.contextmanager
def _threads(count: int) -> Iterator[None]:
    before = torch.get_num_threads()
    if count > 0:
        torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pipelines", nargs="+", default=list(PIPELINES), choices=PIPELINES)
    parser.add_argument("--workers", nargs="+", type=int, default=[0, 2])
    parser.add_argument("--samples", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tune", action="store_true", help="also tune the loader (and apply it)")
    parser.add_argument(
        "--cache-budget-mb", type=float, default=None, help="default: the RAM tier's"
    )
    parser.add_argument("--torch-threads", type=int, default=1, help="0: torch's own")
    parser.add_argument(
        "--store-share",
        type=float,
        default=None,
        help="the prefix cache's storing share (default: the plan's, which paces the first "
        "epoch where storing every value would slow it; 0: every value stored in the epoch that "
        "computes it)",
    )
    parser.add_argument(
        "--step-ms",
        type=float,
        default=0.0,
        help="sleep this long after each batch, as while an accelerator runs the step",
    )
    parser.add_argument(
        "--bytes",
        action="store_true",
        help="print each cut's bytes and the smallest value before it",
    )
    args = parser.parse_args()
    if args.step_ms < 0:
        parser.error("--step-ms must be 0 or more")
    budget = None if args.cache_budget_mb is None else int(args.cache_budget_mb * 1e6)
    if args.bytes:
        with _threads(args.torch_threads):
            _bytes_main(args, budget)
        return
    variants = ["own", "tuned", "plan"] if args.tune else ["own", "plan"]
    print(
        f"{args.samples} samples, batches of {args.batch_size}, {args.epochs} epochs, "
        f"{args.rounds} interleaved rounds, torch threads {args.torch_threads or 'default'}, "
        f"a {args.step_ms:g} ms step after each batch, "
        f"{os.cpu_count()} CPUs; samples/s (median over rounds); x: plan / own per round, "
        "median (lowest-highest); cpu x: own / plan CPU time per sample (this process and its "
        "workers), median"
    )
    if args.store_share is not None:
        share = args.store_share
        VARIANTS["plan"] = lambda case, epochs, sampled: run_plan(
            case, epochs, sampled, store_share=share
        )
        print(f"the prefix cache's storing share: {share:g}")
    print(HEADER)
    rows = []
    with _threads(args.torch_threads):
        for name in args.pipelines:
            for workers in args.workers:
                case = prepare(
                    name,
                    workers,
                    args.samples,
                    args.batch_size,
                    args.tune,
                    budget,
                    step_s=args.step_ms / 1e3,
                )
                row = _row(case, _rounds(case, variants, args.rounds, args.epochs))
                rows.append(row)
                _print(row)
    for row in rows:
        line = _difference_line(row)
        if line is not None:
            print(line)
    if any(r["same_against"] == "settings" for r in rows):
        print(
            "* compared with the pipeline's own code loaded with the plan's loader settings in "
            "each epoch: the augmentations that draw from a worker's random state change with them"
        )
    for workers in args.workers:
        chosen = [r for r in rows if r["workers"] == workers]
        e1 = _geomean([statistics.median(r["e1"]) for r in chosen])
        later = _geomean([statistics.median(r["later"]) for r in chosen])
        cpu1 = _geomean([statistics.median(r["cpu_e1"]) for r in chosen])
        cpu2 = _geomean([statistics.median(r["cpu_later"]) for r in chosen])
        print(
            f"geometric mean, {workers} workers, {len(chosen)} pipelines: epoch 1 {e1:.2f}x, "
            f"epochs 2+ {later:.2f}x (samples/s, plan / own); CPU time per sample own / plan: "
            f"epoch 1 {cpu1:.2f}x, epochs 2+ {cpu2:.2f}x"
        )
    for row in rows:
        misses = ", ".join(f"{k} {v}" for k, v in row["misses"].items()) or "none"
        print(
            f"cache {row['pipeline']} w{row['workers']}: hits {row['hits']}, misses {misses}, "
            f"{row['left_for_later']} left for a later epoch to store; "
            f"the plan expects {row['saved_ms']:.2f} ms saved of {row['own_cpu_ms']:.2f} ms CPU "
            f"per sample: the cache alone can give at most {row['bound']:.2f}x"
            + _tables_clause(row["tables"])
        )


def _tables_clause(stats: dict[str, Any]) -> str:
    """The lookup tables' counts of one run of the plan, in words (empty: none planned)."""
    if not stats.get("enabled"):
        return ""
    return (
        f"; lookup tables ({', '.join(stats['producers'])}): {stats['runs']} runs, "
        f"{stats['gathered']} gathered, {stats['computed']} computed by their calls, "
        f"{stats['mismatches']} mismatches, {stats['errors']} failed batches run again without "
        "them"
    )


if __name__ == "__main__":
    main()
