"""Accelerate the training DataLoader of a Lightning ``Trainer.fit``; the training code does not change.

::

    from codedag.integrations.lightning_accelerate import AccelerateCallback

    trainer = Trainer(callbacks=[AccelerateCallback()])
    trainer.fit(model, datamodule)  # summary in Lightning's log, results.json in trainer.log_dir

What ``codedag run`` does for a script (docs/run.md), done for ``fit``: one batch of the training
DataLoader is traced and planned in its first epoch, after its first batch (with workers once the
planner's background import ended), and the plan applies from then on; the end of ``fit`` (or an exception in it) restores everything the plan patched.
The batches are those Lightning gets without the callback, so the losses are the same. A plan
stored for the same pipeline by an earlier run applies from the first batch.

From ``setup`` to the end of ``fit``, ``DataLoader.__iter__`` goes through a
:class:`~codedag.integrations.accelerate.ScriptWatch` that counts only the trainer's training
loaders (``trainer.train_dataloader``): the sanity check's and validation's loaders are never
planned. ``on_train_epoch_end`` ends the epoch for the watch, so a loop stopped early
(``limit_train_batches``) is planned at its epoch's end too.

Needs ``lightning`` (or ``pytorch_lightning``): the ``codedag[lightning]`` extra.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codedag.errors import ConfigError
from codedag.integrations.accelerate import ScriptWatch
from codedag.integrations.lightning_base import Callback as _Callback
from codedag.integrations.lightning_base import require_lightning
from codedag.integrations.run_results import AcceleratedRun
from codedag.integrations.watch import WatchSettings

if TYPE_CHECKING:
    from codedag.plan.cache import FirstEpoch

log = logging.getLogger(__name__)


def _rank_zero_info() -> Callable[[str], None]:
    """Lightning's ``rank_zero_info`` (its console log, rank 0 only), else this module's log."""
    try:
        from lightning.pytorch.utilities import rank_zero_info

        return rank_zero_info
    except ImportError:
        pass
    try:
        from pytorch_lightning.utilities import rank_zero_info as legacy_info

        return legacy_info
    except ImportError:
        return log.info


def _leaves(iterables: Any) -> Iterator[Any]:
    """The loaders in Lightning's ``train_dataloader`` (a loader, or lists and dicts of them)."""
    stack = [iterables]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif item is not None:
            yield item


def is_train_loader(trainer: Any, loader: Any) -> bool:
    """Whether ``loader`` is one of ``trainer``'s training loaders (by identity)."""
    return any(item is loader for item in _leaves(getattr(trainer, "train_dataloader", None)))


class AccelerateCallback(*((_Callback,) if _Callback is not None else ())):  # type: ignore[misc]
    """Plans the training DataLoader of ``Trainer.fit`` after its first epoch, applies the plan.

    Args:
        out: folder for ``results.json`` (default: ``trainer.log_dir``, the first logger's folder
            or ``default_root_dir`` without a logger).
        loader: which training loader to plan, counted from 0 in the order of first iteration.
        plan_budget_s: seconds tracing and planning may take; past it the loader runs unmodified.
        replan: plan again even when a plan is stored for this pipeline.
        store_plans: read and keep plans across runs.
        first_epoch: how the prefix cache's first epoch stores values (``all``, the default,
            ``auto`` or ``paced``; docs/cache.md).

    Attributes:
        results: what the fit measured and decided (set when ``fit`` ends).

    Raises:
        ConfigError: lightning (or pytorch_lightning) is not installed.
    """

    def __init__(
        self,
        out: str | os.PathLike[str] | None = None,
        *,
        loader: int = 0,
        plan_budget_s: float = 60.0,
        replan: bool = False,
        store_plans: bool = True,
        first_epoch: FirstEpoch = "all",
    ) -> None:
        require_lightning("AccelerateCallback", "run the script under codedag run")
        if loader < 0:
            raise ConfigError(f"loader must be 0 or more, got {loader}")
        super().__init__()
        self.out = None if out is None else Path(out)
        self.loader = loader
        self.settings = WatchSettings(plan_budget_s, replan, store_plans, first_epoch)
        self.results: AcceleratedRun | None = None
        self._watch: ScriptWatch | None = None
        self._folder: Path | None = None

    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        """Start watching the trainer's training loaders (``fit`` only)."""
        if str(getattr(stage, "value", stage)) != "fit" or self._watch is not None:
            return
        self.results = None
        watch = ScriptWatch(
            self.settings, self.loader, select=lambda loader: is_train_loader(trainer, loader)
        )
        watch.__enter__()
        self._watch = watch

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        """Find the results folder while every process takes part (``log_dir`` broadcasts)."""
        if self.out is None:
            folder = getattr(trainer, "log_dir", None) or getattr(trainer, "default_root_dir", None)
            self._folder = Path(folder or ".")

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        """Plan now when the epoch's loop stopped before its iterator's end."""
        if self._watch is not None:
            self._watch.end_epoch()

    def teardown(self, trainer: Any, pl_module: Any, stage: str) -> None:
        """Restore everything, log the summary and write ``results.json`` (``fit`` only)."""
        if str(getattr(stage, "value", stage)) == "fit":
            self._finish(trainer, exit_code=0)

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        """The same when ``fit`` fails (Lightning calls no ``teardown`` then)."""
        self._finish(trainer, exit_code=1)

    def _finish(self, trainer: Any, exit_code: int) -> None:
        watch, self._watch = self._watch, None
        if watch is None:
            return
        from codedag.integrations.run_summary import summary_lines
        from codedag.version import __version__

        results = watch.close()
        results.codedag_version = __version__
        results.exit_code = exit_code
        self.results = results
        info = _rank_zero_info()
        info("\n".join(summary_lines(results, self.loader, label="codedag")))
        if not getattr(trainer, "is_global_zero", True):
            return
        folder = self.out or self._folder or Path(getattr(trainer, "default_root_dir", "."))
        try:
            path = results.save(folder)
        except Exception as error:  # the training's outcome matters more than our file
            log.warning("codedag: results not written to %s: %s", folder, error)
            return
        info(f"codedag: results in {path}")
