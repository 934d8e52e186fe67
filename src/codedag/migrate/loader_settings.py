"""Apply a plan's ``loader`` section to the DataLoaders a program creates while the plan is applied.

``torch.utils.data.DataLoader.__init__`` is patched through the one owner of monkeypatches
(:class:`codedag.patching.Patcher`). For each DataLoader created over the tuned Dataset type, the
settings the plan changes (``LoaderSection.changed``) become keyword defaults:

* a setting the program passes explicitly is kept, with one warning giving the figure the plan
  measured against the one kept, unless the plan lists the key in ``override`` or no sample draws
  random numbers (``LoaderSection.draws`` empty) or the plan allows changed draws;
* a setting that would change the random draws a sample gets (another worker count where samples
  draw, workers made fresh where the program kept them) is kept unless the plan allows changed
  draws (:meth:`LoaderSection.draw_blocker <codedag.plan.loader.LoaderSection.draw_blocker>`),
  with one warning when applied;
* persistent workers the plan turns on are re-seeded at each epoch's start exactly as fresh
  workers would be (:mod:`codedag.migrate.epoch_seeds`), so every epoch's batches stay the ones
  the program's own settings give;
* the thread count goes into a ``worker_init_fn`` (:class:`WorkerThreads`) that wraps the
  program's own one, which still runs;
* what only applies with workers (``prefetch_factor``, ``persistent_workers``, threads) is left
  out when the DataLoader ends up with ``num_workers=0``; ``pin_memory`` only where CUDA exists;
* DataLoaders that codedag itself creates (tracing, tuning) are left alone;
* the section's ``warm`` settings, for epochs the prefix cache serves, are switched to by
  :class:`~codedag.migrate.warm_loader.WarmSwitch` through a patched ``DataLoader.__iter__``,
  once :meth:`LoaderSettingsPatch.watch_cache` has given it the cache's counts (the same rules
  for explicit settings hold there);
* settings past what this container's CPU limit justifies (:meth:`LoaderSettings.bounded
  <codedag.plan.loader.LoaderSettings.bounded>`: workers up to a few per CPU, threads up to one
  per CPU) are lowered to the limit, with one warning: a plan from another machine, or another
  person, never starts more processes than the machine can run.

:meth:`LoaderSettingsPatch.restore` puts the original ``__init__`` back.
"""

from __future__ import annotations

import inspect
import logging
import sys
import threading
import weakref
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from codedag.devices.cgroups import container_cpus
from codedag.devices.torch_devices import cuda_available
from codedag.migrate.cache.runtime import CacheProgress
from codedag.migrate.epoch_seeds import EpochSeeds, reseedable, seeds_of, worker_init
from codedag.migrate.stats import LoaderStats
from codedag.migrate.warm_loader import WarmSwitch
from codedag.patching import Patcher
from codedag.plan.loader import DEFAULT_PREFETCH, WORKERS_PER_CPU, LoaderSection, LoaderSettings
from codedag.util.text import printable

log = logging.getLogger(__name__)

TARGET = "torch.utils.data.dataloader.DataLoader.__init__"
EPOCH_TARGET = "torch.utils.data.dataloader.DataLoader.__iter__"

# torch's DataLoader defaults for the settings a section may change (threads: none).
_TORCH_DEFAULTS: dict[str, Any] = {
    "num_workers": 0,
    "prefetch_factor": None,
    "persistent_workers": False,
    "pin_memory": False,
}
_ALLOW_HINT = "tune with --allow-changed-draws to apply it anyway"

# codedag modules whose DataLoaders are internal (a replay for tracing, variants while tuning).
_INTERNAL_PREFIXES = ("codedag.trace", "codedag.tune", "codedag.calibrate", "codedag.migrate")


def _qualified_type(obj: object) -> str:
    kind = type(obj)
    return f"{kind.__module__}.{kind.__qualname__}"


def _same(key: str, current: Any, value: Any) -> bool:
    """Whether a DataLoader's ``current`` value already is the plan's (torch's default
    prefetch, 2, spelled either way)."""
    if key == "prefetch_factor":
        return (current or DEFAULT_PREFETCH) == (value or DEFAULT_PREFETCH)
    return bool(current == value)


