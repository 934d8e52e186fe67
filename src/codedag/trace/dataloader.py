"""Trace the first batch of a PyTorch DataLoader, warmed up, with or without worker processes.

The first batch is what gets traced, in the calling thread, after ``warmup`` untraced runs of
as many other samples (a cold first batch pays imports, JIT compilation and caches: one function
took 2.6 s cold and 60 ms warm; other samples, because a data set that keeps what it computed, in
a dict or under ``functools.lru_cache``, would return the batch's samples from there in the
traced run, and the trace would miss the decoding a new sample does). Every run starts from the same random state, saved before the first
one: Python's ``random``, NumPy's global generator, torch's default generator, the loader's and
its sampler's generators and the random generators the dataset holds as attributes. After
tracing that state is put back, so tracing leaves the process as it found it.

- ``num_workers == 0``: the traced run is ``next(iter(loader))``, as a training loop starts an
  epoch.
- ``indices`` given (``codedag run`` with 0 workers: samples the warm-up batch did not fetch,
  :func:`unfetched_indices`): that batch is traced through a ``num_workers=0`` replica
  (:func:`indices_loader`); its code is warm, so no untraced run is needed (``warmup=0``).
- ``num_workers > 0``: the per-sample work runs in worker processes, where the tracer's hook does
  not exist. Capturing it there would need a hook and library wrappers in every worker and
  partial DAGs shipped back and stitched (fragile across fork and spawn, persistent workers,
  workers killed at shutdown); the optimizer needs the per-sample work, which a replay gives.
  So the batch is **replayed in-process exactly as worker 0 computes it**: the iterator's base
  seed is drawn and the sampler's first batch of indices taken in the order torch's iterator
  does, then ``random``, NumPy and torch are seeded as torch seeds worker 0
  (:func:`codedag.trace.replay.worker_zero`), ``get_worker_info()`` reports worker 0,
  ``worker_init_fn(0)`` runs, torch uses one thread, and the indices go through a
  ``num_workers=0`` DataLoader with the same dataset and ``collate_fn``. Under random
  augmentation the traced batch equals the workers' first batch (a test compares them).
"""

from __future__ import annotations

import contextlib
import copy
import io
import logging
import operator
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from typing import Any, Protocol, TypeVar

from codedag.errors import ConfigError, TraceError
from codedag.graph.model import ExecutionDAG
from codedag.trace.replay import RandomSnapshot, recorded_generators, worker_zero


class BatchTracer(Protocol):
    """What tracing a batch needs of a tracer (:class:`~codedag.trace.tracer.EnhancedTracer`)."""

    @property
    def dag(self) -> ExecutionDAG:
        """The DAG of the last tracing window."""
        ...

    def tracing_context(self, reach: Iterable[object] = ()) -> AbstractContextManager[Any]:
        """A tracing window; references to the wrapped functions reachable from ``reach`` are
        recorded too."""
        ...


log = logging.getLogger(__name__)
_T = TypeVar("_T")


def _plain_index(index: Any) -> int | str:
    """An index as JSON: an int (numpy and torch integers too), else its repr."""
    try:
        return int(operator.index(index))
    except TypeError:
        return repr(index)


def _index_sampler_copy(loader: Any) -> Any:
    """A copy of ``loader``'s index sampler to draw a batch's indices from, as its next epoch
    draws them, leaving the sampler as the script left it: a batch sampler that counts its
    epochs in ``__iter__`` (multi-scale training's, one that seeds itself with the epoch) would
    otherwise hand the script's next epoch the order of the one after. The data set it
    refers to is shared, never copied, and so are the loader's generator and torch's default
    one (a ``RandomSampler`` draws its order from them after the iterator drew the workers'
    base seed: their draws are the caller's to put back); the sampler itself where no copy can
    be made."""
    import torch

    sampler = loader._index_sampler
    generators = (loader.generator, torch.default_generator)
    shared = [o for o in (loader.dataset, *generators) if o is not None]
    try:
        return copy.deepcopy(sampler, {id(o): o for o in shared})
    except Exception:  # user code: a sampler holding a lock or a handle
        return sampler


