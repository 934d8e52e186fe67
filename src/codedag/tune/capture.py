"""Find the DataLoader of a pipeline given as ``codedag trace`` takes it.

``--dataloader MODULE:FACTORY`` names a function that returns the DataLoader. A ``TARGET``
function may return one too; when it returns something else (it runs the pipeline itself, as a
trace target does), the first DataLoader it creates is taken: ``DataLoader.__init__`` is watched
through :class:`codedag.patching.Patcher` while the target runs, and restored afterwards.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import weakref
from collections.abc import Callable
from typing import Any

from codedag.errors import ConfigError
from codedag.patching import Patcher

log = logging.getLogger(__name__)

_INIT = "torch.utils.data.dataloader.DataLoader.__init__"

# The arguments each captured DataLoader was created with explicitly (their names).
_EXPLICIT: weakref.WeakKeyDictionary[Any, frozenset[str]] = weakref.WeakKeyDictionary()


def explicit_settings(loader: Any) -> frozenset[str] | None:
    """The arguments ``loader`` was created with explicitly, when it was captured here."""
    return _EXPLICIT.get(loader)


def loader_from_factory(factory: Callable[[], Any], what: str) -> Any:
    """Call ``factory`` and return the DataLoader it returns or, failing that, the first it made.

    Args:
        factory: a function without arguments.
        what: how to name it in errors (``--dataloader pkg.mod:make``).

    Raises:
        ConfigError: the function raised, or neither returned nor created a DataLoader.
    """
    from torch.utils.data import DataLoader

    created: list[Any] = []

    def watch(original: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(original)

        def __init__(loader: object, *args: Any, **kwargs: Any) -> None:
            original(loader, *args, **kwargs)
            created.append(loader)
            with contextlib.suppress(TypeError):  # the original accepted them
                _EXPLICIT[loader] = frozenset(signature.bind(loader, *args, **kwargs).arguments)

        return __init__

    patcher = Patcher("codedag-tune-capture")
    patcher.patch(_INIT, watch, rebind_references=False)
    try:
        result = factory()
    except Exception as error:
        raise ConfigError(f"{what} raised {type(error).__name__}: {error}") from error
    finally:
        patcher.restore()
    if isinstance(result, DataLoader):
        return result
    if created:
        if len(created) > 1:
            log.info(
                "%s created %d DataLoaders; tuning the first (over %s)",
                what,
                len(created),
                type(created[0].dataset).__qualname__,
            )
        return created[0]
    raise ConfigError(
        f"{what} returned {type(result).__name__} and created no DataLoader: give a function "
        "that returns the training DataLoader (--dataloader MODULE:FACTORY)"
    )