def _creator_module() -> str:
    """The module of the code that created the DataLoader (past torch, subclasses and us)."""
    frame = sys._getframe(2)
    while frame is not None:
        name = str(frame.f_globals.get("__name__", ""))
        code = frame.f_code
        is_init = code.co_name == "__init__" and "self" in code.co_varnames[:1]
        if not (name.startswith("torch.utils.data") or name == __name__ or is_init):
            return name
        frame = frame.f_back  # type: ignore[assignment]
    return ""


@dataclass(eq=False, repr=False)
class LoaderSettingsPatch:
    """Install, count and restore the DataLoader defaults of a loader section.

    Args:
        section: the plan's loader section.
        cuda_available: whether ``pin_memory`` may be set (default: ask torch when applied).
        cpus: CPUs this process may use, which bound workers and threads (default: the
            container's limit, read when applied).
    """

    section: LoaderSection
    cuda_available: bool | None = None
    cpus: float | None = None

    def __post_init__(self) -> None:
        self.chosen: LoaderSettings = self.section.chosen
        """The settings applied: the section's, within this machine's bounds."""
        self._patcher = Patcher("codedag-loader")
        self._lock = threading.Lock()
        self._logged: set[str] = set()
        self.loaders = 0
        self.applied = 0
        self.kept_explicit: Counter[str] = Counter()
        self.kept_for_draws: Counter[str] = Counter()
        self.reseeded = 0
        self._announced: set[str] = set()
        self._seeds: weakref.WeakKeyDictionary[Any, EpochSeeds] = weakref.WeakKeyDictionary()
        self.overridden: Counter[str] = Counter()
        self.skipped: Counter[str] = Counter()
        self.wrapped_worker_init = 0
        self.warm: WarmSwitch | None = None
        self._warm_keys: weakref.WeakKeyDictionary[Any, frozenset[str]] = (
            weakref.WeakKeyDictionary()
        )

    @classmethod
    def from_plan(cls, plan: object) -> LoaderSettingsPatch | None:
        """The patch for a plan (a :class:`~codedag.plan.MigrationPlan` or its dict), or None.

        ``None`` when the plan has no loader section or its section keeps every setting.
        """
        section = plan.get("loader") if isinstance(plan, Mapping) else getattr(plan, "loader", None)
        if section is None:
            return None
        if not isinstance(section, LoaderSection):
            section = LoaderSection.model_validate(section)
        if not (section.changed or section.switches_when_warm):
            return None
        return cls(section)

    def watch_cache(self, progress: Callable[[], CacheProgress]) -> None:
        """Switch DataLoaders to the section's warm settings for epochs the prefix cache
        serves, judged by ``progress`` (the cache's counts); without a call, or without warm
        settings that differ, every epoch keeps the settings it was created with."""
        warm = self.section.warm
        if warm is not None and warm.changed:
            self.warm = WarmSwitch(warm, progress)

    # ------------------------------------------------------------------ apply / restore
    def apply(self) -> None:
        """Patch ``DataLoader.__init__`` (a second call does nothing)."""
        if self._patcher.is_patched(TARGET):
            return
        if self.cuda_available is None:
            self.cuda_available = cuda_available()
        self._bound()
        self._patcher.patch(TARGET, self._factory, rebind_references=False)
        if self.warm is not None or "persistent_workers" in self.section.changed:
            self._patcher.patch(EPOCH_TARGET, self._epoch_factory, rebind_references=False)
        self._announce_kept()
        log.info(
            "loader settings applied to new DataLoaders%s: %s",
            f" over {printable(self.section.dataset, 120)}" if self.section.dataset else "",
            self.chosen.label(),
        )

    def _announce_kept(self) -> None:
        """One warning for the settings kept because they would change the random draws."""
        kept = self.section.kept_for_draws()
        if not kept:
            return
        self._announced.update(kept)
        reasons = "; ".join(f"{key}: {why}" for key, why in kept.items())
        settings = self.section.kept_settings(list(kept))
        log.warning(
            "loader settings: %s kept as your DataLoader sets them, so that every sample gets "
            "the random draws your settings give (%s); the gain forgone: %s (%s)",
            ", ".join(kept),
            reasons,
            self.section.forgone(settings),
            _ALLOW_HINT,
        )

    def _bound(self) -> None:
        source = "given"
        if self.cpus is None:
            self.cpus, source = container_cpus()
        self.chosen, changes = self.section.chosen.bounded(self.cpus)
        if self.warm is not None:
            changes += [f"warm {change}" for change in self.warm.bound(self.cpus)]
        if changes:
            log.warning(
                "the plan's loader settings exceed this machine: %s (limits: %d workers per CPU "
                "and one thread per CPU, %g CPUs usable: %s)",
                ", ".join(changes),
                WORKERS_PER_CPU,
                self.cpus,
                source,
            )

    def restore(self) -> int:
        """Put the original ``DataLoader.__init__`` (and ``__iter__``) back, and switched
        DataLoaders their own settings; returns how many patches were undone."""
        if self.warm is not None:
            self.warm.restore_loaders()
        return self._patcher.restore()

    def is_applied(self) -> bool:
        """Whether the patch is installed."""
        return self._patcher.is_patched(TARGET)

    def _factory(self, original: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(original)
        patch = self

        def __init__(loader: object, *args: Any, **kwargs: Any) -> None:
            try:
                bound = signature.bind(loader, *args, **kwargs)
            except TypeError:
                original(loader, *args, **kwargs)  # raises the DataLoader's own error
                return
            bound.arguments.update(patch.defaults(bound.arguments, _creator_module()))
            original(*bound.args, **bound.kwargs)

        __init__.__wrapped__ = original  # type: ignore[attr-defined]
        __init__.__doc__ = original.__doc__
        return __init__

    def _epoch_factory(self, original: Callable[..., Any]) -> Callable[..., Any]:
        patch = self

        def __iter__(loader: Any) -> Any:
            keys = patch._warm_keys.get(loader)
            if keys and patch.warm is not None:
                patch.warm.before_epoch(loader, keys)
            seeds = patch._seeds.get(loader)
            if seeds is not None:
                seeds.next_epoch(loader)  # after a warm switch, which may restart the workers
            return original(loader)

        __iter__.__wrapped__ = original  # type: ignore[attr-defined]
        __iter__.__doc__ = original.__doc__
        return __iter__

    # ------------------------------------------------------------------ the decision
    def defaults(self, explicit: Mapping[str, Any], creator: str = "") -> dict[str, Any]:
        """The arguments to set for one DataLoader created with ``explicit`` arguments.

        Settings the program left out are added; an explicit one is replaced only when the
        plan overrides it; ``worker_init_fn`` becomes a wrapper that calls the program's own.

        Args:
            explicit: the arguments the program passed (name -> value), ``self`` included.
            creator: the module that created the DataLoader.
        """
        with self._lock:
            self.loaders += 1
            dataset = explicit.get("dataset")
            wanted = self.section.dataset
            if creator.startswith(_INTERNAL_PREFIXES):
                self.skipped["created by codedag"] += 1
                return {}
            if wanted is not None and dataset is not None and _qualified_type(dataset) != wanted:
                self.skipped[f"dataset {_qualified_type(dataset)}"] += 1
                self._once(
                    f"DataLoader over {_qualified_type(dataset)} left as it is: the plan's "
                    f"loader settings were measured for {printable(wanted, 120)}",
                    logging.DEBUG,
                )
                return {}
            added = self._decide(explicit)
            if added:
                self.applied += 1
            loader = explicit.get("self")
            seeds = seeds_of(added.get("worker_init_fn"))
            if seeds is not None and loader is not None:
                self._seeds[loader] = seeds
                self.reseeded += 1
            if self.warm is not None and loader is not None:
                self._warm_keys[loader] = self._warm_switchable(set(explicit))
            return added

    def _warm_switchable(self, explicit: set[str]) -> frozenset[str]:
        assert self.warm is not None
        override = set(self.section.override)
        if self.section.settles_explicit:
            override |= explicit
        blocked = set()
        warm_workers = self.warm.warm.chosen.num_workers
        why = self.section.draw_blocker("num_workers", warm_workers)
        if why is not None and "num_workers" in self.warm.switchable(explicit, override):
            blocked.add("num_workers")
            self.kept_for_draws["warm num_workers"] += 1
            self._once(
                f"loader settings: epochs the prefix cache serves keep your worker count; the "
                f"plan measured num_workers={warm_workers} faster there, but {why} "
                f"({_ALLOW_HINT})",
                logging.WARNING,
            )
        for key in self.warm.kept(explicit, override):
            self.kept_explicit[f"warm {key}"] += 1
            value = getattr(self.warm.warm.chosen, key)
            why = self.warm.warm.reason
            self._once(
                f"DataLoader: your explicit {key} is kept in the epochs the prefix cache serves; "
                f"the plan measured {key}={value!r} faster there{f' ({why})' if why else ''} "
                f"(leave {key} unset, or tune with --override {key}, to use it)",
                logging.WARNING,
            )
        return self.warm.switchable(explicit, override) - blocked

    def _decide(self, explicit: Mapping[str, Any]) -> dict[str, Any]:
        chosen, section = self.chosen, self.section
        added: dict[str, Any] = {}
        for key in section.changed:
            if key == "threads":
                continue
            value = getattr(chosen, key)
            given = key in explicit
            current = explicit[key] if given else _TORCH_DEFAULTS[key]
            if _same(key, current, value):
                continue
            if given and key not in section.override and not section.settles_explicit:
                self.kept_explicit[key] += 1
                self._keep(key, current, value, f"leave {key} unset, or tune with --override {key}")
                continue
            why = section.draw_blocker(key, value)
            if why is not None:
                self.kept_for_draws[key] += 1
                self._keep(key, current, value, _ALLOW_HINT, why)
                continue
            if given:
                self.overridden[key] += 1
                self._once(
                    f"DataLoader: {key}={current!r} given explicitly, replaced by the plan's "
                    f"measured {value!r}"
                )
            added[key] = value
        workers = added.get("num_workers", explicit.get("num_workers", 0))
        if not workers:
            for key in ("prefetch_factor", "persistent_workers"):
                added.pop(key, None)
        if added.get("pin_memory") and not self.cuda_available:
            added.pop("pin_memory")
            self._once("DataLoader: pin_memory left off: no CUDA device here")
        seeds = self._epoch_seeds(explicit, added, workers)
        threads = "threads" in section.changed
        if workers and (threads or seeds is not None):
            user_init = explicit.get("worker_init_fn")
            added["worker_init_fn"] = worker_init(
                chosen.threads if threads else None, user_init, seeds
            )
            if user_init is not None:
                self.wrapped_worker_init += 1
        return added

    def _epoch_seeds(
        self, explicit: Mapping[str, Any], added: dict[str, Any], workers: int
    ) -> EpochSeeds | None:
        """The per-epoch seeds of workers the plan keeps across epochs; ``persistent_workers``
        is dropped from ``added`` where they cannot be seeded as fresh ones would be."""
        if not (workers and added.get("persistent_workers")):
            return None
        why = reseedable(dict(explicit))
        if why is None:
            return EpochSeeds()
        if self.section.allow_changed_draws:
            return None
        added.pop("persistent_workers")
        self.kept_for_draws["persistent_workers"] += 1
        self._keep("persistent_workers", False, True, _ALLOW_HINT, why)
        return None

    def _keep(self, key: str, current: Any, value: Any, hint: str, why: str = "") -> None:
        """Say once, as a warning, that ``key`` stays ``current``: why, and the gain forgone."""
        if why and key in self._announced:
            return  # said when the plan was applied
        try:
            kept = self.chosen.model_copy(update={key: current})
            forgone = self.section.forgone(LoaderSettings.model_validate(kept.model_dump()))
        except ValueError:
            forgone = self.section.forgone(self.section.kept_settings([key]))
        reason = why or "your code passes it explicitly"
        self._once(
            f"DataLoader: {key}={current!r} kept (the plan measured {key}={value!r}): {reason}; "
            f"the gain forgone: {forgone} ({hint})",
            logging.WARNING,
        )

    def _once(self, message: str, level: int = logging.INFO) -> None:
        if message not in self._logged:
            self._logged.add(message)
            log.log(level, "%s", message)

    # ------------------------------------------------------------------ report
    def stats(self) -> LoaderStats:
        """What the patch did: DataLoaders seen, changed, explicit settings kept, skipped."""
        return LoaderStats.model_validate(
            {
                "settings": self.chosen.model_dump(mode="json"),
                "changed": list(self.section.changed),
                "dataloaders": self.loaders,
                "applied": self.applied,
                "kept_explicit": dict(self.kept_explicit),
                "kept_for_draws": dict(self.kept_for_draws),
                "reseeded_each_epoch": self.reseeded,
                "overridden": dict(self.overridden),
                "wrapped_worker_init_fn": self.wrapped_worker_init,
                "skipped": dict(self.skipped),
                "applied_now": self.is_applied(),
                "warm": None if self.warm is None else self.warm.stats(),
            }
        )