def _first_task(loader: Any) -> tuple[int, Any]:
    """``(base seed, first batch of indices)`` drawn as torch's iterator draws them.

    ``_BaseDataLoaderIter.__init__`` creates the sampler iterator, then draws the base seed
    from ``loader.generator`` (torch's default generator when None); the first indices are
    taken afterwards, when the workers are fed.
    """
    import torch

    sampler_iter = iter(_index_sampler_copy(loader))
    base_seed = int(torch.empty((), dtype=torch.int64).random_(generator=loader.generator).item())
    try:
        indices = next(sampler_iter)
    except StopIteration as error:
        raise TraceError("the DataLoader is empty: its sampler yields no batch") from error
    return base_seed, indices


ISOLATED_BYTES = 16 << 20
"""The largest pickled data set :func:`isolated` copies (a file list pickles to kilobytes; one
holding its samples in memory is used as it is, rather than copied at every plan)."""


class _TooLarge(Exception):
    """A pickle grew past :data:`ISOLATED_BYTES`."""


class _BoundedBuffer(io.BytesIO):
    """A pickle's buffer that stops it at :data:`ISOLATED_BYTES`, before copying more."""

    def write(self, data: Any) -> int:
        if self.tell() + len(data) > ISOLATED_BYTES:
            raise _TooLarge
        return super().write(data)


def isolated(loader: Any) -> Any:
    """``loader`` over a copy of its data set, made as a spawned worker receives it (pickled),
    sharing its sampler, generator and settings.

    Tracing and storing run the user's code outside the training loop, and what a data set keeps
    from a call would stay in the script's own: a file handle opened at its first sample (an
    HDF5 or LMDB handle the workers forked later would share), decoded images kept in a dict,
    a counter that a curriculum reads. ``loader`` itself where its data set cannot be pickled or
    its pickle would be over :data:`ISOLATED_BYTES`.
    """
    import copy
    import pickle

    buffer = _BoundedBuffer()
    try:
        pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(loader.dataset)
        dataset = pickle.loads(buffer.getbuffer())
    except Exception:  # too large, unpicklable (a lambda, an open handle), or user code raising
        return loader
    finally:
        buffer.close()
    view = copy.copy(loader)
    object.__setattr__(view, "dataset", dataset)  # DataLoader refuses a new one once made
    object.__setattr__(view, "_iterator", None)  # never the loader's persistent workers
    return view


def unfetched_indices(loader: Any, fetched: Any, samples: int, batches: int = 4) -> Any:
    """Indices of up to ``samples`` samples of ``loader``'s map-style dataset that ``fetched`` (a
    batch this process fetched already) does not hold, in the order a new epoch's batch sampler
    yields them (within its first ``batches`` batches; its draws are the caller's to put back).

    A data set that keeps what it computed (a dict of decoded images, ``functools.lru_cache``)
    takes another path for a sample it computed already: a trace of those would see none of the
    calls a new sample makes, the ones a fresh worker and every later epoch's workers run.
    ``fetched`` itself where the sampler yields no other index or its indices are not hashable.
    """
    single = loader.batch_sampler is None  # one key per fetch, not a list
    try:
        seen = {fetched} if single else set(fetched)
        found: list[Any] = []
        for number, batch in enumerate(iter(_index_sampler_copy(loader))):
            found.extend(i for i in ([batch] if single else batch) if i not in seen)
            if len(found) >= samples or number + 1 >= batches:
                break
    except TypeError:  # unhashable indices
        return fetched
    if not found:
        return fetched
    return found[0] if single else found[:samples]


def indices_loader(loader: Any, indices: Any, collate_fn: Any = None) -> Any:
    """A ``num_workers=0`` DataLoader over ``loader``'s map-style dataset yielding one batch: the
    one of ``indices`` (what ``loader``'s batch sampler yielded, or one key without
    auto-collation), collated by ``collate_fn`` (default: ``loader``'s).

    It has a generator of its own, so creating its iterator draws nothing from torch's default
    generator.
    """
    import torch
    from torch.utils.data import DataLoader

    collate = loader.collate_fn if collate_fn is None else collate_fn
    generator = torch.Generator()
    if loader.batch_sampler is not None:
        return DataLoader(
            loader.dataset, batch_sampler=[list(indices)], collate_fn=collate, generator=generator
        )
    return DataLoader(  # batch_size=None: the sampler yields single keys, no auto-collation
        loader.dataset, batch_size=None, sampler=[indices], collate_fn=collate, generator=generator
    )


