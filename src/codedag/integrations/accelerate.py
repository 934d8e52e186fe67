"""Zero-configuration acceleration of a DataLoader: plan it in its first epoch, apply the plan.

Two ways in, one :class:`~codedag.integrations.watch.LoaderWatch` behind both:

* ``loader = codedag.accelerate(loader)`` in a notebook or a script: the same loader object comes
  back with its class swapped for a subclass created on the fly whose ``__iter__`` hands each
  epoch to the watch. The object stays the user's: ``isinstance`` against ``DataLoader`` and the
  user's own subclass holds, its attributes and ``len()`` are untouched, and no other loader is
  affected (a process-wide patch of ``DataLoader.__iter__`` would also catch the validation
  loader). :func:`release` puts the original class back, restores the plan's patches and returns
  the results; it runs at interpreter exit for loaders still accelerated.
* :class:`ScriptWatch` (``codedag run``): a patch of ``DataLoader.__iter__`` through the one owner
  of monkeypatches, for a script that is not edited; it numbers the loaders in the order they are
  first iterated and watches the one chosen (``--loader N``, default the first). Until the script
  imports torch's DataLoader the patch waits for that import (a script without torch never
  imports it for codedag).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import sys
import threading
import warnings
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from codedag.errors import ConfigError
from codedag.integrations.run_results import AcceleratedRun
from codedag.integrations.watch import LoaderWatch, WatchSettings, busy

if TYPE_CHECKING:
    from codedag.plan.cache import FirstEpoch

log = logging.getLogger(__name__)

LOADER_MODULE = "torch.utils.data.dataloader"
ITER_TARGET = f"{LOADER_MODULE}.DataLoader.__iter__"
_WATCH_ATTR = "_codedag_watch"
_accelerated: weakref.WeakSet[Any] = weakref.WeakSet()
_subclasses: dict[type, type] = {}
_lock = threading.Lock()


def _accelerated_class(kind: type) -> type:
    """A subclass of ``kind`` whose ``__iter__`` goes through the loader's watch (one per class)."""
    with _lock:
        found = _subclasses.get(kind)
        if found is None:
            original = kind.__iter__  # type: ignore[attr-defined]

            def __iter__(self: Any) -> Any:
                watch = self.__dict__.get(_WATCH_ATTR)
                if watch is None:
                    return original(self)
                return watch.iterate(lambda: original(self))

            found = type(
                kind.__name__, (kind,), {"__iter__": __iter__, "__module__": kind.__module__}
            )
            found.__qualname__ = kind.__qualname__
            _subclasses[kind] = found
        return found


def accelerate(
    loader: Any,
    *,
    plan_budget_s: float = 60.0,
    replan: bool = False,
    store_plans: bool = True,
    first_epoch: FirstEpoch = "all",
) -> Any:
    """Plan ``loader`` in its first epoch and apply the plan; return it.

    The plan is made after the first batch (with workers once the planner's background import
    ended; they receive it through a mailbox) and serves the rest of the epoch. The batches are those the loader yields without
    codedag: tracing puts every random generator back, and the plan's runtime reproduces the pipeline's
    values (docs/run.md). A plan stored for the same pipeline by an earlier run applies from the
    first batch (``replan=True`` plans again).

    Args:
        loader: a ``torch.utils.data.DataLoader`` (a subclass too).
        plan_budget_s: seconds tracing and planning may take; past it the loader runs unmodified.
        replan: ignore a stored plan.
        store_plans: keep the plan for the next run of the same pipeline.
        first_epoch: how the prefix cache's first epoch stores values: ``all`` (the default:
            every value in the epoch that computes it, so the next reads every one back),
            ``auto`` (the plan's: paced where storing every value would slow it) or ``paced``
            (docs/cache.md).

    Returns:
        The same object, still an instance of its class (a subclass swapped in).

    Raises:
        ConfigError: ``loader`` is not a DataLoader.
    """
    from torch.utils.data import DataLoader

    if not isinstance(loader, DataLoader):
        raise ConfigError(f"accelerate expects a torch DataLoader, got {type(loader).__name__}")
    if loader.__dict__.get(_WATCH_ATTR) is not None:
        return loader  # already accelerated
    settings = WatchSettings(plan_budget_s, replan, store_plans, first_epoch)
    loader.__dict__[_WATCH_ATTR] = LoaderWatch(loader, settings)
    loader.__class__ = _accelerated_class(type(loader))
    with _lock:
        if not _accelerated:  # registered on first use: importing codedag changes nothing
            atexit.unregister(_release_all)
            atexit.register(_release_all)
        _accelerated.add(loader)
    return loader


