"""Trace one batch of a PyTorch DataLoader, with or without worker processes.

With ``num_workers == 0`` the batch is traced as it is: ``next(iter(loader))`` in the calling
thread, so the DAG holds ``__next__``, each ``Dataset.__getitem__`` with its calls, and the
collate function.

With ``num_workers > 0`` the per-sample work runs in worker processes, where the tracer's hook does
not exist. Capturing it there would mean installing a hook and library wrappers in every worker,
shipping partial DAGs back and stitching their timings to the main process: fragile (fork vs
spawn, persistent workers, workers killed at shutdown) and not what the optimizer needs, which is
the work done per sample. So codedag **reproduces the first batch in-process**: it draws the
first batch's indices from the loader's own batch sampler (or sampler) and runs them through a
``num_workers=0`` DataLoader with the same dataset and ``collate_fn``. The DAG therefore has the
same calls as the worker would run, recorded in the main process. Differences, recorded in the
DAG's metadata: ``worker_init_fn`` is not run and ``torch.utils.data.get_worker_info()`` is None
during the traced batch; drawing indices advances the sampler's random state once, like starting
one epoch would.
"""

from __future__ import annotations

import logging
import operator
from typing import TYPE_CHECKING, Any

from codedag.errors import TraceError

if TYPE_CHECKING:
    from codedag.trace.tracer import EnhancedTracer

log = logging.getLogger(__name__)


def _first_indices(loader: Any) -> Any:
    sampler = loader.batch_sampler if loader.batch_sampler is not None else loader.sampler
    try:
        return next(iter(sampler))
    except StopIteration as error:
        raise TraceError("the DataLoader is empty: its sampler yields no batch") from error


def _plain_index(index: Any) -> int | str:
    """An index as JSON: an int (numpy and torch integers too), else its repr."""
    try:
        return int(operator.index(index))
    except TypeError:
        return repr(index)


def in_process_loader(loader: Any) -> tuple[Any, dict[str, Any]]:
    """A ``num_workers=0`` DataLoader that yields ``loader``'s first batch, and a description."""
    from torch.utils.data import DataLoader, IterableDataset

    info: dict[str, Any] = {
        "num_workers": loader.num_workers,
        "reproduced_in_process": True,
        "worker_init_fn_run": False,
    }
    if isinstance(loader.dataset, IterableDataset):
        replica = DataLoader(
            loader.dataset,
            batch_size=loader.batch_size,
            drop_last=loader.drop_last,
            collate_fn=loader.collate_fn,
            num_workers=0,
        )
        info["batch_indices"] = None
        return replica, info
    indices = _first_indices(loader)
    if loader.batch_sampler is not None:
        replica = DataLoader(
            loader.dataset, batch_sampler=[list(indices)], collate_fn=loader.collate_fn
        )
        info["batch_indices"] = [_plain_index(i) for i in indices]
    else:  # batch_size=None: the sampler yields single keys, no auto-collation
        replica = DataLoader(
            loader.dataset, batch_size=None, sampler=[indices], collate_fn=loader.collate_fn
        )
        info["batch_indices"] = [_plain_index(indices)]
    return replica, info


def trace_dataloader(loader: Any, tracer: EnhancedTracer | None = None) -> tuple[Any, Any]:
    """Trace one batch of ``loader``; return ``(tracer, batch)``. The DAG is ``tracer.dag``.

    Args:
        loader: a ``torch.utils.data.DataLoader``.
        tracer: the tracer to use (a default :class:`EnhancedTracer` when None).
    """
    from torch.utils.data import DataLoader

    from codedag.trace.tracer import EnhancedTracer

    if not isinstance(loader, DataLoader):
        raise TraceError(f"expected a torch.utils.data.DataLoader, got {type(loader).__name__}")
    tracer = tracer or EnhancedTracer()
    if loader.num_workers > 0:
        source, info = in_process_loader(loader)
        log.info(
            "DataLoader has %d workers: tracing its first batch in-process", loader.num_workers
        )
    else:
        source, info = loader, {"num_workers": 0, "reproduced_in_process": False}
    iterator = iter(source)
    try:
        with tracer.tracing_context():
            batch = next(iterator)
    except StopIteration as error:
        raise TraceError("the DataLoader is empty: it yields no batch") from error
    finally:
        tracer.dag.metadata["dataloader"] = {
            **info,
            "batch_size": loader.batch_size,
            "dataset": type(loader.dataset).__qualname__,
        }
    return tracer, batch