def _json_indices(loader: Any, indices: Any) -> list[int | str]:
    if loader.batch_sampler is not None:
        return [_plain_index(i) for i in indices]
    return [_plain_index(indices)]


def _replica(loader: Any, indices: Any) -> tuple[Any, Any]:
    """A ``num_workers=0`` DataLoader yielding the batch of ``indices``, and the indices as JSON.

    Its generator is its own: creating its iterator draws nothing from torch's default generator
    (which worker 0's seeding has just set).
    """
    import torch
    from torch.utils.data import DataLoader, IterableDataset

    if isinstance(loader.dataset, IterableDataset):
        replica = DataLoader(
            loader.dataset,
            batch_size=loader.batch_size,
            drop_last=loader.drop_last,
            collate_fn=loader.collate_fn,
            num_workers=0,
            generator=torch.Generator(),
        )
        return replica, None
    return indices_loader(loader, indices), _json_indices(loader, indices)


def trace_first_batch(
    loader: Any,
    tracer: BatchTracer,
    warmup: int = 1,
    indices: Any = None,
    samples: int | None = None,
) -> Any:
    """Trace the first batch of ``loader`` with ``tracer``; return the batch. The DAG is
    ``tracer.dag``.

    Args:
        loader: a ``torch.utils.data.DataLoader``.
        tracer: the tracer to use.
        warmup: untraced runs before the traced one, of as many other samples of the data set
            (the same batch where it has no other, or is iterable).
        indices: trace the batch of these indices instead (what the batch sampler yielded for a
            batch this process fetched already; a map-style dataset), in this process.
        samples: trace only the batch's first ``samples`` samples (a map-style dataset whose
            batch is given by ``indices`` or fetched by workers; else the whole batch): their
            random draws are the ones they get in the whole batch. The batch returned is theirs.
    """
    _check_arguments(loader, warmup, indices, samples)
    return on_a_copy(loader, lambda view: _trace_batch(view, tracer, warmup, indices, samples))


def on_a_copy(loader: Any, run: Callable[[Any], _T]) -> _T:
    """``run(view)`` on a view of ``loader`` over a copy of its data set (:func:`isolated`), or
    ``run(loader)`` where no copy can be made or the copy fails (a ``__getstate__`` dropping a
    handle that ``__getitem__`` reads, for a ``worker_init_fn`` to open again): then the data
    set is run as it is, as without the copy."""
    view = isolated(loader)
    if view is loader:
        return run(loader)
    try:
        return run(view)
    except Exception as error:
        log.debug(
            "a copy of the data set failed (%s: %s): run as it is", type(error).__name__, error
        )
        return run(loader)


def _trace_batch(
    loader: Any, tracer: BatchTracer, warmup: int, indices: Any, samples: int | None
) -> Any:
    """:func:`trace_first_batch` on ``loader``, its arguments checked."""
    from torch.utils.data import IterableDataset

    sampler = getattr(loader, "sampler", None)
    snapshot = RandomSnapshot(
        generators=(loader.generator, getattr(sampler, "generator", None)),
        holders=(loader.dataset, sampler),
    )
    workers = loader.num_workers > 0 and indices is None
    info: dict[str, Any] = {"num_workers": loader.num_workers, "reproduced_in_process": workers}
    replica, base_seed = None, None
    try:
        if indices is not None:
            indices = _first_samples(loader, indices, samples)
            replica, batch_indices = indices_loader(loader, indices), _json_indices(loader, indices)
            info.update(batch_indices=batch_indices, batch_fetched_before=True)
        elif workers:
            base_seed, indices = _first_task(loader)
            replica, batch_indices = _replica(loader, _first_samples(loader, indices, samples))
            info.update(
                batch_indices=batch_indices,
                base_seed=base_seed,
                worker_id=0,
                worker_init_fn_run=loader.worker_init_fn is not None,
            )
            log.info(
                "DataLoader has %d workers: replaying worker 0's first batch in-process",
                loader.num_workers,
            )
        after_draws = RandomSnapshot(
            generators=(loader.generator, getattr(sampler, "generator", None)),
            holders=(loader.dataset, sampler),
        )
        traced_indices = None if indices is None else _first_samples(loader, indices, samples)
        warm = _warm_up_replica(loader, traced_indices, samples, warmup)
        after_draws.restore()
        batch = None
        for run in range(warmup + 1):
            batch = None  # freed first, as a training loop frees a batch it has trained on
            after_draws.restore()
            traced = run == warmup
            if not workers and indices is None:
                snapshot.restore()  # every run is the epoch's first batch
            source = replica if traced or warm is None else warm  # None: the loader's own
            batch = _run(loader, source, tracer if traced else None, base_seed)
    finally:
        snapshot.restore()
        tracer.dag.metadata["dataloader"] = {
            **info,
            "warmup": warmup,
            "batch_size": loader.batch_size,
            "dataset": type(loader.dataset).__qualname__,
            "iterable": isinstance(loader.dataset, IterableDataset),
            "dataset_len": _length(loader.dataset),
            "random_state_restored": True,
        }
    return batch