def release(loader: Any) -> AcceleratedRun | None:
    """Stop accelerating ``loader``: restore the plan's patches and its class; return its results
    (None when it was not accelerated)."""
    watch = loader.__dict__.pop(_WATCH_ATTR, None)
    if watch is None:
        return None
    _accelerated.discard(loader)
    for base, sub in _subclasses.items():
        if type(loader) is sub:
            loader.__class__ = base
    return watch.close()


def results_of(loader: Any) -> AcceleratedRun | None:
    """What the watch of an accelerated loader measured so far (None when not accelerated)."""
    watch = loader.__dict__.get(_WATCH_ATTR)
    return None if watch is None else watch.results


def _release_all() -> None:
    for loader in list(_accelerated):
        try:
            release(loader)
        except Exception as error:  # interpreter exit: log, never raise
            log.debug("release at exit: %s", error)


class ScriptWatch:
    """Watch the DataLoaders a script iterates; plan the ``index``-th (in order of first iteration).

    Use as a context manager around the script: ``DataLoader.__iter__`` is patched on entry and
    restored on exit, with the plan's patches. ``select`` (a predicate on the loader) limits the
    loaders counted to those it accepts (a trainer's training loaders, say).
    """

    def __init__(
        self,
        settings: WatchSettings,
        index: int = 0,
        select: Callable[[Any], bool] | None = None,
    ) -> None:
        from codedag.patching import Patcher

        self.settings = settings
        self.index = index
        self.select = select
        self.watch: LoaderWatch | None = None
        self.seen = 0
        self._order: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
        # a loader's data set and settings -> its order: a loader made again over them (a
        # helper that builds one each epoch) is the same loader
        self._made: dict[tuple[Any, ...], tuple[Any, int]] = {}
        self._patcher = Patcher("codedag-run", stable_references=True)
        self._lock = threading.Lock()
        self._waiting: _AfterImport | None = None

    def __enter__(self) -> ScriptWatch:
        if LOADER_MODULE in sys.modules:
            self._patch()
        else:
            self._waiting = _AfterImport(LOADER_MODULE, self._patch_on_import)
            sys.meta_path.insert(0, self._waiting)
        return self

    def _patch(self) -> None:
        from codedag.patching import like_original

        def factory(original: Any) -> Any:
            def __iter__(loader: Any) -> Any:
                watch = None if busy() else self._watch_for(loader)
                if watch is None:
                    return original(loader)
                return watch.iterate(lambda: original(loader))

            return like_original(__iter__, original)

        self._patcher.patch(ITER_TARGET, factory, rebind_references=False)

    def _patch_on_import(self) -> None:
        self._stop_waiting()
        try:
            self._patch()
        except Exception as error:  # the script's import of torch goes on; it runs unmodified
            log.warning("codedag: DataLoader.__iter__ was not patched: %s", error)

    def _stop_waiting(self) -> None:
        waiting, self._waiting = self._waiting, None
        if waiting is not None and waiting in sys.meta_path:
            sys.meta_path.remove(waiting)

    def _watch_for(self, loader: Any) -> LoaderWatch | None:
        if loader.__dict__.get(_WATCH_ATTR) is not None:
            return None  # the script accelerates this one itself
        with self._lock:
            order = self._order.get(loader)
            if order is None:
                if self.select is not None and not self.select(loader):
                    return None
                order = self._made_again(loader)
                if order is None:
                    order, self.seen = self.seen, self.seen + 1
                self._order[loader] = order
                if order == self.index and self.watch is None:
                    self.watch = LoaderWatch(loader, self.settings, order)
                elif order == self.index and self.watch is not None:
                    self.watch.follow(loader)  # the same loader, made again
        if self.watch is not None and self.watch.loader is loader:
            return self.watch
        return None

    def _made_again(self, loader: Any) -> int | None:
        """The order of the loader ``loader`` was made again of (the same data set object, batch
        size, workers, sampler's and collate function's kinds, ``drop_last``), or None where it
        is new (then remembered)."""
        dataset = getattr(loader, "dataset", None)
        try:
            held: Any = weakref.ref(dataset)
        except TypeError:  # a data set without weak references is compared while alive
            held = lambda: dataset  # noqa: E731
        settings = (
            id(dataset),
            type(dataset),
            getattr(loader, "batch_size", None),
            getattr(loader, "num_workers", None),
            getattr(loader, "drop_last", None),
            type(getattr(loader, "sampler", None)),
            type(getattr(loader, "batch_sampler", None)),
            getattr(loader, "collate_fn", None),
        )
        found = self._made.get(settings)
        if found is not None and found[0]() is dataset:
            return int(found[1])
        self._made[settings] = (held, self.seen)
        return None

    def end_epoch(self) -> None:
        """The watched loader's epoch is over (see :meth:`LoaderWatch.end_epoch`)."""
        if self.watch is not None:
            self.watch.end_epoch()

    def close(self) -> AcceleratedRun:
        """Restore ``DataLoader.__iter__`` and the plan's patches; return the results."""
        self._stop_waiting()
        with warnings.catch_warnings():  # the sweep reads deprecated attributes of torch
            warnings.simplefilter("ignore")
            self._patcher.restore()
        results = self.watch.close() if self.watch is not None else AcceleratedRun()
        results.loaders_seen = self.seen
        return results

    def __exit__(self, *exc: object) -> None:
        self.close()