def _check_arguments(loader: Any, warmup: int, indices: Any, samples: int | None) -> None:
    from torch.utils.data import DataLoader, IterableDataset

    if not isinstance(loader, DataLoader):
        raise TraceError(f"expected a torch.utils.data.DataLoader, got {type(loader).__name__}")
    if not isinstance(warmup, int) or isinstance(warmup, bool) or warmup < 0:
        raise ConfigError(f"warmup must be an integer >= 0, got {warmup!r}")
    if indices is not None and isinstance(loader.dataset, IterableDataset):
        raise ConfigError("indices name a batch of a map-style dataset; this one is iterable")
    if samples is not None and (not isinstance(samples, int) or samples < 1):
        raise ConfigError(f"samples must be an integer >= 1, got {samples!r}")


def _run(loader: Any, source: Any, tracer: BatchTracer | None, base_seed: int | None) -> Any:
    """One run's batch: ``source``'s (a replica; None: ``loader``'s own first batch), traced by
    ``tracer`` (None: untraced), as worker 0 computes it where ``base_seed`` is given."""
    replay = worker_zero(loader, base_seed) if base_seed is not None else contextlib.nullcontext()
    with replay:
        return _next(iter(loader if source is None else source), tracer, loader.dataset)


def _warm_up_replica(loader: Any, traced: Any, samples: int | None, warmup: int) -> Any:
    """A replica (:func:`indices_loader`) over samples other than the traced ones (``traced``:
    their indices; None: the first batch of a new epoch), for the untraced runs: a data set
    that keeps what it computed would return the traced samples from its own cache, and their
    trace would miss the calls a new sample makes. None: no untraced run, an iterable data set,
    or no other sample; then the untraced runs fetch the traced samples."""
    from torch.utils.data import IterableDataset

    if warmup == 0 or isinstance(loader.dataset, IterableDataset):
        return None
    if traced is None:  # the first batch's, drawn as the traced run's iterator draws it
        traced = _first_samples(loader, _first_task(loader)[1], samples)
    count = 1 if loader.batch_sampler is None else len(list(traced))
    others = unfetched_indices(loader, traced, count)
    return None if others is traced else indices_loader(loader, others)


def _first_samples(loader: Any, indices: Any, samples: int | None) -> Any:
    """The first ``samples`` of a batch's indices (all of them: ``samples`` None, or a loader
    without a batch sampler, whose indices are one key)."""
    if samples is None or loader.batch_sampler is None:
        return indices
    return list(indices)[:samples]


def _length(dataset: Any) -> int | None:
    """Items of a map-style data set (``None`` for an iterable one or a failing ``__len__``)."""
    try:
        return len(dataset)
    except Exception:  # an iterable dataset, or user code that raises
        return None


def _next(iterator: Any, tracer: BatchTracer | None, dataset: object) -> Any:
    """The iterator's next batch, traced by ``tracer`` (None: untraced), with the draws of the
    NumPy generators ``dataset`` holds recorded."""
    try:
        if tracer is None:
            return next(iterator)
        with recorded_generators(dataset), tracer.tracing_context(reach=(dataset,)):
            return next(iterator)
    except StopIteration as error:
        raise TraceError("the DataLoader is empty: it yields no batch") from error