_EVALUATION_LOOPS = frozenset(
    f"{package}.loops.{loop}"
    for package in ("lightning.pytorch", "pytorch_lightning")
    for loop in ("evaluation_loop", "prediction_loop")
)
"""Lightning's loops that iterate loaders for a sanity check, validation, test or prediction."""


def not_for_evaluation(_loader: Any) -> bool:
    """Whether the loader about to be iterated is iterated elsewhere than in a Lightning
    trainer's evaluation or prediction loop (``fit`` runs a sanity check over the validation
    loader before the first training batch): ``codedag run`` counts only those. Reads the
    calling frames' modules; imports nothing."""
    frame: Any = sys._getframe(1)
    while frame is not None:
        if frame.f_globals.get("__name__") in _EVALUATION_LOOPS:
            return False
        frame = frame.f_back
    return True


class _AfterImport:
    """A finder of ``sys.meta_path`` that calls ``then()`` once the module ``name`` has been
    executed by its own loader (imported, before the import statement returns). It finds nothing
    itself: it asks the other finders for the spec and wraps that spec's ``exec_module``."""

    def __init__(self, name: str, then: Callable[[], None]) -> None:
        self.name = name
        self.then = then

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != self.name:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        execute = getattr(loader, "exec_module", None)
        if execute is None or isinstance(loader, type):  # no loader of this module's own
            log.debug("%s is imported by %r: not patched", fullname, loader)
            return spec
        then = self.then

        def exec_module(module: Any) -> None:
            try:
                execute(module)
            finally:
                with contextlib.suppress(AttributeError):
                    del loader.exec_module  # the loader's own method again
            then()

        loader.exec_module = exec_module
        return spec
